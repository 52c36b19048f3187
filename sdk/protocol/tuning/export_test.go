package tuning

// Test hooks: the host's GC headroom tuner, started and stopped in this
// process.
var (
	StartHeadroom = startHeadroom
	StopHeadroom  = stopHeadroom
	GCPercentFor  = gcPercentFor
	SetGCBusy     = setGCBusy
)

package tuning

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// GCHeadroom is how far the host's heap may grow past what the last
// collection left live before the next collection starts, when that is
// more than Go's default (the heap doubles). A host routes calls: it keeps
// a few MB live and allocates some 20 KB per call that die with the call,
// so at Go's default it collected every couple of hundred calls, and each
// collection scans the same roots (the goroutines' stacks, the binary's
// globals) whatever the heap's size: at 32 callers over HTTP that cost a
// fifth of the host's CPU per call (README, "As a gateway"). A host whose
// live heap is larger than the headroom runs at Go's default.
//
// The price is resident memory while calls come: up to GCHeadroom more,
// which the host gives back once it is quiet (Quiet); an idle host runs
// at Go's default (gcBusy), and so does one whose calls come slowly
// (gcHotRate).
const GCHeadroom = 16 << 20

// gcHotRate is the allocation rate, in bytes a second between two
// collections, from which the headroom applies. Below it collections are
// rare at Go's default (under two a second) and cost little, and the
// headroom would only keep memory: an agent's calls, one every 50 ms over
// HTTP, left the host at 37 MB resident with it against 29 MB without
// (18.7 against 10.2 MB of heap and runtime). At 32 callers a host
// allocates 40-60 MB a second.
const gcHotRate = 8 << 20

// maxGCPercent bounds the GC percent the headroom asks for when hardly
// anything is live.
const maxGCPercent = 1000

// gcTuner sets the GC percent after every collection so that the next
// comes when the heap has grown by max(live, GCHeadroom): Go's GOGC with a
// floor under the growth. It is the host's alone (startHeadroom), and only
// when the user set neither GOGC nor GOMEMLIMIT.
type gcTuner struct {
	mu      sync.Mutex
	gen     uint64 // the running tuner's generation; 0 when stopped
	starts  uint64 // generations handed out
	percent int    // as last set
	restore int    // the percent before start
	sample  [2]metrics.Sample
	allocs  uint64 // bytes allocated until the last tune
	at      int64  // when the last tune ran (monotonic)
}

var headroom gcTuner

// gcSentinel is an object made to be collected: its cleanup runs once per
// collection. It holds a pointer and is 16 bytes, so that it is never one
// of the runtime's batched tiny allocations, whose cleanups may wait.
type gcSentinel struct {
	_ *byte
	_ uint64
}

// startHeadroom starts the tuner (see GCHeadroom); a second start is a
// no-op.
func startHeadroom() {
	headroom.mu.Lock()
	defer headroom.mu.Unlock()
	if headroom.gen != 0 {
		return
	}
	headroom.starts++
	headroom.gen = headroom.starts
	headroom.restore = debug.SetGCPercent(100)
	headroom.percent = 100
	headroom.sample[0].Name = "/gc/heap/live:bytes"
	headroom.sample[1].Name = "/gc/heap/allocs:bytes"
	headroom.tuneLocked()
	headroom.arm(headroom.gen)
}

// stopHeadroom stops the tuner and puts back the GC percent it found.
func stopHeadroom() {
	headroom.mu.Lock()
	defer headroom.mu.Unlock()
	if headroom.gen == 0 {
		return
	}
	headroom.gen = 0
	debug.SetGCPercent(headroom.restore)
}

// arm makes a sentinel whose cleanup runs collected after the next
// collection.
func (t *gcTuner) arm(gen uint64) {
	runtime.AddCleanup(&gcSentinel{}, t.collected, gen)
}

// collected runs after a collection: it sets the percent for the next one
// and arms itself again, unless the tuner of generation gen was stopped.
func (t *gcTuner) collected(gen uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gen != gen {
		return
	}
	t.tuneLocked()
	t.arm(gen)
	if fn := idleCollected.Load(); fn != nil && !gcBusy.Load() {
		(*fn)()
	}
}

// gcBusy is set while calls come (Quiet): an idle host runs at Go's
// default, so that what its periodic work allocates (health checks, the
// checks of the .git placeholders) is collected long before it reaches
// the headroom, and the host stays as small as Quiet made it.
var gcBusy atomic.Bool

// setGCBusy says whether calls are coming; the percent follows at the
// next collection.
func setGCBusy(busy bool) { gcBusy.Store(busy) }

// idleCollected, when set, is told of each collection while the host is
// quiet (Quiet.Background: a collection reads the function tables to scan
// the goroutines' stacks, and so maps some 4 MB of the binary back).
var idleCollected atomic.Pointer[func()]

// tuneLocked sets the percent from the live heap the last collection
// left and the rate of allocation since the tune before.
func (t *gcTuner) tuneLocked() {
	metrics.Read(t.sample[:])
	live, allocs := uint64(0), uint64(0)
	if t.sample[0].Value.Kind() == metrics.KindUint64 {
		live = t.sample[0].Value.Uint64()
	}
	if t.sample[1].Value.Kind() == metrics.KindUint64 {
		allocs = t.sample[1].Value.Uint64()
	}
	now := monotonic()
	hot := allocs >= t.allocs && now > t.at && float64(allocs-t.allocs)*1e9/float64(now-t.at) >= gcHotRate
	t.allocs, t.at = allocs, now
	p := 100
	if gcBusy.Load() && hot {
		p = gcPercentFor(live)
	}
	// Small changes are not worth the runtime's recomputing its pacing.
	if p != t.percent && (p*10 < t.percent*9 || p*10 > t.percent*11 || p == 100) {
		debug.SetGCPercent(p)
		t.percent = p
	}
}

// gcPercentFor is the GC percent that lets a heap with live bytes live grow
// by max(live, GCHeadroom) before the next collection.
func gcPercentFor(live uint64) int {
	if live == 0 {
		return maxGCPercent
	}
	p := uint64(GCHeadroom) * 100 / live
	return int(max(100, min(p, maxGCPercent)))
}

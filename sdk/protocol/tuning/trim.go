package tuning

import (
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// TrimAfter is how long a Trimmer waits after the last work that used
// much memory before it returns the free heap to the system.
const TrimAfter = time.Second

// LargeCall is the size, in bytes of arguments or of result, from which a
// call through the host counts as large (Quiet.Large).
const LargeCall = 1 << 20

// Trimmer returns the heap that large work used to the system once that
// work has stopped for TrimAfter: Go keeps freed heap resident for
// minutes (the scavenger returns only what lies above the next
// collection's goal, and without allocation no collection comes), which
// after a few 5 MB file reads was most of what a process held. One
// debounced timer: each later Later pushes it back, so work in a row pays
// no collection of its own. The trim collects twice before it returns the
// free pages: sync.Pool keeps what one collection finds unused until the
// next, and the pooled buffers of large work are large (a host that had
// relayed 4 MB results held 17 MB of heap after one collection, 7-11 MB
// after two). The zero Trimmer is ready to use.
type Trimmer struct {
	mu     sync.Mutex
	timer  *time.Timer
	closed bool
}

// Later schedules the trim TrimAfter from now (or pushes it back).
func (t *Trimmer) Later() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if t.timer == nil {
		t.timer = time.AfterFunc(TrimAfter, trim)
		return
	}
	t.timer.Reset(TrimAfter)
}

// Cancel drops a pending trim; a later Later schedules one again.
func (t *Trimmer) Cancel() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timer != nil {
		t.timer.Stop()
	}
}

// Stop drops a pending trim; Later does nothing after it.
func (t *Trimmer) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	if t.timer != nil {
		t.timer.Stop()
	}
}

// trim collects twice (see Trimmer) and returns the free heap.
func trim() {
	runtime.GC()
	debug.FreeOSMemory()
}

package filesystem

import (
	"runtime/debug"
	"sync"
	"time"
)

// trimAfter is how long the plugin waits, once a call that read much has
// finished and no other such call came, before it returns its free memory
// to the system.
const trimAfter = time.Second

// trimmer returns the memory a large read or search used to the system
// once the plugin is idle: Go keeps freed heap (a grep's buffers, a 5 MB
// file's text) resident for minutes, which is most of what a filesystem
// plugin holds after a burst of work. One debounced timer: each later call
// pushes it back, so calls in a row pay no garbage collection of their own.
type trimmer struct {
	mu     sync.Mutex
	timer  *time.Timer
	closed bool
}

// later schedules (or pushes back) the trim.
func (t *trimmer) later() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if t.timer == nil {
		t.timer = time.AfterFunc(trimAfter, debug.FreeOSMemory)
		return
	}
	t.timer.Reset(trimAfter)
}

// stop cancels a pending trim; later does nothing after it.
func (t *trimmer) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	if t.timer != nil {
		t.timer.Stop()
	}
}

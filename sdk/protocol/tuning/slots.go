package tuning

import (
	"os"
	"runtime"
	"sync"
	"time"
)

// The host runs with one scheduler slot (see the package doc): a call
// through it wakes no second thread, which on a small machine is worth
// more than the second core. Over HTTP that holds for one caller, not for
// many: mcp-go's HTTP transport and net/http cost the host two to three
// times the CPU per call of the stdio route, and one slot capped a host
// serving 32 HTTP callers at the work of one core (on a 2-vCPU machine,
// 0.70x the direct server's calls/s with one slot, 0.88x with two; p50 at
// one caller 1.68x with one, 1.92x with two). So a host serving HTTP
// adapts (Quiet.AdaptSlots): while calls come it reads its CPU time every
// slotPeriod, takes every CPU once it has used more than slotHigh of its
// one slot for slotRise periods, and goes back to one slot once it has
// used less than slotLow of a core for slotFall periods.
const (
	slotPeriod = 50 * time.Millisecond
	slotHigh   = 0.8 // of a core
	slotLow    = 0.5
	slotRise   = 2   // periods: a burst of calls gets every CPU within 100 ms
	slotFall   = 100 // periods: and keeps them through 5 s of calm, ready for the next burst
)

// slotController adapts GOMAXPROCS while calls come (see above). Its
// goroutine runs only between Quiet's busy(true) and busy(false).
type slotController struct {
	mu     sync.Mutex
	stop   chan struct{} // closes the running loop; nil when none runs
	done   chan struct{} // closed when the loop has ended
	max    int           // the slots to take when busy
	cpu    func() time.Duration
	set    func(int)
	period time.Duration
}

func newSlotController() *slotController {
	return &slotController{max: runtime.NumCPU(), cpu: processCPU, set: func(n int) { runtime.GOMAXPROCS(n) }, period: slotPeriod}
}

// busy starts the loop (calls come) or stops it and goes back to one
// slot (the host is quiet).
func (c *slotController) busy(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case on && c.stop == nil && c.max > 1:
		c.stop, c.done = make(chan struct{}), make(chan struct{})
		go c.loop(c.stop, c.done)
	case !on && c.stop != nil:
		close(c.stop)
		<-c.done
		c.stop, c.done = nil, nil
	}
}

func (c *slotController) loop(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(c.period)
	defer t.Stop()
	slots, high, low := 1, 0, 0
	last, lastAt := c.cpu(), time.Now()
	for {
		select {
		case <-stop:
			if slots != 1 {
				c.set(1)
			}
			return
		case now := <-t.C:
			used := c.cpu()
			load := float64(used-last) / float64(now.Sub(lastAt))
			last, lastAt = used, now
			switch {
			case slots == 1 && load > slotHigh:
				if high++; high >= slotRise {
					slots, high = c.max, 0
					c.set(slots)
				}
			case slots > 1 && load < slotLow:
				if low++; low >= slotFall {
					slots, low = 1, 0
					c.set(slots)
				}
			default:
				high, low = 0, 0
			}
		}
	}
}

// AdaptSlots makes the host take every CPU while it is busy serving calls
// and go back to one scheduler slot otherwise (see slotController), unless
// GOMAXPROCS is set. For a host serving HTTP; call it before calls come.
func (q *Quiet) AdaptSlots() {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	c := newSlotController()
	gc := q.busy
	q.busy = func(on bool) {
		if gc != nil {
			gc(on)
		}
		c.busy(on)
	}
}

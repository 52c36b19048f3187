package tuning

import (
	"runtime/debug"
	"sync/atomic"
	"time"
)

// QuietDelay is how long the host must have seen no call begin or end
// before it gives memory back (Quiet). The first call after that pays for
// the pages it maps again, 5-10 ms on a 2-vCPU machine (measured against a
// host without Quiet); after 10 s without calls, that is under 0.1 % of
// the wait, and an agent's calls within a session, a few seconds apart,
// do not pay it.
const QuietDelay = 10 * time.Second

// Quiet gives the host's memory back to the system once it has been quiet
// for QuietDelay after a burst of calls: the pages of its binary that the
// calls touched are unmapped (as Host does after start-up) and the heap
// the calls freed is returned (debug.FreeOSMemory). During a burst the
// host keeps what it uses, so calls in a row pay nothing; the first call
// after a quiet spell pays the page faults that map back what it uses
// (see QuietDelay).
//
// Why: a host that served calls kept 25-30 MB resident when idle, twice
// its resident size before them. Most of it was clean pages of its own
// 33 MB binary, which the kernel maps 64 KB at a time around each page
// touched: the calls' code and data, and the function tables the garbage
// collector reads to scan goroutine stacks (5 MB of them after a few
// hundred collections). Go also keeps freed heap for minutes.
//
// Touch is called at every call's start and end; it costs two atomic
// operations and a reading of the monotonic clock. The zero Quiet is not
// usable: use NewQuiet.
type Quiet struct {
	last    atomic.Int64 // when a call last began or ended (now's reading)
	armed   atomic.Bool  // a check is pending
	delay   time.Duration
	release func()
	after   func(time.Duration, func()) // time.AfterFunc; tests drive it
	now     func() int64                // monotonic nanoseconds; tests drive it
}

// NewQuiet returns a Quiet that releases memory after delay without
// calls (QuietDelay for the host).
func NewQuiet(delay time.Duration) *Quiet {
	return &Quiet{delay: delay, release: func() {
		// The collection first: it reads the function tables that the
		// unmapping then gives back.
		debug.FreeOSMemory()
		releaseStartupPages()
	}, after: func(d time.Duration, f func()) { time.AfterFunc(d, f) }, now: monotonic}
}

// start is the origin of monotonic.
var start = time.Now()

// monotonic reads the monotonic clock in nanoseconds.
func monotonic() int64 { return int64(time.Since(start)) }

// Touch records activity: a call began or ended.
func (q *Quiet) Touch() {
	q.last.Store(q.now())
	if !q.armed.Load() && q.armed.CompareAndSwap(false, true) {
		q.after(q.delay, q.check)
	}
}

// check runs delay after the first activity since the last release, and
// then again when delay will have passed since the last activity.
func (q *Quiet) check() {
	if quiet := time.Duration(q.now() - q.last.Load()); quiet < q.delay {
		q.after(q.delay-quiet, q.check)
		return
	}
	q.armed.Store(false)
	if time.Duration(q.now()-q.last.Load()) < q.delay {
		// A call came between the look and the disarm, and did not arm a
		// check of its own: arm one for it.
		if q.armed.CompareAndSwap(false, true) {
			q.after(q.delay, q.check)
		}
		return
	}
	q.release()
}

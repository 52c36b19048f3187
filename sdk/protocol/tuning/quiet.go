package tuning

import (
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
	last     atomic.Int64 // when a call last began or ended (now's reading)
	armed    atomic.Bool  // a check is pending
	released atomic.Bool  // memory was given back and no call came since
	active   atomic.Bool  // calls came since the last release (busy was told)
	busy     func(bool)   // told when calls start coming and when the host is quiet (the GC headroom)
	again    atomic.Bool  // an unmapping after background work is pending
	delay    time.Duration
	release  func()
	unmap    func()                      // the binary's pages only (Background)
	after    func(time.Duration, func()) // time.AfterFunc; tests drive it
	now      func() int64                // monotonic nanoseconds; tests drive it
	trim     Trimmer                     // the heap after large calls (Large)
}

// BackgroundSettle is how long after background work (Background) the
// pages it mapped are given back again: long enough for the health checks
// of many servers, which come together, to share one unmapping; short,
// because work that comes every few seconds (the checks of the .git
// placeholders, every 2 s) would otherwise keep the pages mapped most of
// the time.
const BackgroundSettle = 100 * time.Millisecond

// NewQuiet returns a Quiet that releases memory after delay without
// calls (QuietDelay for the host). Collections while it is quiet count as
// background work (Background).
func NewQuiet(delay time.Duration) *Quiet {
	q := newQuiet(delay)
	bg := q.Background
	idleCollected.Store(&bg)
	time.AfterFunc(SettleDelay, q.settled)
	return q
}

// settled counts the host's start-up release (Host, SettleDelay after it
// starts) as a release: a host that has had no call yet gives back the
// pages its idle work maps (Background) as one that went quiet after
// calls does. Before, such a host, started by a client that only listed
// its tools, drifted from 10 to 14 MB resident within half a minute, the
// periodic checks mapping its binary back in.
func (q *Quiet) settled() {
	if !q.active.Load() && !q.released.Load() {
		q.released.Store(true)
		q.Background()
	}
}

func newQuiet(delay time.Duration) *Quiet {
	return &Quiet{delay: delay, release: func() {
		// The collections first: they read the function tables that the
		// unmapping then gives back. Two, as a Trimmer's (trim): what
		// sync.Pool kept through the first goes in the second (HTTP front
		// after 20,000 calls, 11 s later: 10.5-11.7 MB anonymous with one,
		// 9.9-10.7 MB with two, ten alternating runs).
		trim()
		releaseStartupPages()
	}, unmap: releaseStartupPages, busy: setGCBusy, after: func(d time.Duration, f func()) { time.AfterFunc(d, f) }, now: monotonic}
}

// start is the origin of monotonic.
var start = time.Now()

// monotonic reads the monotonic clock in nanoseconds.
func monotonic() int64 { return int64(time.Since(start)) }

// Touch records activity: a call began or ended.
func (q *Quiet) Touch() {
	q.last.Store(q.now())
	if q.released.Load() {
		q.released.Store(false)
	}
	if !q.active.Load() && q.active.CompareAndSwap(false, true) && q.busy != nil {
		q.busy(true)
	}
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
	q.active.Store(false)
	if q.busy != nil {
		q.busy(false) // before the release's collection, which sets the GC percent
	}
	q.release()
	q.released.Store(true)
	// What runs in the wake of the release itself (the collection's
	// cleanups, the runtime's scavenger) maps pages back: they go again.
	q.Background()
}

// Large records a call that moved much data (LargeCall bytes of
// arguments or of result or more): the heap it used is returned TrimAfter
// after the last such call (Trimmer), without waiting for QuietDelay. A
// host that relayed a few 5 MB file reads held 40 MB more than before
// them until it was quiet; the pages of its binary wait for QuietDelay as
// before.
func (q *Quiet) Large() { q.trim.Later() }

// Stop ends what Touch started for a host that stops serving: busy is
// told the host is quiet (the GC headroom and the scheduler slots'
// watch, AdaptSlots, end), and a pending trim (Large) is dropped. Memory
// is not given back: the process is ending. Touch after Stop starts them
// again.
func (q *Quiet) Stop() {
	q.trim.Cancel()
	if q.active.CompareAndSwap(true, false) && q.busy != nil {
		q.busy(false)
	}
}

// Background records work that is not a call, done while the host is idle
// (a health check of a server, every 15 s by default): once the host has
// given its memory back, the pages of its binary that the work mapped
// again are unmapped BackgroundSettle later, unless calls have resumed.
// Without it an idle host went back from 15 to 23 MB at its first health
// check: the kernel maps a large binary's pages back in blocks of up to
// 2 MB, so the handful of page faults of one check mapped some 8 MB.
func (q *Quiet) Background() {
	if !q.released.Load() || !q.again.CompareAndSwap(false, true) {
		return
	}
	q.after(BackgroundSettle, func() {
		q.again.Store(false)
		if q.released.Load() {
			q.unmap()
		}
	})
}

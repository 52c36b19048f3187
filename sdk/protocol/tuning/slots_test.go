package tuning

import (
	"sync"
	"testing"
	"time"
)

// fakeLoad is a process whose CPU use is set by the test: cpu returns the
// CPU time it would have used at load (of a core) since the last reading.
type fakeLoad struct {
	mu   sync.Mutex
	load float64
	used time.Duration
	at   time.Time
	sets []int
}

func (f *fakeLoad) cpu() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	if !f.at.IsZero() {
		f.used += time.Duration(float64(now.Sub(f.at)) * f.load)
	}
	f.at = now
	return f.used
}

func (f *fakeLoad) set(n int) {
	f.mu.Lock()
	f.sets = append(f.sets, n)
	f.mu.Unlock()
}

func (f *fakeLoad) setLoad(l float64) {
	f.cpu() // what was used at the old load
	f.mu.Lock()
	f.load = l
	f.mu.Unlock()
}

// waitSets waits until the controller has set GOMAXPROCS n times.
func (f *fakeLoad) waitSets(t *testing.T, n int) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		sets := append([]int(nil), f.sets...)
		f.mu.Unlock()
		if len(sets) >= n || time.Now().After(deadline) {
			return sets
		}
		time.Sleep(time.Millisecond)
	}
}

// A busy host takes every CPU, a calm one goes back to one slot, and a
// quiet one stops watching at one slot.
func TestSlotControllerFollowsTheLoad(t *testing.T) {
	f := &fakeLoad{}
	c := &slotController{max: 4, cpu: f.cpu, set: f.set, period: 2 * time.Millisecond}
	f.setLoad(0.95)
	c.busy(true)
	c.busy(true) // once
	if got := f.waitSets(t, 1); len(got) != 1 || got[0] != 4 {
		t.Fatalf("at 0.95 of a core: set %v, want [4]", got)
	}
	f.setLoad(0.65) // between the marks: no change
	time.Sleep(30 * c.period)
	f.setLoad(0.2)
	if got := f.waitSets(t, 2); len(got) != 2 || got[1] != 1 {
		t.Fatalf("at 0.2 of a core: set %v, want [4 1]", got)
	}
	f.setLoad(0.95)
	if got := f.waitSets(t, 3); len(got) != 3 || got[2] != 4 {
		t.Fatalf("busy again: set %v, want [4 1 4]", got)
	}
	c.busy(false)
	if got := f.waitSets(t, 4); len(got) != 4 || got[3] != 1 {
		t.Fatalf("quiet: set %v, want one slot at the end", got)
	}
	c.busy(false) // once
}

// With one CPU there is nothing to adapt; with GOMAXPROCS set the user
// has chosen.
func TestAdaptSlotsLeavesChoicesAlone(t *testing.T) {
	c := &slotController{max: 1}
	c.busy(true)
	if c.stop != nil {
		t.Error("a loop runs on a machine with one CPU")
	}
	t.Setenv("GOMAXPROCS", "3")
	q := &Quiet{}
	q.AdaptSlots()
	if q.busy != nil {
		t.Error("AdaptSlots with GOMAXPROCS set changed the busy hook")
	}
}

// A host that stops serving while busy stops the slots' watch (Quiet.Stop).
func TestQuietStopEndsTheWatch(t *testing.T) {
	var told []bool
	q := &Quiet{delay: time.Hour, busy: func(b bool) { told = append(told, b) }, after: func(time.Duration, func()) {}, now: func() int64 { return 0 }}
	q.Stop() // never busy: nothing to tell
	q.Touch()
	q.Stop()
	q.Stop()
	if len(told) != 2 || !told[0] || told[1] {
		t.Errorf("busy told %v, want [true false]", told)
	}
}

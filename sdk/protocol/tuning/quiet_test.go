package tuning

import (
	"testing"
	"time"
)

// fakeTimers holds the checks a Quiet schedules; the test runs them.
type fakeTimers struct{ pending []func() }

func (f *fakeTimers) after(_ time.Duration, fn func()) { f.pending = append(f.pending, fn) }

// fire runs the checks scheduled so far (not those they schedule).
func (f *fakeTimers) fire() {
	due := f.pending
	f.pending = nil
	for _, fn := range due {
		fn()
	}
}

func TestQuietReleasesOnceCallsStop(t *testing.T) {
	timers := &fakeTimers{}
	released := 0
	q := &Quiet{delay: time.Second, release: func() { released++ }, after: timers.after}

	q.Touch() // a call starts: one check is scheduled
	q.Touch()
	if len(timers.pending) != 1 {
		t.Fatalf("%d checks scheduled, want one however many calls", len(timers.pending))
	}
	timers.fire() // calls came since: no release, a later check
	if released != 0 || len(timers.pending) != 1 {
		t.Fatalf("released %d times with calls in the last delay (checks pending %d); want none, one check", released, len(timers.pending))
	}
	timers.fire() // quiet for a whole delay: released, nothing scheduled
	if released != 1 || len(timers.pending) != 0 {
		t.Fatalf("after a quiet delay: released %d times, %d checks pending; want once, none", released, len(timers.pending))
	}
	timers.fire()
	if released != 1 {
		t.Fatalf("released again without calls: %d", released)
	}
	q.Touch() // calls again after the release: armed again
	if len(timers.pending) != 1 {
		t.Fatalf("a call after a release scheduled %d checks, want one", len(timers.pending))
	}
	timers.fire()
	timers.fire()
	if released != 2 {
		t.Fatalf("released %d times after the second burst, want 2", released)
	}
}

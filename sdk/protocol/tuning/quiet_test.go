package tuning

import (
	"testing"
	"time"
)

// fakeTimers holds the checks a Quiet schedules, and a clock; the test
// moves the clock and runs the checks that are due.
type fakeTimers struct {
	now     time.Duration
	pending []timer
}

type timer struct {
	at time.Duration
	fn func()
}

func (f *fakeTimers) after(d time.Duration, fn func()) {
	f.pending = append(f.pending, timer{f.now + d, fn})
}

func (f *fakeTimers) clock() int64 { return int64(f.now) }

// advance moves the clock by d, running the checks that fall due.
func (f *fakeTimers) advance(d time.Duration) {
	end := f.now + d
	for {
		i := -1
		for j, t := range f.pending {
			if t.at <= end && (i < 0 || t.at < f.pending[i].at) {
				i = j
			}
		}
		if i < 0 {
			break
		}
		t := f.pending[i]
		f.pending = append(f.pending[:i], f.pending[i+1:]...)
		f.now = t.at
		t.fn()
	}
	f.now = end
}

func TestQuietReleasesDelayAfterTheLastCall(t *testing.T) {
	ft := &fakeTimers{}
	released, unmapped := 0, 0
	var busy []bool
	q := &Quiet{delay: 10 * time.Second, release: func() { released++ }, unmap: func() { unmapped++ }, busy: func(b bool) { busy = append(busy, b) }, after: ft.after, now: ft.clock}

	// Calls every second for a minute: nothing released, one check
	// pending at a time however many calls.
	for range 60 {
		q.Touch()
		q.Touch()
		if len(ft.pending) != 1 {
			t.Fatalf("%d checks pending, want one", len(ft.pending))
		}
		ft.advance(time.Second)
	}
	if released != 0 {
		t.Fatalf("released %d times while calls kept coming", released)
	}
	// The last call was 1 s ago: released 10 s after it, not later.
	ft.advance(8*time.Second + 900*time.Millisecond)
	if released != 0 {
		t.Fatalf("released %d times 9.9 s after the last call, want none yet", released)
	}
	ft.advance(100 * time.Millisecond)
	if released != 1 || len(ft.pending) != 1 {
		t.Fatalf("10 s after the last call: released %d times, %d timers pending; want once, and the unmapping after it", released, len(ft.pending))
	}
	// What the release's own aftermath mapped goes again, once.
	ft.advance(BackgroundSettle)
	if unmapped != 1 || len(ft.pending) != 0 {
		t.Fatalf("after the release: unmapped %d times, %d timers pending; want once, none", unmapped, len(ft.pending))
	}
	ft.advance(time.Minute)
	if released != 1 || unmapped != 1 {
		t.Fatalf("released or unmapped again without calls: %d, %d", released, unmapped)
	}
	// Busy was told once when the calls began, quiet once at the release.
	if len(busy) != 2 || !busy[0] || busy[1] {
		t.Fatalf("busy told %v, want [true false]", busy)
	}
	// A new burst arms it again.
	q.Touch()
	ft.advance(10 * time.Second)
	if released != 2 {
		t.Fatalf("released %d times after the second burst, want 2", released)
	}
	if len(busy) != 4 || !busy[2] || busy[3] {
		t.Fatalf("busy told %v after the second burst, want [true false true false]", busy)
	}
}

// Background work (a health check) while the host is idle has what it
// mapped unmapped again a moment later; before the first release, during
// calls, or while an unmapping is pending, it schedules nothing.
func TestQuietBackgroundUnmapsAgainWhileIdle(t *testing.T) {
	ft := &fakeTimers{}
	released, unmapped := 0, 0
	q := &Quiet{delay: 10 * time.Second, release: func() { released++ }, unmap: func() { unmapped++ }, after: ft.after, now: ft.clock}

	q.Background() // nothing released yet: the quiet release will do it
	if len(ft.pending) != 0 {
		t.Fatalf("background work before any release scheduled %d timers", len(ft.pending))
	}
	q.Touch()
	ft.advance(10 * time.Second)
	if released != 1 {
		t.Fatalf("released %d times, want 1", released)
	}
	ft.advance(BackgroundSettle) // the unmapping after the release
	unmapped = 0
	// Idle: a health check's pages go again BackgroundSettle later, once
	// however many checks come meanwhile.
	q.Background()
	q.Background()
	if len(ft.pending) != 1 {
		t.Fatalf("%d timers after two checks, want one", len(ft.pending))
	}
	ft.advance(BackgroundSettle)
	if unmapped != 1 || released != 1 {
		t.Fatalf("after a check: unmapped %d, released %d; want 1, 1", unmapped, released)
	}
	q.Background()
	ft.advance(BackgroundSettle)
	if unmapped != 2 {
		t.Fatalf("after a second check: unmapped %d, want 2", unmapped)
	}
	// A call between a check and its unmapping: the host is busy again,
	// nothing is unmapped under it, and checks during calls do nothing.
	q.Background()
	q.Touch()
	ft.advance(BackgroundSettle)
	if unmapped != 2 {
		t.Fatalf("unmapped while calls resumed: %d, want 2", unmapped)
	}
	q.Background()
	if len(ft.pending) != 1 { // only the quiet check the call armed
		t.Fatalf("%d timers during calls, want only the quiet check", len(ft.pending))
	}
	// Quiet again: the full release, and checks after it unmap again.
	ft.advance(10 * time.Second)
	if released != 2 {
		t.Fatalf("released %d times, want 2", released)
	}
	if unmapped != 3 { // the release's own, BackgroundSettle after it
		t.Fatalf("after the second release: unmapped %d, want 3", unmapped)
	}
	q.Background()
	ft.advance(BackgroundSettle)
	if unmapped != 4 {
		t.Fatalf("after a check following the second release: unmapped %d, want 4", unmapped)
	}
}

// The start-up release counts as a release: a host with no call yet
// unmaps what its idle work maps; one whose calls began before it settled
// waits for the quiet release, as before.
func TestQuietSettledHostUnmapsBeforeAnyCall(t *testing.T) {
	ft := &fakeTimers{}
	unmapped := 0
	q := &Quiet{delay: 10 * time.Second, release: func() {}, unmap: func() { unmapped++ }, after: ft.after, now: ft.clock}
	q.settled()
	ft.advance(BackgroundSettle) // what settling itself mapped
	unmapped = 0
	q.Background()
	ft.advance(BackgroundSettle)
	if unmapped != 1 {
		t.Fatalf("a settled host without calls unmapped %d times after background work, want 1", unmapped)
	}

	busy := &Quiet{delay: 10 * time.Second, release: func() {}, unmap: func() { unmapped++ }, after: ft.after, now: ft.clock}
	busy.Touch()
	busy.settled()
	unmapped = 0
	busy.Background()
	ft.advance(BackgroundSettle)
	if unmapped != 0 {
		t.Fatalf("a host whose calls began before it settled unmapped %d times, want 0 (its quiet release comes later)", unmapped)
	}
}

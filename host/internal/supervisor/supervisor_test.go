package supervisor

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Base: time.Second, Max: 30 * time.Second}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
	for i, w := range want {
		if got := b.Delay(i + 1); got != w*time.Second {
			t.Errorf("Delay(%d) = %s, want %s", i+1, got, w*time.Second)
		}
	}
	b.Jitter = 0.1
	for i := 0; i < 200; i++ {
		d := b.Delay(3)
		if d < 4*time.Second || d > 4*time.Second+400*time.Millisecond {
			t.Fatalf("Delay(3) with 10%% jitter = %s, want within [4s, 4.4s]", d)
		}
	}
}

// fakeClock is a Clock that moves only when told to.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	tickers []*fakeTicker
	ticker  chan struct{} // one signal per Ticker made
}

type fakeTimer struct {
	c             *fakeClock
	at            time.Time
	fn            func()
	stopped, done bool
}

type fakeTicker struct {
	period  time.Duration
	next    time.Time
	ch      chan time.Time
	stopped bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), ticker: make(chan struct{}, 1)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, fn func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), fn: fn}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	pending := !t.stopped && !t.done
	t.stopped = true
	return pending
}

func (c *fakeClock) Ticker(d time.Duration) (<-chan time.Time, func()) {
	c.mu.Lock()
	tk := &fakeTicker{period: d, next: c.now.Add(d), ch: make(chan time.Time, 1)}
	c.tickers = append(c.tickers, tk)
	c.mu.Unlock()
	c.ticker <- struct{}{}
	return tk.ch, func() {
		c.mu.Lock()
		tk.stopped = true
		c.mu.Unlock()
	}
}

// Advance moves the clock on by d: timers now due run (each on its own
// goroutine, as time.AfterFunc's do) and tickers deliver the latest tick.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	for _, t := range c.timers {
		if !t.stopped && !t.done && !t.at.After(c.now) {
			t.done = true
			due = append(due, t.fn)
		}
	}
	for _, tk := range c.tickers {
		var last time.Time
		for !tk.stopped && !tk.next.After(c.now) {
			last, tk.next = tk.next, tk.next.Add(tk.period)
		}
		if !last.IsZero() {
			select { // the latest tick replaces one not yet read
			case <-tk.ch:
			default:
			}
			tk.ch <- last
		}
	}
	c.mu.Unlock()
	for _, fn := range due {
		go fn()
	}
}

// fakeInstance is an Instance that answers with its own id.
type fakeInstance struct {
	id        string
	done      chan struct{} // closed when it "exits"
	closed    chan struct{} // closed by Close
	hung      atomic.Bool   // Ping fails
	pings     atomic.Int64
	calls     atomic.Int64
	exitOnce  sync.Once
	closeOnce sync.Once
}

func newFakeInstance(id string) *fakeInstance {
	return &fakeInstance{id: id, done: make(chan struct{}), closed: make(chan struct{})}
}

func (f *fakeInstance) Describe() *toolcall.Description {
	return &toolcall.Description{Name: "fake", PluginVersion: f.id, Tools: []*toolcall.Tool{{Name: "whoami"}}}
}

func (f *fakeInstance) Call(context.Context, string, []byte, toolcall.ProgressFunc) (*toolcall.Result, error) {
	f.calls.Add(1)
	return &toolcall.Result{Content: []toolcall.Content{toolcall.TextContent(f.id)}}, nil
}

func (f *fakeInstance) PermissionPatterns(_ context.Context, tool string, _ []byte) ([]string, error) {
	return []string{tool}, nil
}

func (f *fakeInstance) Close(context.Context) error {
	f.closeOnce.Do(func() { close(f.closed) })
	f.exit()
	return nil
}

func (f *fakeInstance) exit() { f.exitOnce.Do(func() { close(f.done) }) }

func (f *fakeInstance) Done() <-chan struct{} { return f.done }

func (f *fakeInstance) Ping(context.Context) error {
	f.pings.Add(1)
	if f.hung.Load() {
		return errors.New("no answer")
	}
	return nil
}

var _ Instance = (*fakeInstance)(nil)

// starter hands out fake instances, or fails while failing is set.
type starter struct {
	mu      sync.Mutex
	failing bool
	made    []*fakeInstance
	tries   int
}

func (s *starter) start(context.Context) (Instance, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries++
	if s.failing {
		return nil, errors.New("binary not found")
	}
	inst := newFakeInstance("i" + string(rune('0'+len(s.made)+1)))
	s.made = append(s.made, inst)
	return inst, nil
}

func (s *starter) last() *fakeInstance {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.made[len(s.made)-1]
}

func (s *starter) setFailing(v bool) {
	s.mu.Lock()
	s.failing = v
	s.mu.Unlock()
}

func (s *starter) attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tries
}

// harness is a supervisor on a fake clock and a signal of its changes.
type harness struct {
	sup     *Supervisor
	clock   *fakeClock
	changed chan struct{}
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{clock: newFakeClock(), changed: make(chan struct{}, 1)}
	h.sup = New(hclog.NewNullLogger(), func(string) {
		select {
		case h.changed <- struct{}{}:
		default:
		}
	}, WithClock(h.clock))
	t.Cleanup(h.sup.Stop)
	select { // the health loop has its ticker: Advance reaches it
	case <-h.clock.ticker:
	case <-time.After(5 * time.Second):
		t.Fatal("the health loop did not start")
	}
	return h
}

// waitFor waits until srv's status satisfies ok, or fails the test.
func (h *harness) waitFor(t *testing.T, srv *Server, what string, ok func(Status) bool) Status {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		if st := srv.Status(); ok(st) {
			return st
		}
		select {
		case <-h.changed:
		case <-deadline:
			st := srv.Status()
			t.Fatalf("waiting for %s: state %s, attempt %d, restarts %d, last error %q", what, st.State, st.Attempt, st.Restarts, st.LastErr)
		}
	}
}

// pinged waits until f has had n pings and the supervisor has taken the
// last answer in.
func pinged(t *testing.T, srv *Server, f *fakeInstance, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		srv.mu.RLock()
		busy := srv.pinging
		srv.mu.RUnlock()
		if got := f.pings.Load(); got == n && !busy {
			return
		} else if got > n {
			t.Fatalf("%d pings, want %d", got, n)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pings after 5s, want %d", f.pings.Load(), n)
		}
		runtime.Gosched()
	}
}

func inState(s State) func(Status) bool { return func(st Status) bool { return st.State == s } }

func waitClosed(t *testing.T, f *fakeInstance) {
	t.Helper()
	select {
	case <-f.closed:
	case <-time.After(5 * time.Second):
		t.Fatalf("instance %s was not closed", f.id)
	}
}

func whoami(t *testing.T, srv *Server) (string, error) {
	t.Helper()
	res, err := srv.Call(t.Context(), "whoami", []byte(`{}`), nil)
	if err != nil {
		return "", err
	}
	return res.Text(), nil
}

var noJitter = Backoff{Base: time.Second, Max: 8 * time.Second, MaxAttempts: 3, StableAfter: time.Minute}

func TestStatesThroughAnExitAndARestart(t *testing.T) {
	h := newHarness(t)
	st := &starter{}
	first := newFakeInstance("i0")
	srv := h.sup.Add("fake", first, st.start, noJitter)

	if got := srv.Status().State; got != Ready || !srv.Ready() || srv.Unavailable() != nil {
		t.Fatalf("after Add: state %s, Ready %v, Unavailable %v; want ready", got, srv.Ready(), srv.Unavailable())
	}
	if got, err := whoami(t, srv); err != nil || got != "i0" {
		t.Fatalf("call while ready = %q, %v; want i0", got, err)
	}

	first.exit()
	s := h.waitFor(t, srv, "reconnecting", inState(Reconnecting))
	if s.Attempt != 1 || s.LastErr != "the process exited" {
		t.Errorf("after the exit: attempt %d, last error %q; want 1, the process exited", s.Attempt, s.LastErr)
	}
	if wait := s.NextTry.Sub(h.clock.Now()); wait != time.Second {
		t.Errorf("first retry in %s, want the base delay of 1s", wait)
	}
	_, err := whoami(t, srv)
	if !errors.Is(err, protocol.ErrUnavailable) || errors.Is(err, protocol.ErrShuttingDown) || !strings.Contains(err.Error(), "reconnecting: attempt 1, next try in 1s") {
		t.Errorf("call while reconnecting: err = %v, want ErrUnavailable saying when the next try is", err)
	}
	waitClosed(t, first)
	if st.attempts() != 0 {
		t.Fatalf("started %d instances before the delay passed", st.attempts())
	}

	h.clock.Advance(time.Second)
	s = h.waitFor(t, srv, "ready again", inState(Ready))
	if s.Restarts != 1 || s.Instance != st.last() {
		t.Errorf("after the restart: restarts %d, instance %v; want 1 and the new instance", s.Restarts, s.Instance)
	}
	if got, err := whoami(t, srv); err != nil || got != "i1" {
		t.Errorf("call after the restart = %q, %v; want i1", got, err)
	}
	if first.calls.Load() != 1 {
		t.Errorf("the exited instance got %d calls, want 1", first.calls.Load())
	}

	// An exit noticed late, from an instance already replaced, changes
	// nothing.
	srv.watch(first, 1)
	if got := srv.Status(); got.State != Ready || got.Restarts != 1 {
		t.Errorf("a stale exit changed the server: %s, restarts %d", got.State, got.Restarts)
	}

	if err := srv.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, st.last())
	if got := srv.Status().State; got != Stopped {
		t.Errorf("after Close: state %s, want stopped", got)
	}
	_, err = whoami(t, srv)
	if !errors.Is(err, protocol.ErrShuttingDown) || errors.Is(err, protocol.ErrUnavailable) {
		t.Errorf("call after Close: err = %v, want ErrShuttingDown and not ErrUnavailable", err)
	}
}

func TestHealthCheck(t *testing.T) {
	h := newHarness(t)
	st := &starter{}
	first := newFakeInstance("i0")
	b := noJitter
	b.HealthInterval, b.HealthTimeout = 10*time.Second, time.Second
	srv := h.sup.Add("fake", first, st.start, b)

	// Pinged once per interval, not before; one that answers stays.
	h.clock.Advance(9 * time.Second)
	for n := int64(1); n <= 2; n++ {
		h.clock.Advance(time.Second)
		pinged(t, srv, first, n)
		h.clock.Advance(9 * time.Second)
		if got := first.pings.Load(); got != n {
			t.Fatalf("pinged %d times before interval %d ended, want %d", got, n+1, n)
		}
	}
	if got, err := whoami(t, srv); err != nil || got != "i0" {
		t.Fatalf("call after two health checks = %q, %v; want i0", got, err)
	}

	// One that stops answering is replaced.
	first.hung.Store(true)
	h.clock.Advance(time.Second)
	s := h.waitFor(t, srv, "the hung instance to be dropped", inState(Reconnecting))
	if !strings.HasPrefix(s.LastErr, "health check failed: no answer") {
		t.Errorf("last error = %q, want the failed health check", s.LastErr)
	}
	waitClosed(t, first)
	h.clock.Advance(time.Second)
	h.waitFor(t, srv, "a new instance", inState(Ready))
	if got, err := whoami(t, srv); err != nil || got != "i1" {
		t.Errorf("call after the health check replaced the instance = %q, %v; want i1", got, err)
	}
}

func TestMaxAttempts(t *testing.T) {
	h := newHarness(t)
	st := &starter{failing: true}
	srv := h.sup.AddPending("fake", st.start, noJitter, "not there yet")
	if got := srv.Describe().Name; got != "fake" {
		t.Errorf("a pending server describes itself as %q, want its name", got)
	}

	// Attempts 1 to 3 wait 1s, 2s, 4s; each start fails.
	for i, delay := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		attempt := i + 1
		s := h.waitFor(t, srv, "attempt "+string(rune('0'+attempt)), func(s Status) bool { return s.State == Reconnecting && s.Attempt == attempt })
		if wait := s.NextTry.Sub(h.clock.Now()); wait != delay {
			t.Errorf("attempt %d waits %s, want %s", attempt, wait, delay)
		}
		h.clock.Advance(delay - time.Millisecond)
		if st.attempts() != i {
			t.Fatalf("attempt %d started before its delay passed", attempt)
		}
		h.clock.Advance(time.Millisecond)
	}
	s := h.waitFor(t, srv, "failed", inState(Failed))
	if st.attempts() != 3 || s.LastErr != "binary not found" {
		t.Errorf("gave up after %d starts (last error %q), want 3 (binary not found)", st.attempts(), s.LastErr)
	}
	_, err := whoami(t, srv)
	if !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), "failed and is not being restarted") {
		t.Errorf("call to a failed server: err = %v, want ErrUnavailable saying it failed", err)
	}
	// No more tries, however long we wait.
	h.clock.Advance(time.Hour)
	if st.attempts() != 3 {
		t.Errorf("a failed server was tried again (%d starts)", st.attempts())
	}

	// Restart revives it at once, with its attempts reset.
	st.setFailing(false)
	srv.Restart()
	s = h.waitFor(t, srv, "ready after Restart", inState(Ready))
	if s.Attempt != 0 {
		t.Errorf("attempt after Restart = %d, want 0", s.Attempt)
	}
	if got, err := whoami(t, srv); err != nil || got != "i1" {
		t.Errorf("call after Restart = %q, %v; want i1", got, err)
	}
}

func TestBackoffResetsOnceStable(t *testing.T) {
	h := newHarness(t)
	st := &starter{}
	first := newFakeInstance("i0")
	srv := h.sup.Add("fake", first, st.start, noJitter)

	lose := func(f *fakeInstance) Status {
		t.Helper()
		f.exit()
		return h.waitFor(t, srv, "reconnecting after "+f.id, func(s Status) bool { return s.State == Reconnecting && s.Instance == nil })
	}
	back := func(d time.Duration) {
		t.Helper()
		h.clock.Advance(d)
		h.waitFor(t, srv, "ready", func(s Status) bool { return s.State == Ready && s.Instance == st.last() })
	}

	// Lost at once after each start: the delays double.
	if s := lose(first); s.Attempt != 1 || s.NextTry.Sub(h.clock.Now()) != time.Second {
		t.Fatalf("first loss: attempt %d in %s, want 1 in 1s", s.Attempt, s.NextTry.Sub(h.clock.Now()))
	}
	back(time.Second)
	if s := lose(st.last()); s.Attempt != 2 || s.NextTry.Sub(h.clock.Now()) != 2*time.Second {
		t.Fatalf("loss right after a restart: attempt %d in %s, want 2 in 2s", s.Attempt, s.NextTry.Sub(h.clock.Now()))
	}
	back(2 * time.Second)

	// Lost after StableAfter of being ready: the count starts over and the
	// first restart is immediate.
	h.clock.Advance(noJitter.StableAfter)
	st.last().exit()
	h.waitFor(t, srv, "ready again at once", func(s Status) bool { return s.State == Ready && s.Instance == st.last() && s.Restarts == 3 })
	if s := srv.Status(); s.Attempt != 1 {
		t.Errorf("loss after a stable minute: attempt %d, want 1 (the count started over)", s.Attempt)
	}
	// Lost again right away: backoff resumes from its start.
	if s := lose(st.last()); s.Attempt != 2 || s.NextTry.Sub(h.clock.Now()) != 2*time.Second {
		t.Errorf("loss right after the immediate restart: attempt %d in %s, want 2 in 2s", s.Attempt, s.NextTry.Sub(h.clock.Now()))
	}
	back(2 * time.Second)
}

// A first start that fails may hand back a typed nil instance beside its
// error (launcher.Launch returns a nil *Plugin): when the server was
// stopped, or the supervisor, meanwhile, nothing may be closed on it. (The
// supervisor closed it, and the nil pointer crashed the host: seen in the
// loader's tests when hello took longer than StartWait under load.)
func TestFailedLateStartAfterStop(t *testing.T) {
	var typedNil *fakeInstance
	failed := StartResult{Inst: typedNil, Err: errors.New("plugin exited before its handshake")}
	never := func(error) bool { return false }
	st := &starter{}

	// The server is closed while it starts.
	h := newHarness(t)
	first := make(chan StartResult)
	srv := h.sup.AddStarting("slow", st.start, noJitter, first, never)
	if err := srv.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	first <- failed
	h.waitFor(t, srv, "stopped", inState(Stopped))

	// The supervisor stops while it starts.
	h2 := newHarness(t)
	first2 := make(chan StartResult)
	h2.sup.AddStarting("slow", st.start, noJitter, first2, never)
	h2.sup.Stop()
	first2 <- failed // received: a Close on the nil pointer would panic now
}

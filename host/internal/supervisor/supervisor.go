// Package supervisor keeps servers alive. Each supervised server has a
// state (configured, starting, ready, idle-stopped, reconnecting, failed,
// stopped); an instance that exits (noticed at once) or stops answering
// its health check is replaced, with exponential backoff between attempts,
// until it is stable again or the attempts run out.
//
// A server may also run on demand (lazy.go): one added with AddLazy is
// listed from its cached description without a process (configured) and
// started by its first call; one with an idle timeout is stopped when
// nobody has called it for that long (idle-stopped) and started again by
// the next call. Restarts and backoff apply only to servers that should be
// running: configured and idle-stopped ones are neither failed nor
// reconnecting.
//
// Every state change happens on the Supervisor's one goroutine, which is
// the only writer of a Server's state; calls read it under a lock. After
// each change the supervisor calls its onChange function with the server's
// name, so the registry can refresh its tools and the front end can tell
// clients the list changed.
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// State is a server's state.
type State string

// The states.
const (
	Starting     State = "starting"
	Ready        State = "ready"
	Reconnecting State = "reconnecting"
	Failed       State = "failed"
	Stopped      State = "stopped"
	// Configured is a server known from its cached manifest, not started
	// yet: its tools are listed and its first call starts it.
	Configured State = "configured"
	// IdleStopped is a server stopped after its idle_timeout: its tools
	// stay listed and the next call starts it again.
	IdleStopped State = "idle-stopped"
)

// Backoff configures restarts and health checks.
type Backoff struct {
	// Base is the first delay; it doubles per consecutive failure up to Max.
	Base, Max time.Duration
	// Jitter adds up to this fraction of the delay (0.1 = 0-10%).
	Jitter float64
	// MaxAttempts is how many restarts in a row are tried before the
	// server is failed; 0 means no limit.
	MaxAttempts int
	// StableAfter resets the attempt counter once an instance has been
	// ready this long, and makes the first restart after it immediate.
	StableAfter time.Duration
	// HealthInterval is how often a ready instance is pinged (0 = never);
	// HealthTimeout bounds one ping.
	HealthInterval, HealthTimeout time.Duration
	// IdleTimeout stops a ready instance that nobody has called for this
	// long and that has no call in flight, no resource subscription and
	// no background work (Busy); 0 = never. See lazy.go.
	IdleTimeout time.Duration
}

// DefaultBackoff is 1 s doubling to 30 s with 0-10 % jitter (1, 2, 4, 8,
// 16, 30, 30 … s), 10 attempts, stable after a minute (a server lost after
// a minute up restarts at once, and the count starts over), a health check
// every 15 s.
var DefaultBackoff = Backoff{
	Base: time.Second, Max: 30 * time.Second, Jitter: 0.1, MaxAttempts: 10,
	StableAfter: time.Minute, HealthInterval: 15 * time.Second, HealthTimeout: 5 * time.Second,
}

// Delay returns the wait before attempt n (1-based).
func (b Backoff) Delay(n int) time.Duration {
	d := b.Base
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	if b.Jitter > 0 {
		d += time.Duration(rand.Float64() * b.Jitter * float64(d)) //nolint:gosec // G404: jitter needs no cryptographic randomness
	}
	return d
}

// Instance is one running incarnation of a server: a launcher.Plugin or an
// external.Server. An instance that also implements registry.Process or
// registry.Confined has its answers passed on by the Server.
type Instance interface {
	toolcall.Server
	Describe() *toolcall.Description
	// Done is closed when the instance has exited.
	Done() <-chan struct{}
	// Ping checks that the instance answers.
	Ping(ctx context.Context) error
}

// Clock is the supervisor's source of time: the real one, or a fake in
// tests. Its methods are safe for concurrent use.
type Clock interface {
	Now() time.Time
	// AfterFunc calls fn on its own goroutine once d has passed; Stop
	// on the returned Timer cancels a call that has not started.
	AfterFunc(d time.Duration, fn func()) Timer
	// Ticker delivers the time every d until stop is called.
	Ticker(d time.Duration) (ticks <-chan time.Time, stop func())
}

// Timer is a pending AfterFunc.
type Timer interface {
	Stop() bool
}

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, fn func()) Timer { return time.AfterFunc(d, fn) }

func (realClock) Ticker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// Option configures a Supervisor.
type Option func(*Supervisor)

// WithClock makes the supervisor keep time with c (tests).
func WithClock(c Clock) Option { return func(s *Supervisor) { s.clock = c } }

// OnHealthChecked makes fn run after each health check of a server, answered
// or not (the host gives back the memory a check mapped: tuning.Quiet).
func (s *Supervisor) OnHealthChecked(fn func()) { s.healthChecked.Store(&fn) }

// Starter starts a fresh instance.
type Starter func(ctx context.Context) (Instance, error)

// Supervisor runs the state machine of its servers on one goroutine.
type Supervisor struct {
	log      hclog.Logger
	clock    Clock
	onChange func(name string)
	events   chan func()
	stop     chan struct{}
	wg       sync.WaitGroup
	once     sync.Once

	mu      sync.Mutex
	servers map[*Server]bool

	healthChecked atomic.Pointer[func()]  // OnHealthChecked
	vet           atomic.Pointer[VetFunc] // see SetVet
}

// VetFunc decides whether a running server's new description may be
// adopted (see SetVet). It returns nil to adopt it, or the reason it may
// not be served.
type VetFunc func(name string, d *toolcall.Description) error

// SetVet makes the supervisor ask fn about every description a running
// server's instance reports after a list change (an external server's
// tools/list_changed, a plugin's list change), before the server adopts
// it: until fn returns nil the server keeps describing itself as before,
// so a registry that lists it never shows the new tools. When fn refuses,
// the change is dropped (its ListChanged event is not passed on) and what
// happens to the server is fn's caller's business (the host quarantines
// it). fn runs on the watching goroutine of that server and may block it;
// nil removes the hook.
func (s *Supervisor) SetVet(fn VetFunc) {
	if fn == nil {
		s.vet.Store(nil)
		return
	}
	s.vet.Store(&fn)
}

// vetDesc asks the SetVet hook about d (nil when there is none).
func (s *Supervisor) vetDesc(name string, d *toolcall.Description) error {
	if fn := s.vet.Load(); fn != nil {
		return (*fn)(name, d)
	}
	return nil
}

// New starts a supervisor. onChange is called (on the supervisor's
// goroutine) after a server's state or tools change.
func New(log hclog.Logger, onChange func(name string), opts ...Option) *Supervisor {
	if onChange == nil {
		onChange = func(string) {}
	}
	s := &Supervisor{log: log, clock: realClock{}, onChange: onChange, events: make(chan func(), 64), stop: make(chan struct{}), servers: map[*Server]bool{}}
	for _, o := range opts {
		o(s)
	}
	s.wg.Add(2)
	go s.loop()
	go s.healthLoop()
	return s
}

// SetOnChange replaces the change callback.
func (s *Supervisor) SetOnChange(fn func(name string)) {
	s.do(func() { s.onChange = fn })
}

func (s *Supervisor) loop() {
	defer s.wg.Done()
	for {
		select {
		case fn := <-s.events:
			fn()
		case <-s.stop:
			return
		}
	}
}

// do runs fn on the supervisor's goroutine (dropped after Stop).
func (s *Supervisor) do(fn func()) {
	select {
	case s.events <- fn:
	case <-s.stop:
	}
}

// Stop ends supervision; servers are not closed (the registry does that).
func (s *Supervisor) Stop() {
	s.once.Do(func() {
		close(s.stop)
		s.mu.Lock()
		for srv := range s.servers {
			srv.mu.Lock()
			if srv.timer != nil {
				srv.timer.Stop()
			}
			srv.mu.Unlock()
		}
		s.mu.Unlock()
	})
	s.wg.Wait()
}

// healthLoop pings ready instances; one that does not answer is killed
// and handled like an exit.
func (s *Supervisor) healthLoop() {
	defer s.wg.Done()
	ticks, stop := s.clock.Ticker(time.Second)
	defer stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-ticks:
			s.mu.Lock()
			var due []*Server
			for srv := range s.servers {
				srv.mu.RLock()
				if srv.state == Ready && srv.backoff.HealthInterval > 0 && now.Sub(srv.lastPing) >= srv.backoff.HealthInterval {
					due = append(due, srv)
				}
				srv.mu.RUnlock()
			}
			s.mu.Unlock()
			for _, srv := range due {
				srv.ping(now)
			}
			s.idleCheck(now)
		}
	}
}

// Server is a supervised server. It satisfies the registry's Server
// interface; while it is not ready, calls get an error saying why.
type Server struct {
	sup     *Supervisor
	name    string
	start   Starter
	backoff Backoff

	mu           sync.RWMutex
	inst         Instance
	held         error    // a list change of heldInst refused by the vet hook: no calls
	heldInst     Instance // the instance held is about (a new one starts unheld)
	desc         *toolcall.Description
	state        State
	gen          int
	attempt      int
	nextTry      time.Time
	restarts     int
	sandboxKills int
	lastErr      string
	readySince   time.Time
	lastPing     time.Time
	timer        Timer
	pinging      bool
	newInst      chan struct{}   // closed when the instance changes (see instChanged)
	subs         map[string]bool // resources subscribed to, renewed on every new instance
	lastError    error           // lastErr's error, for errors.Is
	demand                       // starting on demand and idle stops (lazy.go)
}

// Add supervises a server whose first instance is already running.
func (s *Supervisor) Add(name string, first Instance, start Starter, b Backoff) *Server {
	now := s.clock.Now()
	srv := &Server{sup: s, name: name, start: start, backoff: b, inst: first, desc: first.Describe(), state: Ready, readySince: now, lastPing: now, gen: 1}
	srv.lastUsed = now
	s.mu.Lock()
	s.servers[srv] = true
	s.mu.Unlock()
	srv.watch(first, 1)
	return srv
}

// AddPending supervises a server whose first start failed for a reason
// that may pass (its binary is not there yet, it crashed while starting,
// an external server is not up): it is retried with backoff like a lost
// server. It has no tools until it starts.
func (s *Supervisor) AddPending(name string, start Starter, b Backoff, why string) *Server {
	srv := &Server{sup: s, name: name, start: start, backoff: b, desc: &toolcall.Description{Name: name}, state: Reconnecting, gen: 1, lastErr: why}
	s.mu.Lock()
	s.servers[srv] = true
	s.mu.Unlock()
	s.do(func() { srv.scheduleRetry(false) })
	return srv
}

// StartResult is the outcome of a start. Inst is only valid when Err is
// nil: a starter that fails may return a typed nil pointer in it (a nil
// *launcher.Plugin is a non-nil Instance), so ask made(), not Inst.
type StartResult struct {
	Inst Instance
	Err  error
}

// made is the instance the start made, or nil.
func (r StartResult) made() Instance {
	if r.Err != nil {
		return nil
	}
	return r.Inst
}

// AddStarting supervises a server whose first start is still under way (a
// slow handshake): the host serves without it meanwhile, its state is
// starting, and it joins when first delivers. A start that failed for good
// (permanent reports which) leaves it failed; any other failure is retried
// like a lost server.
func (s *Supervisor) AddStarting(name string, start Starter, b Backoff, first <-chan StartResult, permanent func(error) bool) *Server {
	srv := &Server{sup: s, name: name, start: start, backoff: b, desc: &toolcall.Description{Name: name}, state: Starting, gen: 1}
	s.mu.Lock()
	s.servers[srv] = true
	s.mu.Unlock()
	go func() {
		select {
		case r := <-first:
			s.do(func() { srv.firstStart(r, permanent) })
		case <-s.stop:
			go func() { // the start may still deliver: close what it made
				if inst := (<-first).made(); inst != nil {
					_ = inst.Close(context.Background())
				}
			}()
		}
	}()
	return srv
}

// firstStart takes the outcome of a server's first start (supervisor
// goroutine).
func (srv *Server) firstStart(r StartResult, permanent func(error) bool) {
	srv.mu.Lock()
	if srv.state != Starting {
		srv.mu.Unlock()
		if inst := r.made(); inst != nil {
			go func() { _ = inst.Close(context.Background()) }()
		}
		return
	}
	if r.Err != nil {
		srv.lastErr, srv.lastError = r.Err.Error(), r.Err
		if permanent(r.Err) {
			srv.state = Failed
			srv.mu.Unlock()
			srv.sup.log.Error("server failed to start", "server", srv.name, "error", r.Err)
			srv.sup.onChange(srv.name)
			return
		}
		srv.mu.Unlock()
		srv.sup.log.Warn("server did not start; retrying in the background", "server", srv.name, "error", r.Err)
		srv.scheduleRetry(false)
		return
	}
	srv.gen++
	srv.inst, srv.desc = r.Inst, r.Inst.Describe()
	srv.state = Ready
	now := srv.sup.clock.Now()
	srv.readySince, srv.lastPing, srv.lastUsed = now, now, now
	g := srv.gen
	srv.mu.Unlock()
	srv.watch(r.Inst, g)
	srv.sup.log.Info("server ready (joined after the host started serving)", "server", srv.name)
	srv.sup.onChange(srv.name)
}

// watch reports the instance's exit to the supervisor.
func (srv *Server) watch(inst Instance, gen int) {
	go func() {
		select {
		case <-inst.Done():
			srv.sup.do(func() { srv.lost(gen, "the process exited") })
		case <-srv.sup.stop:
		}
	}()
}

func (srv *Server) ping(now time.Time) {
	srv.mu.Lock()
	if srv.pinging {
		srv.mu.Unlock()
		return
	}
	srv.pinging, srv.lastPing = true, now
	inst, gen, timeout := srv.inst, srv.gen, srv.backoff.HealthTimeout
	srv.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), max(timeout, 100*time.Millisecond))
		err := inst.Ping(ctx)
		cancel()
		srv.mu.Lock()
		srv.pinging = false
		srv.mu.Unlock()
		if fn := srv.sup.healthChecked.Load(); fn != nil {
			(*fn)()
		}
		if err != nil {
			srv.sup.do(func() { srv.lost(gen, "health check failed: "+err.Error()) })
		}
	}()
}

// lost handles an instance that exited or hung (supervisor goroutine).
func (srv *Server) lost(gen int, why string) {
	srv.mu.Lock()
	if gen != srv.gen || srv.state == Stopped || srv.state == Failed {
		srv.mu.Unlock()
		return
	}
	old := srv.inst
	srv.gen++
	srv.lastErr, srv.lastError = why, nil
	if sr, ok := old.(SandboxStopped); ok && sr.StopReason() != "" {
		srv.sandboxKills++
	}
	// After a long healthy run the first restart is immediate: the loss is
	// news, not a crash loop. Backoff is for a server that keeps dying.
	stable := !srv.readySince.IsZero() && srv.sup.clock.Now().Sub(srv.readySince) >= srv.backoff.StableAfter
	if stable {
		srv.attempt = 0
	}
	srv.readySince = time.Time{}
	if srv.onDemand {
		srv.stopLost(old, why)
		return
	}
	srv.mu.Unlock()
	srv.sup.log.Warn("server lost", "server", srv.name, "reason", why)
	if old != nil {
		go func() { _ = old.Close(context.Background()) }()
	}
	srv.scheduleRetry(stable)
}

// scheduleRetry counts an attempt and waits before it (not at all when
// immediate), or gives up (supervisor goroutine).
func (srv *Server) scheduleRetry(immediate bool) {
	srv.mu.Lock()
	srv.attempt++
	if srv.backoff.MaxAttempts > 0 && srv.attempt > srv.backoff.MaxAttempts {
		srv.state = Failed
		srv.inst = nil
		srv.mu.Unlock()
		srv.sup.log.Error("server failed: giving up", "server", srv.name, "attempts", srv.backoff.MaxAttempts, "last_error", srv.lastErr)
		srv.sup.onChange(srv.name)
		return
	}
	delay := srv.backoff.Delay(srv.attempt)
	if immediate {
		delay = 0
	}
	srv.state = Reconnecting
	srv.inst = nil
	srv.nextTry = srv.sup.clock.Now().Add(delay)
	gen := srv.gen
	if !immediate {
		srv.timer = srv.sup.clock.AfterFunc(delay, func() { srv.sup.do(func() { srv.launch(gen) }) })
	}
	srv.mu.Unlock()
	if immediate {
		srv.launch(gen)
	}
	srv.sup.log.Info("server reconnecting", "server", srv.name, "attempt", srv.attempt, "in", delay.Round(time.Millisecond))
	srv.sup.onChange(srv.name)
}

// launch starts a new instance in the background (supervisor goroutine).
func (srv *Server) launch(gen int) {
	srv.mu.Lock()
	if gen != srv.gen || srv.state == Stopped {
		srv.mu.Unlock()
		return
	}
	start := srv.start
	srv.mu.Unlock()
	go func() {
		inst, err := start(context.Background())
		srv.sup.do(func() { srv.started(gen, inst, err) })
	}()
}

// started takes a launch's outcome (supervisor goroutine).
func (srv *Server) started(gen int, inst Instance, err error) {
	srv.mu.Lock()
	if gen != srv.gen || srv.state == Stopped {
		srv.mu.Unlock()
		if inst != nil {
			go func() { _ = inst.Close(context.Background()) }()
		}
		return
	}
	if err != nil {
		srv.lastErr, srv.lastError = err.Error(), err
		var held HeldBack
		if errors.As(err, &held) && held.HeldBack() && srv.permanent != nil && srv.permanent(err) {
			// A person must act (a quarantine): trying again would
			// only meet the same refusal.
			srv.state = Failed
			srv.mu.Unlock()
			srv.sup.log.Error("server held back", "server", srv.name, "error", err)
			srv.sup.onChange(srv.name)
			return
		}
		srv.mu.Unlock()
		srv.sup.log.Warn("server did not start", "server", srv.name, "error", err)
		srv.scheduleRetry(false)
		return
	}
	srv.gen++
	srv.inst, srv.desc = inst, inst.Describe()
	srv.state = Ready
	srv.signalInst()
	now := srv.sup.clock.Now()
	srv.readySince, srv.lastPing, srv.lastUsed = now, now, now
	srv.restarts++
	g := srv.gen
	srv.mu.Unlock()
	srv.watch(inst, g)
	srv.sup.log.Info("server ready", "server", srv.name, "restarts", srv.restarts)
	srv.sup.onChange(srv.name)
}

// SandboxStopped is an Instance whose sandbox can end it (a memory or
// process limit): StopReason says why it did ("" while it runs, or when
// the sandbox did not end it). Losses it explains count as sandbox kills.
type SandboxStopped interface {
	StopReason() string
}

// HeldBack is implemented by start errors that hold a server back until a
// person acts (a quarantined tool surface): a restart that meets one is not
// retried, and the server's start policy (SetStartPolicy) is told.
type HeldBack interface {
	HeldBack() bool
}

// Restart replaces the instance now: no backoff wait, attempts reset. It
// also revives a failed server. A server a call starts that has no process
// (configured, idle-stopped) stays so, and a failed one goes back to
// waiting for its next call: Restart reports false then, and that next
// call starts it with whatever changed.
func (srv *Server) Restart() bool {
	srv.mu.Lock()
	st, onDemand := srv.state, srv.onDemand
	srv.mu.Unlock()
	if st == Configured || st == IdleStopped || (st == Failed && onDemand) {
		srv.sup.do(func() {
			srv.mu.Lock()
			srv.attempt = 0
			if srv.state != Failed {
				srv.mu.Unlock()
				return
			}
			srv.gen++
			srv.state = IdleStopped
			srv.mu.Unlock()
			srv.sup.onChange(srv.name)
		})
		return false
	}
	srv.sup.do(func() {
		srv.mu.Lock()
		if srv.state == Stopped {
			srv.mu.Unlock()
			return
		}
		if srv.timer != nil {
			srv.timer.Stop()
		}
		old := srv.inst
		srv.gen++
		srv.attempt = 0
		srv.state = Starting
		srv.inst = nil
		gen := srv.gen
		srv.mu.Unlock()
		if old != nil {
			_ = old.Close(context.Background())
		}
		srv.sup.onChange(srv.name)
		srv.launch(gen)
	})
	return true
}

// SetStarter replaces how new instances start (a changed config); the next
// start uses it.
func (srv *Server) SetStarter(start Starter, b Backoff) {
	srv.sup.do(func() {
		srv.mu.Lock()
		srv.start, srv.backoff = start, b
		srv.mu.Unlock()
	})
}

// Name returns the server's name.
func (srv *Server) Name() string { return srv.name }

// Describe returns the latest instance's description.
func (srv *Server) Describe() *toolcall.Description {
	srv.mu.RLock()
	defer srv.mu.RUnlock()
	return srv.desc
}

// Ready reports whether the server takes calls: it is ready, or it is
// started by a call (configured, idle-stopped, or being started so).
func (srv *Server) Ready() bool {
	srv.mu.RLock()
	defer srv.mu.RUnlock()
	return srv.takesCalls()
}

// Status is a snapshot of a supervised server.
type Status struct {
	State    State
	Attempt  int
	NextTry  time.Time
	Restarts int
	// SandboxKills counts the instances its sandbox ended (memory or
	// process limit).
	SandboxKills int
	LastErr      string
	// Err is the last error itself (errors.Is: a quarantine).
	Err      error
	Instance Instance
}

// Status returns a snapshot.
func (srv *Server) Status() Status {
	srv.mu.RLock()
	defer srv.mu.RUnlock()
	return Status{State: srv.state, Attempt: srv.attempt, NextTry: srv.nextTry, Restarts: srv.restarts, SandboxKills: srv.sandboxKills, LastErr: srv.lastErr, Err: srv.lastError, Instance: srv.inst}
}

// Unavailable explains why the server takes no calls, or returns nil
// when it is ready: an error with CodeUnavailable while it is starting,
// reconnecting or failed, and with CodeShuttingDown once it is stopped.
func (srv *Server) Unavailable() error {
	if srv.Ready() {
		return nil
	}
	return srv.unavailable()
}

// unavailable explains why the server takes no calls.
func (srv *Server) unavailable() error {
	st := srv.Status()
	switch st.State {
	case Reconnecting:
		wait := st.NextTry.Sub(srv.sup.clock.Now()).Round(time.Second)
		return protocol.Errorf(protocol.CodeUnavailable, "%s is reconnecting: attempt %d, next try in %s (last error: %s)", srv.name, st.Attempt, max(wait, 0), st.LastErr)
	case Failed:
		return protocol.Errorf(protocol.CodeUnavailable, "%s failed and is not being restarted (last error: %s); fix it and run `switchboard restart %s`", srv.name, st.LastErr, srv.name)
	case Stopped:
		// Closed for good (a shutdown, a reload that removed it): not
		// worth waiting for.
		return protocol.Errorf(protocol.CodeShuttingDown, "%s is stopped", srv.name)
	default:
		return protocol.Errorf(protocol.CodeUnavailable, "%s is %s; try again in a moment", srv.name, st.State)
	}
}

// Call runs a call on the current instance, starting it first if the
// server is configured or idle-stopped.
func (srv *Server) Call(ctx context.Context, tool string, args []byte, onProgress toolcall.ProgressFunc) (*toolcall.Result, error) {
	inst, err := srv.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.release()
	return inst.Call(ctx, tool, args, onProgress)
}

// PermissionPatterns asks the current instance (started if need be).
func (srv *Server) PermissionPatterns(ctx context.Context, tool string, args []byte) ([]string, error) {
	inst, err := srv.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.release()
	return inst.PermissionPatterns(ctx, tool, args)
}

// Close stops supervising and closes the current instance.
func (srv *Server) Close(ctx context.Context) error {
	srv.mu.Lock()
	if srv.state == Stopped {
		srv.mu.Unlock()
		return nil
	}
	srv.state = Stopped
	srv.gen++
	if srv.timer != nil {
		srv.timer.Stop()
	}
	inst := srv.inst
	srv.inst = nil
	srv.signalInst()
	srv.mu.Unlock()
	srv.sup.mu.Lock()
	delete(srv.sup.servers, srv)
	srv.sup.mu.Unlock()
	if inst != nil {
		return inst.Close(ctx)
	}
	return nil
}

// String describes the state for logs.
func (srv *Server) String() string {
	st := srv.Status()
	return fmt.Sprintf("%s: %s (attempt %d, restarts %d)", srv.name, st.State, st.Attempt, st.Restarts)
}

// PID returns the current instance's process id (0 when none).
func (srv *Server) PID() int {
	if p, ok := srv.Status().Instance.(registry.Process); ok {
		return p.PID()
	}
	return 0
}

// Confinement describes what confines the current instance, or the next
// one while none runs (SetPlannedConfinement; "" when not set).
func (srv *Server) Confinement() string {
	if c, ok := srv.Status().Instance.(registry.Confined); ok {
		return c.Confinement()
	}
	srv.mu.RLock()
	planned := srv.planned
	srv.mu.RUnlock()
	if planned != nil {
		return planned()
	}
	return ""
}

// State names where the server is in its life cycle (registry.Stateful).
func (srv *Server) State() string { return string(srv.Status().State) }

// ProtocolVersion returns the current instance's protocol version, or
// the last one seen when none runs (a lazy server's manifest, an
// idle-stopped server's last instance).
func (srv *Server) ProtocolVersion() int {
	if p, ok := srv.Status().Instance.(registry.Process); ok {
		return p.ProtocolVersion()
	}
	srv.mu.RLock()
	defer srv.mu.RUnlock()
	return srv.protocol
}

// Exited reports whether there is no live instance.
func (srv *Server) Exited() bool {
	if p, ok := srv.Status().Instance.(registry.Process); ok {
		return p.Exited()
	}
	return true
}

var (
	_ registry.Server       = (*Server)(nil)
	_ registry.Readiness    = (*Server)(nil)
	_ registry.Availability = (*Server)(nil)
	_ registry.Confined     = (*Server)(nil)
	_ registry.Process      = (*Server)(nil)
)

var (
	_ registry.Stateful  = (*Server)(nil)
	_ registry.Sandboxed = (*Server)(nil)
)

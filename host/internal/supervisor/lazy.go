package supervisor

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// Servers on demand. A server added with AddLazy starts configured: its
// tools are listed from the description it was cached with (its
// manifest), and it has no process. The first call (or permission
// question, resource read, prompt…) starts it through its Starter, waits
// for it (bounded by its start timeout and the caller's context), and
// runs on it; concurrent first calls share one start. A server whose
// Backoff has an IdleTimeout is stopped once it has been ready and unused
// for that long (idle-stopped) and is started the same way by the next
// call. Calls in flight, resource subscriptions and background work the
// instance reports (Busy) keep it up.

// DefaultStartWait bounds a call's wait for an on-demand start when the
// server sets no start timeout.
const DefaultStartWait = 30 * time.Second

// Busy is implemented by instances that can say whether they have work
// in flight that stopping them would lose (a plugin's background jobs).
// An idle server whose instance is busy is not stopped.
type Busy interface {
	Busy(ctx context.Context) (bool, error)
}

// Lazy configures a server added with AddLazy.
type Lazy struct {
	// Manifest is the server's cached description: what it is listed as
	// until it starts.
	Manifest *toolcall.Description
	// Protocol is the protocol version it spoke when cached (shown until
	// it runs).
	Protocol int
	// StartTimeout bounds a call's wait for the start (0:
	// DefaultStartWait).
	StartTimeout time.Duration
	// Permanent reports whether a failed start will not pass by itself (a
	// quarantine, a checksum mismatch): the server is failed then. Any
	// other failure leaves it as it was, and the next call tries again.
	Permanent func(error) bool
}

// demand is a server's bookkeeping for starts on demand and idle stops;
// guarded by Server.mu.
type demand struct {
	manifest     *toolcall.Description // listed from, until the first start
	protocol     int                   // the protocol version last seen
	startWait    time.Duration
	permanent    func(error) bool
	wake         *wakeup // the start callers wait for, if one is under way
	inflight     int     // calls and other uses of the instance
	lastUsed     time.Time
	idleChecking bool
	// onDemand is set for a server a call starts (added lazily, or
	// idle-stopped once): lost, it waits for its next call instead of
	// being restarted with backoff, since nobody may need it again.
	onDemand bool
	// planned describes the confinement its next instance gets, shown
	// while none runs.
	planned func() string
	// sandboxMode is how its sandbox is configured (SetSandboxMode).
	sandboxMode string
}

// wakeup is one start on demand; err is set before done is closed.
type wakeup struct {
	done chan struct{}
	err  error
}

// AddLazy supervises a server known from its manifest, without starting
// it: its state is configured until its first call.
func (s *Supervisor) AddLazy(name string, start Starter, b Backoff, l Lazy) *Server {
	srv := &Server{sup: s, name: name, start: start, backoff: b, desc: l.Manifest, state: Configured, gen: 1}
	srv.manifest, srv.protocol, srv.onDemand = l.Manifest, l.Protocol, true
	srv.SetStartPolicy(l.StartTimeout, l.Permanent)
	s.mu.Lock()
	s.servers[srv] = true
	s.mu.Unlock()
	return srv
}

// SetStartPolicy sets how long a call waits for a start on demand and
// which start failures fail the server (see Lazy); for servers added
// otherwise that may be idle-stopped.
func (srv *Server) SetStartPolicy(timeout time.Duration, permanent func(error) bool) {
	srv.mu.Lock()
	srv.startWait, srv.permanent = timeout, permanent
	srv.mu.Unlock()
}

// takesCalls reports whether a call would run: the server is ready, or a
// call starts it; srv.mu held.
func (srv *Server) takesCalls() bool {
	switch srv.state {
	case Ready, Configured, IdleStopped:
		return true
	case Starting:
		return srv.wake != nil
	}
	return false
}

// acquire returns the instance to use, starting the server first if it is
// configured or idle-stopped. Every successful acquire is paired with a
// release.
func (srv *Server) acquire(ctx context.Context) (Instance, error) {
	for {
		srv.mu.Lock()
		switch {
		case srv.held != nil && srv.heldInst == srv.inst:
			err := srv.held
			srv.mu.Unlock()
			return nil, fmt.Errorf("%s changed its tools while it ran and is held back: %w", srv.name, err)
		case srv.state == Ready && srv.inst != nil:
			srv.inflight++
			srv.lastUsed = srv.sup.clock.Now()
			inst := srv.inst
			srv.mu.Unlock()
			return inst, nil
		case srv.state == Configured || srv.state == IdleStopped || (srv.state == Starting && srv.wake != nil):
			w, fresh := srv.wake, false
			if w == nil {
				w, fresh = &wakeup{done: make(chan struct{})}, true
				srv.wake = w
			}
			wait := srv.startWait
			srv.mu.Unlock()
			if fresh {
				srv.sup.do(func() { srv.wakeUp(w) })
			}
			if err := srv.await(ctx, w, wait); err != nil {
				return nil, err
			}
		default:
			srv.mu.Unlock()
			return nil, srv.unavailable()
		}
	}
}

// release ends a use of the instance acquire returned.
func (srv *Server) release() {
	srv.mu.Lock()
	srv.inflight--
	srv.lastUsed = srv.sup.clock.Now()
	srv.mu.Unlock()
}

// await waits for a start on demand.
func (srv *Server) await(ctx context.Context, w *wakeup, wait time.Duration) error {
	if wait <= 0 {
		wait = DefaultStartWait
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return protocol.Errorf(protocol.CodeUnavailable, "%s did not start within %s (its start timeout); it may still come up: try again in a moment, or see `switchboard logs %s`", srv.name, wait, srv.name)
	case <-srv.sup.stop:
		return protocol.Errorf(protocol.CodeShuttingDown, "%s is stopped: the host is shutting down", srv.name)
	}
}

// wakeUp starts a configured or idle-stopped server for its callers
// (supervisor goroutine).
func (srv *Server) wakeUp(w *wakeup) {
	srv.mu.Lock()
	if srv.wake != w || (srv.state != Configured && srv.state != IdleStopped) {
		// Started or closed meanwhile: the callers look again.
		if srv.wake == w {
			srv.wake = nil
		}
		srv.mu.Unlock()
		close(w.done)
		return
	}
	from := srv.state
	srv.state = Starting
	srv.gen++
	gen, start := srv.gen, srv.start
	srv.mu.Unlock()
	srv.sup.log.Info("server starting on demand", "server", srv.name, "was", string(from))
	srv.sup.onChange(srv.name)
	go func() {
		inst, err := start(context.Background())
		select {
		case srv.sup.events <- func() { srv.woke(gen, from, w, inst, err) }:
		case <-srv.sup.stop:
			if err == nil && inst != nil {
				_ = inst.Close(context.Background())
			}
			w.err = protocol.Errorf(protocol.CodeShuttingDown, "%s is stopped: the host is shutting down", srv.name)
			close(w.done)
		}
	}()
}

// woke takes the outcome of a start on demand (supervisor goroutine).
func (srv *Server) woke(gen int, from State, w *wakeup, inst Instance, err error) {
	srv.mu.Lock()
	if srv.wake == w {
		srv.wake = nil
	}
	if gen != srv.gen || srv.state == Stopped {
		srv.mu.Unlock()
		if err == nil && inst != nil {
			go func() { _ = inst.Close(context.Background()) }()
		}
		close(w.done) // the callers look again
		return
	}
	if err != nil {
		srv.lastErr, srv.lastError = err.Error(), err
		srv.state = from
		if srv.permanent != nil && srv.permanent(err) {
			srv.state = Failed
		}
		srv.mu.Unlock()
		srv.sup.log.Error("server did not start on demand", "server", srv.name, "error", err)
		w.err = protocol.Errorf(protocol.CodeUnavailable, "%s did not start: %v", srv.name, err)
		close(w.done)
		srv.sup.onChange(srv.name)
		return
	}
	srv.gen++
	srv.inst, srv.desc = inst, inst.Describe()
	changed := srv.manifest != nil && !sameSurface(srv.manifest, srv.desc)
	if srv.manifest != nil && srv.manifest.Equal(srv.desc) {
		// The description listed so far stays, the same object: what
		// lists it (the front end) sees nothing new to list.
		srv.desc = srv.manifest
	}
	srv.manifest = nil
	srv.state = Ready
	srv.attempt = 0
	srv.lastErr, srv.lastError = "", nil
	srv.signalInst()
	now := srv.sup.clock.Now()
	srv.readySince, srv.lastPing, srv.lastUsed = now, now, now
	g := srv.gen
	srv.mu.Unlock()
	srv.watch(inst, g)
	if changed {
		srv.sup.log.Warn("server's live tools differ from its cached manifest: listing the live ones (clients get tools/list_changed)", "server", srv.name)
	}
	srv.sup.log.Info("server ready (started on demand)", "server", srv.name)
	close(w.done)
	srv.sup.onChange(srv.name)
}

// sameSurface compares what two descriptions list: tools and
// instructions.
func sameSurface(a, b *toolcall.Description) bool {
	return a.Instructions == b.Instructions && slices.EqualFunc(a.Tools, b.Tools, (*toolcall.Tool).Equal)
}

// idleDue reports whether the server has been unused for its idle
// timeout; srv.mu held.
func (srv *Server) idleDue(now time.Time) bool {
	return srv.state == Ready && srv.backoff.IdleTimeout > 0 && srv.inflight == 0 && len(srv.subs) == 0 &&
		!srv.idleChecking && now.Sub(srv.lastUsed) >= srv.backoff.IdleTimeout
}

// idleCheck stops the servers that have been idle for their idle
// timeout (health goroutine).
func (s *Supervisor) idleCheck(now time.Time) {
	s.mu.Lock()
	var due []*Server
	for srv := range s.servers {
		srv.mu.Lock()
		if srv.idleDue(now) {
			srv.idleChecking = true
			due = append(due, srv)
		}
		srv.mu.Unlock()
	}
	s.mu.Unlock()
	for _, srv := range due {
		go srv.idleStop()
	}
}

// idleStop asks the instance whether it is busy and, unless it is or the
// server was used meanwhile, stops it.
func (srv *Server) idleStop() {
	srv.mu.RLock()
	inst, gen, timeout := srv.inst, srv.gen, srv.backoff.HealthTimeout
	srv.mu.RUnlock()
	busy := false
	if b, ok := inst.(Busy); ok {
		ctx, cancel := context.WithTimeout(context.Background(), max(timeout, time.Second))
		var err error
		busy, err = b.Busy(ctx)
		cancel()
		if err != nil {
			// The health check deals with a server that does not answer.
			srv.sup.log.Debug("idle server did not say whether it is busy; keeping it up", "server", srv.name, "error", err)
			busy = true
		}
	}
	srv.sup.do(func() {
		srv.mu.Lock()
		srv.idleChecking = false
		now := srv.sup.clock.Now()
		if busy && gen == srv.gen {
			srv.lastUsed = now // background work counts as use
		}
		if busy || gen != srv.gen || !srv.idleDue(now) {
			srv.mu.Unlock()
			return
		}
		old := srv.inst
		if p, ok := old.(registry.Process); ok {
			srv.protocol = p.ProtocolVersion()
		}
		srv.gen++
		srv.state = IdleStopped
		srv.onDemand = true
		srv.inst = nil
		srv.readySince = time.Time{}
		srv.signalInst()
		idle := srv.backoff.IdleTimeout
		srv.mu.Unlock()
		srv.sup.log.Info(fmt.Sprintf("server stopped: unused for %s (idle_timeout); the next call starts it", idle), "server", srv.name)
		if old != nil {
			go func() { _ = old.Close(context.Background()) }()
		}
		srv.sup.onChange(srv.name)
	})
}

// stopLost takes an on-demand server whose instance was lost back to
// idle-stopped: the call that needs it next starts it (and says so if it
// cannot). Restarting it at once, and again with backoff, would keep a
// process up that nobody asked for. srv.mu held; it is unlocked.
func (srv *Server) stopLost(old Instance, why string) {
	if p, ok := old.(registry.Process); ok {
		srv.protocol = p.ProtocolVersion()
	}
	srv.state = IdleStopped
	srv.inst = nil
	srv.readySince = time.Time{}
	srv.signalInst()
	srv.mu.Unlock()
	srv.sup.log.Warn("server lost; the next call starts it", "server", srv.name, "reason", why)
	if old != nil {
		go func() { _ = old.Close(context.Background()) }()
	}
	srv.sup.onChange(srv.name)
}

// StartNow starts a server that has no process but would be started by a
// call (configured, idle-stopped), without waiting for one: a changed
// config whose manifest is not known yet is learnt this way. Otherwise it
// does nothing.
func (srv *Server) StartNow() {
	srv.mu.Lock()
	if (srv.state != Configured && srv.state != IdleStopped) || srv.wake != nil {
		srv.mu.Unlock()
		return
	}
	w := &wakeup{done: make(chan struct{})}
	srv.wake = w
	srv.mu.Unlock()
	srv.sup.do(func() { srv.wakeUp(w) })
}

// SetSandboxMode sets how the server's sandbox is configured, as
// registry.Sandboxed says it.
func (srv *Server) SetSandboxMode(mode string) {
	srv.mu.Lock()
	srv.sandboxMode = mode
	srv.mu.Unlock()
}

// SandboxMode says how the server's sandbox is configured
// (registry.Sandboxed).
func (srv *Server) SandboxMode() string {
	srv.mu.RLock()
	defer srv.mu.RUnlock()
	return srv.sandboxMode
}

// SetPlannedConfinement sets what describes the confinement of the
// server's next instance, shown (Confinement) while none runs.
func (srv *Server) SetPlannedConfinement(fn func() string) {
	srv.mu.Lock()
	srv.planned = fn
	srv.mu.Unlock()
}

package supervisor

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

func manifest() *toolcall.Description {
	return &toolcall.Description{Name: "fake", Tools: []*toolcall.Tool{{Name: "whoami"}}}
}

func callID(t *testing.T, srv *Server) string {
	t.Helper()
	res, err := srv.Call(t.Context(), "whoami", nil, nil)
	if err != nil {
		t.Errorf("Call: %v", err)
		return ""
	}
	return res.Content[0].Text
}

// A lazy server takes calls before it runs; concurrent first calls share
// one start.
func TestLazyStartsOnceOnDemand(t *testing.T) {
	h := newHarness(t)
	s := &starter{}
	srv := h.sup.AddLazy("x", s.start, DefaultBackoff, Lazy{Manifest: manifest()})
	if st := srv.Status(); st.State != Configured || !srv.Ready() || srv.Unavailable() != nil || s.attempts() != 0 {
		t.Fatalf("new lazy server: %s, ready %v, %d starts; want configured, taking calls, none", st.State, srv.Ready(), s.attempts())
	}
	ids := make([]string, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() { ids[i] = callID(t, srv) })
	}
	wg.Wait()
	for _, id := range ids {
		if id != "i1" {
			t.Fatalf("calls ran on %v, want all on i1", ids)
		}
	}
	if n := s.attempts(); n != 1 {
		t.Errorf("%d starts for concurrent first calls, want 1", n)
	}
	if st := srv.Status(); st.State != Ready {
		t.Errorf("state after the first call = %s, want ready", st.State)
	}
}

// A start on demand that fails answers the call with the reason and
// leaves the server configured: no backoff, no retries on its own; the
// next call tries again. A permanent failure fails it.
func TestLazyFailedStart(t *testing.T) {
	h := newHarness(t)
	s := &starter{}
	s.setFailing(true)
	srv := h.sup.AddLazy("x", s.start, DefaultBackoff, Lazy{Manifest: manifest()})
	_, err := srv.Call(t.Context(), "whoami", nil, nil)
	if !errors.Is(err, protocol.ErrUnavailable) {
		t.Fatalf("Call = %v, want unavailable", err)
	}
	if st := srv.Status(); st.State != Configured || st.LastErr != "binary not found" {
		t.Fatalf("after a failed start: %s (%q), want configured with its error", st.State, st.LastErr)
	}
	h.clock.Advance(10 * time.Minute)
	if n := s.attempts(); n != 1 {
		t.Errorf("%d starts without a call, want 1 (no retries for a server nobody uses)", n)
	}
	s.setFailing(false)
	if id := callID(t, srv); id != "i1" {
		t.Errorf("next call ran on %q", id)
	}

	bad := errors.New("checksum mismatch")
	srv2 := h.sup.AddLazy("y", func(context.Context) (Instance, error) { return nil, bad }, DefaultBackoff,
		Lazy{Manifest: manifest(), Permanent: func(err error) bool { return errors.Is(err, bad) }})
	if _, err := srv2.Call(t.Context(), "whoami", nil, nil); err == nil {
		t.Fatal("Call on a server that cannot start succeeded")
	}
	if st := srv2.Status(); st.State != Failed || !errors.Is(st.Err, bad) {
		t.Errorf("after a permanent failure: %s (%v), want failed", st.State, st.Err)
	}
}

// busyInstance is a fakeInstance that may say it is busy.
type busyInstance struct {
	*fakeInstance
	busy *atomic.Bool
}

func (b busyInstance) Busy(context.Context) (bool, error) { return b.busy.Load(), nil }

// An idle server is stopped after its idle timeout, unless it is busy;
// its tools stay listed and the next call starts it again.
func TestIdleStop(t *testing.T) {
	h := newHarness(t)
	s := &starter{}
	var busy atomic.Bool
	start := func(ctx context.Context) (Instance, error) {
		inst, err := s.start(ctx)
		if err != nil {
			return nil, err
		}
		return busyInstance{inst.(*fakeInstance), &busy}, nil
	}
	b := DefaultBackoff
	b.IdleTimeout = 10 * time.Second
	srv := h.sup.AddLazy("x", start, b, Lazy{Manifest: manifest()})
	if id := callID(t, srv); id != "i1" {
		t.Fatalf("first call ran on %q", id)
	}
	busy.Store(true)
	h.clock.Advance(11 * time.Second)
	// The busy answer resets the idle time: wait for the check to end.
	deadline := time.Now().Add(5 * time.Second)
	for {
		srv.mu.RLock()
		checking, used := srv.idleChecking, srv.lastUsed
		srv.mu.RUnlock()
		if !checking && used.Equal(h.clock.Now()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle check did not ask the busy instance")
		}
		time.Sleep(time.Millisecond)
	}
	if st := srv.Status(); st.State != Ready {
		t.Fatalf("busy server: %s, want ready", st.State)
	}
	busy.Store(false)
	h.clock.Advance(11 * time.Second)
	h.waitFor(t, srv, "idle-stopped", inState(IdleStopped))
	select {
	case <-s.last().closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the idle instance was not closed")
	}
	if !srv.Ready() || len(srv.Describe().Tools) != 1 {
		t.Error("an idle-stopped server's tools are no longer listed")
	}
	if id := callID(t, srv); id != "i2" {
		t.Errorf("call after the idle stop ran on %q, want a new instance", id)
	}
}

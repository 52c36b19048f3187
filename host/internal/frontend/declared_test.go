package frontend

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/sdk/protocol"
)

// fakeSession is a session as mcp-go's streamable HTTP server makes one:
// it keeps what the client declared.
type fakeSession struct {
	id string

	mu   sync.Mutex
	info mcp.Implementation
	caps mcp.ClientCapabilities
}

func (s *fakeSession) Initialize()       {}
func (s *fakeSession) Initialized() bool { return true }
func (s *fakeSession) NotificationChannel() chan<- mcp.JSONRPCNotification {
	return make(chan mcp.JSONRPCNotification, 1)
}
func (s *fakeSession) SessionID() string { return s.id }

func (s *fakeSession) GetClientInfo() mcp.Implementation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info
}

func (s *fakeSession) SetClientInfo(info mcp.Implementation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.info = info
}

func (s *fakeSession) GetClientCapabilities() mcp.ClientCapabilities {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.caps
}

func (s *fakeSession) SetClientCapabilities(caps mcp.ClientCapabilities) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.caps = caps
}

var _ server.SessionWithClientInfo = (*fakeSession)(nil)

// TestDeclaredCapabilitiesSurviveTheGETRace plays, in the order that loses
// them in mcp-go v1.2.1, what its streamable HTTP server does when a
// listening client's GET arrives between the initialize response and the
// initialize's session being registered: the initialize runs on a session
// that is never registered, and a new session registers under its ID. The
// registered session must still know the client declared sampling (it did
// not: CI failed TestFeaturesOverHTTP with "the client did not declare the
// sampling capability").
func TestDeclaredCapabilitiesSurviveTheGETRace(t *testing.T) {
	f := New(registry.New(nil), "test", hclog.NewNullLogger())
	const id = "mcp-session-race"
	posted := &fakeSession{id: id}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
		`"capabilities":{"sampling":{},"elicitation":{}},"clientInfo":{"name":"racer","version":"1"}}}`
	if res := f.srv.HandleMessage(f.srv.WithContext(t.Context(), posted), []byte(init)); res == nil {
		t.Fatal("initialize: no response")
	}
	if posted.GetClientCapabilities().Sampling == nil {
		t.Fatal("mcp-go no longer records the capabilities on the initialize's session: the test plays the wrong order")
	}
	listening := &fakeSession{id: id} // what the GET registers
	if err := f.srv.RegisterSession(t.Context(), listening); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.srv.UnregisterSession(context.Background(), id) })
	caps := listening.GetClientCapabilities()
	if caps.Sampling == nil || caps.Elicitation == nil {
		t.Fatalf("the session registered by the GET has capabilities %+v, want the sampling and elicitation the client declared", caps)
	}
	if got := listening.GetClientInfo().Name; got != "racer" {
		t.Errorf("client name = %q, want racer", got)
	}
	// The host's own check, on that session.
	_, err := f.askClient(f.srv.WithContext(t.Context(), listening), protocol.MethodSampling, nil)
	if err != nil && strings.Contains(err.Error(), "did not declare") {
		t.Errorf("askClient on the listening session: %v", err)
	}
	// A declaration is given once, and forgotten with its session.
	f.srv.UnregisterSession(context.Background(), id)
	if _, ok := f.declared.Load(id); ok {
		t.Error("the declaration outlived its session")
	}
}

// TestDeclaredNotKeptForRegisteredSessions: a session registered before it
// initializes (stdio) keeps its own record; nothing is left behind.
func TestDeclaredNotKeptForRegisteredSessions(t *testing.T) {
	f := New(registry.New(nil), "test", hclog.NewNullLogger())
	s := &fakeSession{id: "stdio"}
	if err := f.srv.RegisterSession(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.srv.UnregisterSession(context.Background(), "stdio") })
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
		`"capabilities":{"roots":{}},"clientInfo":{"name":"stdio","version":"1"}}}`
	f.srv.HandleMessage(f.srv.WithContext(t.Context(), s), []byte(init))
	if s.GetClientCapabilities().Roots == nil {
		t.Error("the registered session lost its declared roots capability")
	}
	if _, ok := f.declared.Load("stdio"); ok {
		t.Error("a declaration was kept for a session that was registered already")
	}
}

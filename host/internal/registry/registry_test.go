package registry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/pluginv1"
	"github.com/switchboard-mcp/switchboard/internal/protocol"
	"github.com/switchboard-mcp/switchboard/internal/toolcall"
)

// stubServer answers every call with "ok"; down, when set, is why it takes
// no calls.
type stubServer struct {
	name string
	down error
}

func (s *stubServer) Name() string { return s.name }

func (s *stubServer) Describe() *pluginv1.DescribeResponse {
	if s.down != nil {
		return &pluginv1.DescribeResponse{Name: s.name}
	}
	return &pluginv1.DescribeResponse{Name: s.name, Tools: []*pluginv1.Tool{{Name: "echo", InputSchema: []byte(`{"type":"object"}`), Access: pluginv1.Access_ACCESS_READ}}}
}

func (s *stubServer) Call(context.Context, string, []byte, toolcall.ProgressFunc) (*toolcall.Result, error) {
	return &toolcall.Result{Content: []toolcall.Content{toolcall.TextContent("ok")}}, nil
}

func (s *stubServer) PermissionPatterns(_ context.Context, tool string, _ []byte) ([]string, error) {
	return []string{tool}, nil
}

func (s *stubServer) Close(context.Context) error { return nil }

func (s *stubServer) Unavailable() error { return s.down }

var (
	_ Server       = (*stubServer)(nil)
	_ Availability = (*stubServer)(nil)
)

// A host that is shutting down says so with its own code: callers can tell
// it from a server that is down for now.
func TestShuttingDownIsNotUnavailable(t *testing.T) {
	reg := New(nil, WithDuplicateLimit(0))
	down := protocol.Errorf(protocol.CodeUnavailable, "down is reconnecting")
	for _, s := range []*stubServer{{name: "up"}, {name: "down", down: down}} {
		if err := reg.Register(s, KindPlugin, "test"); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := reg.Call(t.Context(), "up.echo", []byte(`{}`), nil); err != nil || res.Text() != "ok" {
		t.Fatalf("up.echo = %v, %v; want ok", res, err)
	}
	_, err := reg.Call(t.Context(), "down.echo", []byte(`{}`), nil)
	if !errors.Is(err, protocol.ErrUnavailable) || errors.Is(err, protocol.ErrShuttingDown) {
		t.Errorf("call to a server that is down: err = %v, want ErrUnavailable and not ErrShuttingDown", err)
	}

	if err := reg.Shutdown(t.Context(), time.Second); err != nil {
		t.Fatal(err)
	}
	_, err = reg.Call(t.Context(), "up.echo", []byte(`{}`), nil)
	if !errors.Is(err, ErrShuttingDown) || !errors.Is(err, protocol.ErrShuttingDown) || errors.Is(err, protocol.ErrUnavailable) {
		t.Errorf("call during shutdown: err = %v, want ErrShuttingDown and not ErrUnavailable", err)
	}
	if err := reg.Register(&stubServer{name: "late"}, KindPlugin, "test"); !errors.Is(err, protocol.ErrShuttingDown) {
		t.Errorf("Register during shutdown: err = %v, want ErrShuttingDown", err)
	}
}

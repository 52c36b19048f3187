// Package hostapi is the host's side of the back-channel of the built-in
// `switchboard` server (pluginv1.Host), served to that plugin alone over
// go-plugin's broker (launcher.HostService).
//
// The interface is narrow and every request is audited: it lists the
// servers (what `switchboard status --json` shows), restarts one (as
// `switchboard restart NAME`), explains a refused call and lists a caller's
// recent calls. It answers a request only while the plugin is serving a
// call of the matching tool for the caller the request names (the host
// knows its calls in flight: launcher.HostService.Enter), so the plugin
// can neither act on its own nor speak for another caller. Nothing in it
// changes permissions or config, and it never touches the control socket
// or data_dir's files.
package hostapi

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/plugins/switchboard"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
)

// DefaultRecentCalls and MaxRecentCalls bound RecentCalls.
const (
	DefaultRecentCalls = 20
	MaxRecentCalls     = 200
)

// Service answers the host service. Set its fields before it is used; it
// is safe for concurrent use.
type Service struct {
	// Registry is the host's: its audit log records every request, and
	// it keeps the recent calls and refusals.
	Registry *registry.Registry
	// Servers returns the servers as `switchboard status --json` shows
	// them (JSON-encodable).
	Servers func() any
	// Restart restarts a server, as `switchboard restart NAME` does.
	Restart func(name string) (string, error)

	mu       sync.Mutex
	inflight map[call]int
}

// call is one tool call in flight on the plugin: whose and which tool.
type call struct{ server, owner, tool string }

// Register implements launcher.HostService.
func (s *Service) Register(g *grpc.Server, server string) {
	pluginv1.RegisterHostServer(g, &host{svc: s, server: server})
}

// Enter implements launcher.HostService.
func (s *Service) Enter(server, owner, tool string) (leave func()) {
	k := call{server, owner, tool}
	s.mu.Lock()
	if s.inflight == nil {
		s.inflight = map[call]int{}
	}
	s.inflight[k]++
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.inflight[k]--; s.inflight[k] <= 0 {
				delete(s.inflight, k)
			}
			s.mu.Unlock()
		})
	}
}

func (s *Service) inFlight(k call) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inflight[k] > 0
}

// host serves one start of the plugin registered as server.
type host struct {
	pluginv1.UnimplementedHostServer
	svc    *Service
	server string
}

// guard checks a request and audits it. It returns the refusal, if any;
// done records the outcome of a request that was let through.
func (h *host) guard(action, owner, tool, target string) (done func(err error), refusal error) {
	rec := registry.AuditRecord{Client: "plugin:" + h.server, Action: "host." + action, Target: target, Detail: "for caller " + owner, Decision: "allow"}
	audit := func(err error) {
		rec.Outcome = "ok"
		if err != nil {
			rec.Outcome, rec.Error = "error", err.Error()
			if status.Code(err) == codes.PermissionDenied {
				rec.Decision, rec.Outcome = "deny", "refused"
			}
		}
		h.svc.Registry.Audit(rec)
	}
	switch {
	case owner == "":
		refusal = status.Error(codes.PermissionDenied, "host service: the request names no caller; the host answers only for the caller of a call in flight")
	case !h.svc.inFlight(call{h.server, owner, tool}):
		refusal = status.Errorf(codes.PermissionDenied, "host service: %s answers only during a call of %s.%s by that caller, and there is none for %q", action, h.server, tool, owner)
	}
	if refusal != nil {
		audit(refusal)
		return nil, refusal
	}
	return audit, nil
}

func (h *host) ListServers(ctx context.Context, req *pluginv1.HostRequest) (*pluginv1.ListServersResponse, error) {
	done, err := h.guard("list_servers", req.GetOwner(), switchboard.ToolServers, "")
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(h.svc.Servers())
	done(err)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &pluginv1.ListServersResponse{ServersJson: b}, nil
}

func (h *host) RestartServer(ctx context.Context, req *pluginv1.RestartServerRequest) (*pluginv1.RestartServerResponse, error) {
	name := req.GetName()
	done, err := h.guard("restart_server", req.GetOwner(), switchboard.ToolRestart, name)
	if err != nil {
		return nil, err
	}
	if name == h.server {
		err := status.Errorf(codes.FailedPrecondition, "%s cannot restart itself: the call asking would end with it; a person can run `switchboard restart %s`", h.server, h.server)
		done(err)
		return nil, err
	}
	msg, err := h.svc.Restart(name)
	if err != nil {
		err = status.Error(codes.NotFound, err.Error())
		done(err)
		return nil, err
	}
	done(nil)
	return &pluginv1.RestartServerResponse{Message: msg + "; the servers tool shows its state and restart count"}, nil
}

func (h *host) WhyRefused(ctx context.Context, req *pluginv1.WhyRefusedRequest) (*pluginv1.WhyRefusedResponse, error) {
	done, err := h.guard("why_refused", req.GetOwner(), switchboard.ToolWhyRefused, req.GetCallId())
	if err != nil {
		return nil, err
	}
	why, err := h.svc.Registry.WhyRefused(req.GetOwner(), req.GetCallId())
	if err != nil {
		code := codes.Internal
		if errors.Is(err, registry.ErrNoSuchRefusal) {
			code = codes.NotFound
		}
		err = status.Error(code, err.Error())
		done(err)
		return nil, err
	}
	b, err := json.Marshal(why)
	done(err)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &pluginv1.WhyRefusedResponse{RefusalJson: b}, nil
}

func (h *host) RecentCalls(ctx context.Context, req *pluginv1.RecentCallsRequest) (*pluginv1.RecentCallsResponse, error) {
	done, err := h.guard("recent_calls", req.GetOwner(), switchboard.ToolRecentCalls, "")
	if err != nil {
		return nil, err
	}
	limit := int(req.GetLimit())
	if limit <= 0 {
		limit = DefaultRecentCalls
	}
	limit = min(limit, MaxRecentCalls)
	calls := h.svc.Registry.RecentCalls(req.GetOwner(), limit)
	b, err := json.Marshal(calls)
	done(err)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &pluginv1.RecentCallsResponse{CallsJson: b}, nil
}

var _ launcher.HostService = (*Service)(nil)

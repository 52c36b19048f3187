// Package switchboard is the built-in `switchboard` server: tools for the
// agent to look at the host it talks to. servers lists every server with
// its state (as `switchboard status --json` does), restart_server gives
// one a fresh start, why_refused explains a refused call, and recent_calls
// lists the caller's own recent calls.
//
// It runs as a sandboxed plugin like every built-in, and reaches the host
// only through the host service (pluginv1.Host) that the host serves to it
// alone over go-plugin's broker: a narrow interface that reads what the
// host knows and restarts a server, and that cannot change permissions or
// config. Its tools go through the host's guards like any other: access
// levels, permission rules, approval (restart_server is WRITE) and audit.
package switchboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/sdk"
	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
)

// Name is the built-in's server name, reserved: no other server may take it.
const Name = "switchboard"

// Version is the plugin's version.
const Version = "0.1.0"

// The tools, by name. The host's side of the back-channel answers each of
// its requests only during a call of the matching tool.
const (
	ToolServers     = "servers"
	ToolRestart     = "restart_server"
	ToolWhyRefused  = "why_refused"
	ToolRecentCalls = "recent_calls"
)

// Settings is the `builtin "switchboard" {}` block: it has no settings of
// its own.
type Settings struct{}

// ErrNoHost means the plugin runs without the host's back-channel: it was
// not started by the host as the built-in.
var ErrNoHost = errors.New("switchboard: no host service: this server works only as the host's built-in `switchboard` server")

type plugin struct {
	mu   sync.Mutex
	host pluginv1.HostClient
}

// New returns the switchboard plugin.
func New() *sdk.Server {
	s := sdk.NewServer(Name, Version, sdk.WithInstructions(
		"Tools about this Switchboard host: its servers and their state, restarting one, why a call of yours was refused, and your recent calls."))
	p := &plugin{}
	s.OnConfigure(func(ctx context.Context, cfg sdk.Config) error {
		var st Settings
		if err := cfg.Decode(&st); err != nil {
			return err
		}
		if conn := protocol.HostConn(ctx); conn != nil {
			p.mu.Lock()
			p.host = pluginv1.NewHostClient(conn)
			p.mu.Unlock()
		}
		return nil
	})
	sdk.AddTool(s, sdk.Tool{
		Name: ToolServers, Title: "List servers", ReadOnly: true, Idempotent: sdk.Bool(true), OpenWorld: sdk.Bool(false), SkipDuplicateCheck: true,
		Description: "List every server of this host with its kind, state, protocol, version, tool count, restarts, last error and sandbox (what `switchboard status --json` shows).",
	}, p.servers)
	sdk.AddTool(s, sdk.Tool{
		Name: ToolRestart, Title: "Restart a server", Destructive: sdk.Bool(false), Idempotent: sdk.Bool(false), OpenWorld: sdk.Bool(false),
		Description: "Give one server a fresh start now, as `switchboard restart NAME` does (calls in flight on it fail). It cannot restart the switchboard server itself.",
	}, p.restart)
	sdk.AddTool(s, sdk.Tool{
		Name: ToolWhyRefused, Title: "Why was a call refused", ReadOnly: true, Idempotent: sdk.Bool(true), OpenWorld: sdk.Bool(false),
		Description: "Explain one of your refused calls (by call id from recent_calls, or your most recent refusal): the guard that refused it, the rule and patterns involved, and what config line or approval would allow it.",
	}, p.whyRefused)
	sdk.AddTool(s, sdk.Tool{
		Name: ToolRecentCalls, Title: "Your recent calls", ReadOnly: true, OpenWorld: sdk.Bool(false), SkipDuplicateCheck: true,
		Description: "List your own most recent tool calls on this host, newest first, with call id, time, tool, decision, outcome and duration (from the audit records; never another client's calls).",
	}, p.recentCalls)
	return s
}

func (p *plugin) client() (pluginv1.HostClient, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.host == nil {
		return nil, ErrNoHost
	}
	return p.host, nil
}

// hostError turns the host's refusal into text the model can act on.
func hostError(err error) error {
	if st, ok := status.FromError(err); ok {
		if st.Code() == codes.Unavailable {
			return fmt.Errorf("the host did not answer: %s", st.Message())
		}
		return errors.New(st.Message())
	}
	return err
}

type noArgs struct{}

func (p *plugin) servers(ctx context.Context, req *sdk.Request, _ noArgs) (*sdk.Result, error) {
	h, err := p.client()
	if err != nil {
		return nil, err
	}
	resp, err := h.ListServers(ctx, &pluginv1.HostRequest{Owner: req.Owner})
	if err != nil {
		return nil, hostError(err)
	}
	return rawJSON("servers", resp.GetServersJson())
}

type restartArgs struct {
	Name string `json:"name" jsonschema:"description=The server to restart (as the servers tool names it)"`
}

func (p *plugin) restart(ctx context.Context, req *sdk.Request, in restartArgs) (*sdk.Result, error) {
	if in.Name == "" {
		return nil, sdk.InvalidArguments("name is required: the server to restart")
	}
	h, err := p.client()
	if err != nil {
		return nil, err
	}
	resp, err := h.RestartServer(ctx, &pluginv1.RestartServerRequest{Owner: req.Owner, Name: in.Name})
	if err != nil {
		return nil, hostError(err)
	}
	return sdk.Text(resp.GetMessage()), nil
}

type whyArgs struct {
	CallID string `json:"call_id,omitempty" jsonschema:"description=The refused call's id as recent_calls shows it (default: your most recent refusal)"`
}

func (p *plugin) whyRefused(ctx context.Context, req *sdk.Request, in whyArgs) (*sdk.Result, error) {
	h, err := p.client()
	if err != nil {
		return nil, err
	}
	resp, err := h.WhyRefused(ctx, &pluginv1.WhyRefusedRequest{Owner: req.Owner, CallId: in.CallID})
	if err != nil {
		return nil, hostError(err)
	}
	return rawJSON("", resp.GetRefusalJson())
}

type recentArgs struct {
	Limit int `json:"limit,omitempty" jsonschema:"description=How many calls (default 20),minimum=1,maximum=200"`
}

func (p *plugin) recentCalls(ctx context.Context, req *sdk.Request, in recentArgs) (*sdk.Result, error) {
	h, err := p.client()
	if err != nil {
		return nil, err
	}
	resp, err := h.RecentCalls(ctx, &pluginv1.RecentCallsRequest{Owner: req.Owner, Limit: uint32(min(max(in.Limit, 0), 1<<20))}) //nolint:gosec // G115: clamped
	if err != nil {
		return nil, hostError(err)
	}
	return rawJSON("calls", resp.GetCallsJson())
}

// rawJSON returns the host's JSON as the result (structured content is an
// object: a list goes under key).
func rawJSON(key string, b []byte) (*sdk.Result, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("the host's answer is not JSON: %v", err)
	}
	if key != "" {
		v = map[string]any{key: v}
	}
	return sdk.JSON(v)
}

package frontend

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// patternServer has one tool, "run", whose permission patterns are the
// words of its command; it counts how often the host asks for them and
// how often it runs.
type patternServer struct {
	patterns atomic.Int32
	calls    atomic.Int32
}

func (s *patternServer) Name() string { return "sh" }

func (s *patternServer) Describe() *toolcall.Description {
	return &toolcall.Description{Tools: []*toolcall.Tool{{
		Name: "run", CustomPermissionPattern: true,
		InputSchema: []byte(`{"type":"object","properties":{"command":{"type":"string"}}}`),
	}}}
}

func (s *patternServer) Call(context.Context, string, []byte, toolcall.ProgressFunc) (*toolcall.Result, error) {
	s.calls.Add(1)
	return &toolcall.Result{Content: []toolcall.Content{toolcall.TextContent("ran")}}, nil
}

func (s *patternServer) PermissionPatterns(_ context.Context, _ string, args []byte) ([]string, error) {
	s.patterns.Add(1)
	var a struct{ Command string }
	err := json.Unmarshal(args, &a)
	return strings.Fields(a.Command), err
}

func (s *patternServer) Close(context.Context) error { return nil }

// answering is a client's elicitation handler that gives one answer and
// counts the questions.
type answering struct {
	answer string
	mu     sync.Mutex
	asked  []string
}

func (a *answering) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	a.mu.Lock()
	a.asked = append(a.asked, req.Params.Message)
	a.mu.Unlock()
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"decision": a.answer},
	}}, nil
}

// TestApprovalEvaluatesOncePerRequest: a call the policy asks about takes
// two requests (the first asks the person, the retry carries the answer),
// and each evaluates the policy once: the server is asked for the call's
// patterns twice in all, not three times as when the retry judged the call
// again before running it.
func TestApprovalEvaluatesOncePerRequest(t *testing.T) {
	for _, era := range []struct {
		name string
		opts []client.ClientOption
	}{
		{"2026-07-28", nil},
		{"legacy 2025-11-25", []client.ClientOption{client.WithLegacyProtocolOnly()}}, //nolint:staticcheck // SA1019: testing the older era on purpose
	} {
		t.Run(era.name, func(t *testing.T) {
			tests := []struct {
				answer       string
				wantRan      bool
				wantPatterns int32
				wantText     string
			}{
				{"allow_once", true, 2, "ran"},
				{"deny", false, 2, "denied by the user"},
			}
			for _, tt := range tests {
				t.Run(tt.answer, func(t *testing.T) {
					srv := &patternServer{}
					reg := registry.New(&registry.Policy{Default: registry.Ask}, registry.WithDuplicateLimit(0))
					if err := reg.Register(srv, registry.KindPlugin, "test"); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = reg.Shutdown(context.Background(), time.Second) })
					f := New(reg, "test", hclog.NewNullLogger())
					el := &answering{answer: tt.answer}
					c, err := client.NewInProcessClientWithOptions(f.MCPServer(), append(era.opts, client.WithElicitationHandler(el))...)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = c.Close() })
					if err := c.Start(t.Context()); err != nil {
						t.Fatal(err)
					}
					init := mcp.InitializeRequest{}
					init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
					if _, err := c.Initialize(t.Context(), init); err != nil {
						t.Fatal(err)
					}
					req := mcp.CallToolRequest{}
					req.Params.Name = "sh__run"
					req.Params.Arguments = map[string]any{"command": "curl example.com"}
					res, err := c.CallTool(t.Context(), req)
					if err != nil {
						t.Fatal(err)
					}
					text := ""
					for _, ct := range res.Content {
						if tc, ok := ct.(mcp.TextContent); ok {
							text += tc.Text
						}
					}
					if !strings.Contains(text, tt.wantText) || res.IsError == tt.wantRan {
						t.Errorf("call = %q (isError %v), want %q", text, res.IsError, tt.wantText)
					}
					if len(el.asked) != 1 || !strings.Contains(el.asked[0], "sh.run:curl") {
						t.Errorf("asked %q, want one question naming sh.run:curl", el.asked)
					}
					if got := srv.calls.Load() == 1; got != tt.wantRan {
						t.Errorf("ran = %v, want %v", got, tt.wantRan)
					}
					if n := srv.patterns.Load(); n != tt.wantPatterns {
						t.Errorf("PermissionPatterns asked %d times, want %d (once per request)", n, tt.wantPatterns)
					}
				})
			}
		})
	}
}

// TestCannotElicitIsRefusedAfterOneEvaluation: a client without
// elicitation gets the rule to add, after one evaluation.
func TestCannotElicitIsRefusedAfterOneEvaluation(t *testing.T) {
	srv := &patternServer{}
	reg := registry.New(&registry.Policy{Default: registry.Ask, Source: "config.hcl"}, registry.WithDuplicateLimit(0))
	if err := reg.Register(srv, registry.KindPlugin, "test"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Shutdown(context.Background(), time.Second) })
	f := New(reg, "test", hclog.NewNullLogger())
	c, err := client.NewInProcessClient(f.MCPServer())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatal(err)
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = "sh__run"
	req.Params.Arguments = map[string]any{"command": "curl example.com"}
	res, err := c.CallTool(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := res.Content[0].(mcp.TextContent); !res.IsError || !ok || !strings.Contains(tc.Text, `add "sh.run:curl", "sh.run:example.com" to permissions.allow in config.hcl`) {
		t.Errorf("call = %+v, want the rules to add", res.Content)
	}
	if n, ran := srv.patterns.Load(), srv.calls.Load(); n != 1 || ran != 0 {
		t.Errorf("PermissionPatterns asked %d times, ran %d times; want 1 and 0", n, ran)
	}
}

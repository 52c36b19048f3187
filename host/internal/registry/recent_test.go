package registry

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/caller"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// explainServer has a READ tool, "look", and a WRITE tool, "put", whose
// argument "path" is required.
type explainServer struct{ stubServer }

func (s *explainServer) Describe() *toolcall.Description {
	return &toolcall.Description{Name: s.name, Tools: []*toolcall.Tool{
		{Name: "look", InputSchema: []byte(`{"type":"object"}`), Access: toolcall.AccessRead},
		{Name: "put", InputSchema: []byte(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`), Access: toolcall.AccessWrite},
	}}
}

func (s *explainServer) Call(context.Context, string, []byte, toolcall.ProgressFunc) (*toolcall.Result, error) {
	return &toolcall.Result{Content: []toolcall.Content{toolcall.TextContent("ok")}}, nil
}

// TestWhyRefused refuses calls by each guard for real and checks what the
// registry recorded at refusal time: which guard, the rule or patterns,
// and what would allow the call.
func TestWhyRefused(t *testing.T) {
	tests := []struct {
		name   string
		policy *Policy
		tool   string
		args   string
		by     string
		rule   string
		allow  string // a substring of Allow
	}{
		{"unknown tool", nil, "x.nope", `{}`, "unknown tool", "", "tools/list"},
		{"arguments", nil, "x.put", `{}`, "arguments", "", "input schema"},
		{"access", &Policy{Access: AccessRead, Source: "c.hcl"}, "x.put", `{"path":"a"}`, "access", "", `access = "write"`},
		{"deny rule", &Policy{Deny: []string{"x.put"}, Source: "c.hcl"}, "x.put", `{"path":"a"}`, "rule", "x.put", `deny rule "x.put"`},
		{"default deny", &Policy{Default: Deny, Allow: []string{"x.look"}, Source: "c.hcl"}, "x.put", `{"path":"a"}`, "default", "", `permissions { allow = ["x.put"] } in c.hcl`},
		{"ask, nobody asked", &Policy{Default: Ask, Source: "c.hcl"}, "x.put", `{"path":"a"}`, "approval", "", "approval when asked"},
		{"ask first", &Policy{Default: Allow, AskFirst: []string{"x.put"}, Source: "c.hcl"}, "x.put", `{"path":"a"}`, "approval", "", `permissions { allow = ["x.put"] } in c.hcl`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := New(tt.policy, WithDuplicateLimit(0))
			if err := reg.Register(&explainServer{stubServer{name: "x"}}, KindPlugin, "test"); err != nil {
				t.Fatal(err)
			}
			alice := caller.With(t.Context(), "alice")
			if _, err := reg.Call(alice, tt.tool, []byte(tt.args), nil); err == nil {
				t.Fatalf("Call(%s) ran; want a refusal", tt.tool)
			}
			// A later call that runs: the most recent refusal is still found.
			if tt.policy == nil || tt.policy.Default != Ask {
				if _, err := reg.Call(alice, "x.look", []byte(`{}`), nil); err != nil {
					t.Fatalf("x.look: %v", err)
				}
			}
			why, err := reg.WhyRefused("alice", "")
			if err != nil {
				t.Fatalf("WhyRefused: %v", err)
			}
			if why.Tool != tt.tool || why.By != tt.by || why.Rule != tt.rule || !strings.Contains(strings.Join(why.Allow, "\n"), tt.allow) || why.Error == "" {
				t.Errorf("WhyRefused = %+v, want tool %s by %q rule %q allow ~%q", why, tt.tool, tt.by, tt.rule, tt.allow)
			}
			// By id, and never for another caller.
			if again, err := reg.WhyRefused("alice", why.CallID); err != nil || again.CallID != why.CallID {
				t.Errorf("WhyRefused(%s) = %+v, %v", why.CallID, again, err)
			}
			if _, err := reg.WhyRefused("bob", why.CallID); !errors.Is(err, ErrNoSuchRefusal) {
				t.Errorf("bob's WhyRefused(%s) = %v, want ErrNoSuchRefusal", why.CallID, err)
			}
		})
	}
}

func TestRecentCallsAreTheCallersOwn(t *testing.T) {
	reg := New(nil, WithDuplicateLimit(0))
	if err := reg.Register(&explainServer{stubServer{name: "x"}}, KindPlugin, "test"); err != nil {
		t.Fatal(err)
	}
	for i, who := range []string{"alice", "bob", "alice"} {
		if _, err := reg.Call(caller.With(t.Context(), who), "x.look", []byte(`{}`), nil); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	got := reg.RecentCalls("alice", 10)
	if len(got) != 2 || got[0].Client != "alice" || got[1].Client != "alice" || got[0].CallID == got[1].CallID || got[0].Outcome != "ok" {
		t.Errorf("RecentCalls(alice) = %+v, want her two calls", got)
	}
	if got := reg.RecentCalls("alice", 1); len(got) != 1 {
		t.Errorf("RecentCalls(alice, 1) = %d calls", len(got))
	}
	if got := reg.RecentCalls("carol", 10); len(got) != 0 {
		t.Errorf("RecentCalls(carol) = %+v, want none", got)
	}
	if _, err := reg.WhyRefused("alice", ""); !errors.Is(err, ErrNoSuchRefusal) {
		t.Errorf("WhyRefused with no refusal: %v", err)
	}
}

// The ring keeps the newest RecentCalls calls, newest first, as it grows
// and once it has wrapped around.
func TestRecentLogKeepsTheNewest(t *testing.T) {
	l := newRecentLog()
	ids := func() []string {
		var out []string
		l.each(func(c recentCall) bool { out = append(out, c.rec.CallID); return true })
		return out
	}
	if got := ids(); len(got) != 0 {
		t.Fatalf("empty log holds %v", got)
	}
	add := func(n int) {
		for i := 0; i < n; i++ {
			l.add(AuditRecord{CallID: l.id()}, nil)
		}
	}
	add(3)
	if got := ids(); !slices.Equal(got, []string{"c" + l.stamp + "-3", "c" + l.stamp + "-2", "c" + l.stamp + "-1"}) {
		t.Fatalf("after 3 calls: %v", got)
	}
	add(RecentCalls + 7) // 1,010 in all: the first ten are gone
	got := ids()
	if len(got) != RecentCalls || got[0] != "c"+l.stamp+"-1010" || got[len(got)-1] != "c"+l.stamp+"-11" {
		t.Fatalf("after %d calls: %d kept, newest %s, oldest %s; want %d, -1010, -11", RecentCalls+10, len(got), got[0], got[len(got)-1], RecentCalls)
	}
}

package registry

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

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
		l.each(func(c *recentCall) bool { out = append(out, c.record(l).CallID); return true })
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

// A kept record reads back as it was written, whether its id and argument
// hash are the log's own (kept as a number and bytes) or not.
func TestRecentLogKeepsRecordsWhole(t *testing.T) {
	l := newRecentLog()
	sum := sha256Hex([]byte(`{"path":"a"}`))
	recs := []AuditRecord{
		{Time: time.Unix(1, 0).UTC(), CallID: l.id(), Client: "mcp:s1", Caller: "ci", Tool: "fs.read", ArgsSHA256: sum, ArgsSize: 12, Decision: "allow", Rule: "fs.*", DurationMS: 1.5, Outcome: "ok", Repeats: 2},
		{CallID: "elsewhere-7", Client: "mcp:s1", Tool: strings.Repeat("x", maxInternedLen+1), ArgsSHA256: "not a hash", Outcome: "error", Error: "boom"},
		{CallID: "c" + l.stamp + "-007", ArgsSHA256: strings.ToUpper(sum)}, // not as the log writes them
	}
	for _, r := range recs {
		l.add(r, nil)
	}
	var got []AuditRecord
	l.each(func(c *recentCall) bool { got = append(got, c.record(l)); return true })
	slices.Reverse(got)
	if !reflect.DeepEqual(got, recs) {
		t.Errorf("kept records:\n%+v\nwant\n%+v", got, recs)
	}
}

// Keeping a call allocates nothing once the ring is full: what a call
// allocated (its id, its argument hash, the names it read from the
// request) is not what the ring holds on to.
func TestRecentLogHoldsNoAllocationOfACall(t *testing.T) {
	l := newRecentLog()
	recs := make([]AuditRecord, 2*RecentCalls)
	for i := range recs {
		recs[i] = AuditRecord{CallID: l.id(), Client: "mcp:" + strconv.Itoa(i%3), Tool: strings.Clone("fs.read"), ArgsSHA256: sha256Hex([]byte(strconv.Itoa(i))), Outcome: "ok"}
	}
	for _, r := range recs[:RecentCalls] {
		l.add(r, nil)
	}
	i := RecentCalls
	if n := testing.AllocsPerRun(RecentCalls-1, func() { l.add(recs[i], nil); i++ }); n != 0 {
		t.Errorf("add allocates %.1f times a call, want 0", n)
	}
	held := 0
	l.each(func(c *recentCall) bool {
		if c.rec.CallID != "" || c.rec.ArgsSHA256 != "" || c.rec.Tool != l.names["fs.read"] || unsafe.StringData(c.rec.Tool) == unsafe.StringData(recs[0].Tool) {
			held++
		}
		return true
	})
	if held != 0 {
		t.Errorf("%d kept calls hold strings of their own", held)
	}
}

package registry

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// TestDecide is the policy's table: rules and a call's patterns in, the
// typed decision out (verdict, reason, rule, pending patterns and the
// rules an "always" answer would store).
func TestDecide(t *testing.T) {
	base := Policy{
		Allow: []string{"bash.run:ls", "bash.run:git", "filesystem.*", "web.fetch:*.example.com"},
		Deny:  []string{"bash.run:rm", "web.fetch:*.internal", "bash.run:*\\*"},
	}
	tests := []struct {
		name     string
		def      Verdict
		saved    []string // saved "always allow" rules
		savedNo  []string // saved "always deny" rules
		tool     string
		patterns []string
		want     Decision
		shown    []string // the pending patterns as a person sees them
		rules    []string // Decision.Rules()
	}{
		{
			name: "allowed by a tool glob", def: Ask, tool: "filesystem.read_text_file", patterns: []string{"/p/a"},
			want: Decision{Verdict: Allow, Reason: ByRule, Rule: "filesystem.*"},
		},
		{
			name: "all patterns allowed: the last rule is named", def: Deny, tool: "bash.run", patterns: []string{"ls", "git"},
			want: Decision{Verdict: Allow, Reason: ByRule, Rule: "bash.run:git"},
		},
		{
			name: "any pattern denied", def: Allow, tool: "bash.run", patterns: []string{"ls", "rm"},
			want: Decision{Verdict: Deny, Reason: ByRule, Rule: "bash.run:rm"},
		},
		{
			name: "deny by host glob", def: Allow, tool: "web.fetch", patterns: []string{"db.internal"},
			want: Decision{Verdict: Deny, Reason: ByRule, Rule: "web.fetch:*.internal"},
		},
		{
			name: "escaped star in a deny rule is literal", def: Allow, tool: "bash.run", patterns: []string{"echo *"},
			want: Decision{Verdict: Deny, Reason: ByRule, Rule: "bash.run:*\\*"},
		},
		{
			name: "unmatched with default ask", def: Ask, tool: "bash.run", patterns: []string{"ls", "curl"},
			want:  Decision{Verdict: Ask, Reason: ByDefault, Pending: []Pending{{Tool: "bash.run", Pattern: "curl", Rule: "bash.run:curl"}}},
			shown: []string{"bash.run:curl"}, rules: []string{"bash.run:curl"},
		},
		{
			name: "unmatched with default deny", def: Deny, tool: "git.git_status", patterns: []string{"git_status"},
			want:  Decision{Verdict: Deny, Reason: ByDefault, Pending: []Pending{{Tool: "git.git_status", Pattern: "git_status", Rule: "git.git_status:git_status"}}},
			shown: []string{"git.git_status"}, rules: []string{"git.git_status:git_status"},
		},
		{
			name: "unmatched with default allow", def: Allow, tool: "git.git_status", patterns: []string{"git_status"},
			want: Decision{Verdict: Allow, Reason: ByDefault},
		},
		{
			name: "the zero default allows", tool: "git.git_status", patterns: []string{"git_status"},
			want: Decision{Verdict: Allow, Reason: ByDefault},
		},
		{
			name: "an unreadable pattern is never allowed and has no rule", def: Ask, tool: "bash.run", patterns: []string{"ls", protocol.Opaque("a subshell")},
			want:  Decision{Verdict: Ask, Reason: ByDefault, Pending: []Pending{{Tool: "bash.run", Unreadable: "a subshell"}}},
			shown: []string{"bash.run (a subshell)"},
		},
		{
			name: "a pattern with glob characters is quoted for always", def: Ask, tool: "filesystem2.read", patterns: []string{"/w/*"},
			want:  Decision{Verdict: Ask, Reason: ByDefault, Pending: []Pending{{Tool: "filesystem2.read", Pattern: "/w/*", Rule: `filesystem2.read:/w/\*`}}},
			shown: []string{"filesystem2.read:/w/*"}, rules: []string{`filesystem2.read:/w/\*`},
		},
		{
			name: "saved always allow", def: Ask, saved: []string{"bash.run:curl"}, tool: "bash.run", patterns: []string{"curl"},
			want: Decision{Verdict: Allow, Reason: BySaved, Rule: "bash.run:curl"},
		},
		{
			name: "saved always deny beats a config allow", def: Allow, savedNo: []string{"bash.run:ls"}, tool: "bash.run", patterns: []string{"ls"},
			want: Decision{Verdict: Deny, Reason: BySaved, Rule: "bash.run:ls"},
		},
		{
			name: "config deny is named before a saved deny", def: Allow, savedNo: []string{"bash.run:rm"}, tool: "bash.run", patterns: []string{"rm"},
			want: Decision{Verdict: Deny, Reason: ByRule, Rule: "bash.run:rm"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Policy{Allow: base.Allow, Deny: base.Deny, Default: tt.def}
			if err := p.Remember(tt.saved, true); err != nil {
				t.Fatal(err)
			}
			if err := p.Remember(tt.savedNo, false); err != nil {
				t.Fatal(err)
			}
			got := p.Decide(tt.tool, tt.patterns)
			if got.Verdict != tt.want.Verdict || got.Reason != tt.want.Reason || got.Rule != tt.want.Rule || !slices.Equal(got.Pending, tt.want.Pending) {
				t.Errorf("Decide(%s, %q) = %+v, want %+v", tt.tool, tt.patterns, got, tt.want)
			}
			var shown []string
			for _, pe := range got.Pending {
				shown = append(shown, pe.String())
			}
			if !slices.Equal(shown, tt.shown) {
				t.Errorf("pending shown as %q, want %q", shown, tt.shown)
			}
			if r := got.Rules(); !slices.Equal(r, tt.rules) {
				t.Errorf("Rules() = %q, want %q", r, tt.rules)
			}
		})
	}
}

// TestRefusalMessages: the refusal of each kind of Deny and of an
// unanswered Ask reads from the typed decision, not from its own text.
func TestRefusalMessages(t *testing.T) {
	p := &Policy{Deny: []string{"bash.run:rm"}, Default: Deny, Source: "config.hcl"}
	if err := p.Remember([]string{"bash.run:curl"}, false); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		def      Verdict
		patterns []string
		want     string
	}{
		{"config rule", Deny, []string{"rm"}, `bash.run denied by rule "bash.run:rm" in the permissions block`},
		{"saved rule", Deny, []string{"curl"}, `bash.run denied by rule "bash.run:curl", saved from an earlier "always deny" answer`},
		{"default deny", Deny, []string{"ls"}, `bash.run:ls is not allowed: no allow rule matches and the default is deny; add "bash.run:ls" to permissions.allow in config.hcl to permit it`},
		{"default deny, unreadable", Deny, []string{"ls", protocol.Opaque("a subshell")}, "bash.run (a subshell) is not allowed: the default is deny and no allow rule can approve what the server could not read"},
		{"ask, nobody asked", Ask, []string{"ls"}, `bash.run needs approval: no allow rule matches bash.run:ls and the default is ask; approve it when asked, or add "bash.run:ls" to permissions.allow in config.hcl`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p.Update(p.Allow, p.Deny, tt.def, AccessWrite)
			err := p.Check("bash.run", tt.patterns)
			if err == nil || err.Error() != tt.want {
				t.Errorf("Check = %v\nwant    %s", err, tt.want)
			}
			if !errors.Is(err, protocol.ErrPermissionDenied) {
				t.Errorf("Check = %v, not ErrPermissionDenied", err)
			}
		})
	}
}

func TestParseLevels(t *testing.T) {
	for _, v := range []Verdict{Allow, Ask, Deny} {
		if got, err := ParseVerdict(v.String()); got != v || err != nil {
			t.Errorf("ParseVerdict(%q) = %v, %v", v, got, err)
		}
	}
	for _, a := range []Access{AccessRead, AccessWrite} {
		if got, err := ParseAccess(a.String()); got != a || err != nil {
			t.Errorf("ParseAccess(%q) = %v, %v", a, got, err)
		}
	}
	if _, err := ParseVerdict("maybe"); err == nil {
		t.Error(`ParseVerdict("maybe") succeeded`)
	}
	if _, err := ParseAccess("admin"); err == nil {
		t.Error(`ParseAccess("admin") succeeded`)
	}
	permits := []struct {
		host, tool Access
		want       bool
	}{
		{AccessRead, AccessRead, true},
		{AccessRead, AccessWrite, false},
		{AccessWrite, AccessWrite, true},
		{0, AccessWrite, true}, // unset host level: write
	}
	for _, tt := range permits {
		if got := tt.host.Permits(tt.tool); got != tt.want {
			t.Errorf("%v.Permits(%v) = %v, want %v", tt.host, tt.tool, got, tt.want)
		}
	}
}

// countingServer is a server whose "run" tool has its own permission
// patterns (the words of its command); it counts how often the host asks
// for them and how often it runs.
type countingServer struct {
	patterns atomic.Int32
	calls    atomic.Int32
}

func (s *countingServer) Name() string { return "sh" }

func (s *countingServer) Describe() *toolcall.Description {
	return &toolcall.Description{Tools: []*toolcall.Tool{
		{Name: "run", CustomPermissionPattern: true},
		{Name: "status", Access: toolcall.AccessRead},
	}}
}

func (s *countingServer) Call(context.Context, string, []byte, toolcall.ProgressFunc) (*toolcall.Result, error) {
	s.calls.Add(1)
	return &toolcall.Result{}, nil
}

func (s *countingServer) PermissionPatterns(_ context.Context, _ string, args []byte) ([]string, error) {
	s.patterns.Add(1)
	var a struct{ Command string }
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, err
	}
	if a.Command == "fail" {
		return nil, errors.New("cannot parse")
	}
	return strings.Fields(a.Command), nil
}

func (s *countingServer) Close(context.Context) error { return nil }

// approverFunc is a registry.Approver from a function.
type approverFunc func(context.Context, Approval) error

func (f approverFunc) Approve(ctx context.Context, a Approval) error { return f(ctx, a) }

// TestCallEvaluatesPolicyOnce: whatever the verdict, a call asks its
// server for its permission patterns once, the Approver (for Ask only)
// once with that evaluation's patterns, and the audit records the verdict
// that decided.
func TestCallEvaluatesPolicyOnce(t *testing.T) {
	approve := func(context.Context, Approval) error { return nil }
	refuse := func(context.Context, Approval) error { return errors.New("sh.run denied by the user") }
	unanswered := func(_ context.Context, a Approval) error { return a.Required() }
	tests := []struct {
		name         string
		def          Verdict
		access       Access
		tool         string
		command      string
		approver     func(context.Context, Approval) error // nil: none in ctx
		wantPatterns int32
		wantAsked    int
		wantRan      bool
		wantDecision string
		wantRule     string
	}{
		{"allowed by rule", Ask, AccessWrite, "sh.run", "ls", approve, 1, 0, true, "allow", "sh.run:ls*"},
		{"denied by rule", Ask, AccessWrite, "sh.run", "rm x", approve, 1, 0, false, "deny", "sh.run:rm*"},
		{"denied by default", Deny, AccessWrite, "sh.run", "curl x", approve, 1, 0, false, "deny", "default"},
		{"ask, approved", Ask, AccessWrite, "sh.run", "curl x", approve, 1, 1, true, "approved", "default"},
		{"ask, refused by the person", Ask, AccessWrite, "sh.run", "curl x", refuse, 1, 1, false, "deny", "default"},
		{"ask, unanswered", Ask, AccessWrite, "sh.run", "curl x", unanswered, 1, 1, false, "ask", "default"},
		{"ask, no approver", Ask, AccessWrite, "sh.run", "curl x", nil, 1, 0, false, "ask", "default"},
		{"pattern error", Ask, AccessWrite, "sh.run", "fail", approve, 1, 0, false, "deny", "pattern-error"},
		{"read-only host: not judged at all", Ask, AccessRead, "sh.run", "ls", approve, 0, 0, false, "invalid", ""},
		{"tool without patterns", Ask, AccessRead, "sh.status", "", approve, 0, 1, true, "approved", "default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			audit, err := OpenAudit(filepath.Join(dir, "audit.jsonl"), 1<<20, 1, true)
			if err != nil {
				t.Fatal(err)
			}
			srv := &countingServer{}
			p := &Policy{Allow: []string{"sh.run:ls*"}, Deny: []string{"sh.run:rm*"}, Default: tt.def, Access: tt.access}
			r := New(p, WithAudit(audit), WithDuplicateLimit(0))
			if err := r.Register(srv, KindPlugin, "test"); err != nil {
				t.Fatal(err)
			}
			var asked []Approval
			ctx := WithClient(t.Context(), "test")
			if tt.approver != nil {
				ctx = WithApprover(ctx, approverFunc(func(ctx context.Context, a Approval) error {
					asked = append(asked, a)
					return tt.approver(ctx, a)
				}))
			}
			args, _ := json.Marshal(map[string]string{"command": tt.command})
			_, callErr := r.Call(ctx, tt.tool, args, nil)
			if err := r.Shutdown(context.Background(), time.Second); err != nil {
				t.Fatal(err)
			}

			if n := srv.patterns.Load(); n != tt.wantPatterns {
				t.Errorf("PermissionPatterns asked %d times, want %d", n, tt.wantPatterns)
			}
			if len(asked) != tt.wantAsked {
				t.Errorf("Approver asked %d times, want %d", len(asked), tt.wantAsked)
			}
			if len(asked) > 0 && (asked[0].Tool != tt.tool || len(asked[0].Pending) == 0 || string(asked[0].Args) != string(args)) {
				t.Errorf("Approver asked about %+v", asked[0])
			}
			if ran := srv.calls.Load() == 1; ran != tt.wantRan || (callErr == nil) != tt.wantRan {
				t.Errorf("ran = %v, Call error = %v; want ran %v", ran, callErr, tt.wantRan)
			}
			recs := readAudit(t, filepath.Join(dir, "audit.jsonl"))
			if len(recs) != 1 || recs[0].Decision != tt.wantDecision || recs[0].Rule != tt.wantRule {
				t.Errorf("audit = %+v, want one record with decision %q rule %q", recs, tt.wantDecision, tt.wantRule)
			}
		})
	}
}

func readAudit(t *testing.T, path string) []AuditRecord {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []AuditRecord
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r AuditRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

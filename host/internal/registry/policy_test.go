package registry

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
)

func TestGlob(t *testing.T) {
	tests := []struct {
		pattern, s string
		want       bool
	}{
		{"filesystem.read_*", "filesystem.read_text_file", true},
		{"filesystem.read_*", "filesystem.write_file", false},
		{"*", "", true},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "aXbY", false},
		{"git.git_?tatus", "git.git_status", true},
		{"*.internal", "db.internal", true},
		{"*.internal", "internal", false},
		{"/home/*", "/home/me/x/y", true},
		{"rm", "rmdir", false},
	}
	for _, tt := range tests {
		if got := Glob(tt.pattern, tt.s); got != tt.want {
			t.Errorf("Glob(%q, %q) = %v, want %v", tt.pattern, tt.s, got, tt.want)
		}
	}
}

func TestPolicyCheck(t *testing.T) {
	p := &Policy{
		Allow:   []string{"bash.run:ls", "bash.run:git", "filesystem.*", "bash.run:*"},
		Deny:    []string{"bash.run:rm", "web.fetch:*.internal"},
		Default: Deny,
		Access:  AccessWrite,
	}
	tests := []struct {
		name     string
		tool     string
		patterns []string
		wantErr  string // "" = allowed
	}{
		{"allowed by tool glob", "filesystem.read_text_file", []string{"/p/a"}, ""},
		{"allowed by pattern", "bash.run", []string{"ls"}, ""},
		{"all patterns must be allowed", "git.git_log", []string{"git_log", "x"}, "no allow rule matches"},
		{"any pattern denied", "bash.run", []string{"ls", "rm"}, `rule "bash.run:rm"`},
		{"deny wins over allow", "bash.run", []string{"rm"}, "denied by rule"},
		{"deny by host glob", "web.fetch", []string{"db.internal"}, "denied"},
		{"default deny", "git.git_status", []string{"git_status"}, "default is deny"},
		{"opaque never allowed", "bash.run", []string{"ls", protocol.Opaque("does not parse")}, "could not read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.Check(tt.tool, tt.patterns)
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("Check(%s, %v) = %v, want allowed", tt.tool, tt.patterns, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Check(%s, %v) = %v, want error containing %q", tt.tool, tt.patterns, err, tt.wantErr)
			}
			if !errors.Is(err, protocol.ErrPermissionDenied) {
				t.Errorf("Check error %v is not ErrPermissionDenied", err)
			}
		})
	}
}

func TestGlobEscapes(t *testing.T) {
	tests := []struct {
		pattern, s string
		want       bool
	}{
		{`\*`, "*", true},
		{`\*`, "anything", false},
		{`a\?c`, "a?c", true},
		{`a\?c`, "abc", false},
		{`a\\b`, `a\b`, true},
		{`*\*`, "x/y*", true},
		{`*\*`, "x/y", false},
		{`a\`, `a\`, true},
	}
	for _, tt := range tests {
		if got := Glob(tt.pattern, tt.s); got != tt.want {
			t.Errorf("Glob(%q, %q) = %v, want %v", tt.pattern, tt.s, got, tt.want)
		}
	}
}

// TestAlwaysAllowOfStarIsLiteral performs the attack: a file literally named
// "*" is approved "always"; a call on another path must still ask. The
// control shows that storing the shown pattern (what the host once did)
// would have allowed every path.
func TestAlwaysAllowOfStarIsLiteral(t *testing.T) {
	for _, name := range []string{"*", "/work/*", "?", `a\*`} {
		t.Run(name, func(t *testing.T) {
			p := &Policy{Default: Ask}
			d := p.Decide("filesystem.read_file", []string{name})
			if d.Verdict != Ask {
				t.Fatalf("Decide(%q) = %+v, want ask", name, d)
			}
			if err := p.Remember(d.Rules(), true); err != nil {
				t.Fatal(err)
			}
			if got := p.Decide("filesystem.read_file", []string{name}); got.Verdict != Allow {
				t.Errorf("after always-allow, Decide(%q) = %+v, want allow", name, got)
			}
			if got := p.Decide("filesystem.read_file", []string{"/etc/shadow"}); got.Verdict != Ask {
				t.Errorf("after always-allow of %q, Decide(/etc/shadow) = %+v (rules %q), want ask", name, got, d.Rules())
			}

			if name != "*" {
				return
			}
			// Control: storing the pattern as shown, unquoted, would have
			// allowed every path.
			control := &Policy{Default: Ask}
			shown := control.Decide("filesystem.read_file", []string{name}).Pending[0].String()
			if err := control.Remember([]string{shown}, true); err != nil {
				t.Fatal(err)
			}
			if got := control.Decide("filesystem.read_file", []string{"/etc/shadow"}); got.Verdict != Allow {
				t.Errorf("control: the unquoted rule did not widen (%+v); the test proves nothing", got)
			}
		})
	}
}

func TestOpaquePatternHasNoRule(t *testing.T) {
	p := &Policy{Default: Ask}
	d := p.Decide("bash.run", []string{"ls", protocol.OpaquePrefix + "a subshell"})
	if rules := d.Rules(); len(rules) != 1 || rules[0] != "bash.run:ls" {
		t.Errorf("Rules() = %q, want only bash.run:ls", rules)
	}
}

func FuzzLiteral(f *testing.F) {
	for _, s := range []string{"*", "?", `\`, `a\*b`, "/home/*/x", ""} {
		f.Add(s, "other")
	}
	f.Fuzz(func(t *testing.T, s, other string) {
		if !Glob(Literal(s), s) {
			t.Fatalf("Glob(Literal(%q), %q) = false", s, s)
		}
		if other != s && Glob(Literal(s), other) {
			t.Fatalf("Glob(Literal(%q), %q) = true", s, other)
		}
	})
}

package registry

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCallerNarrows: a caller's rules are judged after the config's and
// the stricter verdict wins; a caller is never widened.
func TestCallerNarrows(t *testing.T) {
	p := &Policy{Allow: []string{"fs.read_*", "bash.run:ls"}, Deny: []string{"bash.run:rm"}, Default: Ask, Source: "config.hcl"}
	ci := &Caller{Name: "ci", Allow: []string{"fs.*"}, Deny: []string{"fs.read_secret"}, Default: Deny, Source: `caller "ci" in config.hcl`}
	asker := &Caller{Name: "ann", Default: Ask}
	wide := &Caller{Name: "wide", Allow: []string{"*"}} // cannot widen
	tests := []struct {
		name     string
		c        *Caller
		tool     string
		patterns []string
		want     Verdict
		caller   bool // the caller's rules decided
	}{
		{"no caller: config allows", nil, "fs.read_file", []string{"read_file"}, Allow, false},
		{"caller allows what config allows", ci, "fs.read_file", []string{"read_file"}, Allow, false},
		{"caller deny rule", ci, "fs.read_secret", []string{"read_secret"}, Deny, true},
		{"caller default deny", ci, "bash.run", []string{"ls"}, Deny, true},
		{"config deny stays", wide, "bash.run", []string{"rm"}, Deny, false},
		{"config ask stays for a wide caller", wide, "bash.run", []string{"curl"}, Ask, false},
		{"caller default ask narrows an allow", asker, "bash.run", []string{"ls"}, Ask, true},
		{"both ask", asker, "bash.run", []string{"curl"}, Ask, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := p.rulesFor(tt.c)
			d := r.decide(tt.tool, tt.patterns)
			if d.Verdict != tt.want || (d.Caller != "") != tt.caller {
				t.Fatalf("decide = %+v, want %v (caller decided: %v)", d, tt.want, tt.caller)
			}
			if d.Verdict == Deny && tt.caller {
				if err := r.refusal(tt.tool, d); !strings.Contains(err.Error(), `caller "ci"`) {
					t.Errorf("refusal = %v, want it to name the caller", err)
				}
			}
		})
	}
	// Access: a read caller cannot see a WRITE tool even when the host can.
	ro := &Caller{Name: "ro", Access: AccessRead}
	if r := p.rulesFor(ro); r.visible(Tool{Name: "fs.write"}) {
		t.Error("a read caller sees a tool without a READ access level")
	}
}

// TestCallerDecisionsAreTheirOwn: an "always" answer given by one caller
// counts for it alone, survives a reload of the file, and another caller
// is still asked.
func TestCallerDecisionsAreTheirOwn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "permissions.json")
	p := &Policy{Default: Ask}
	if err := p.Load(path); err != nil {
		t.Fatal(err)
	}
	ann, bob := &Caller{Name: "ann"}, &Caller{Name: "bob"}
	if err := p.RememberFor("ann", []string{"bash.run:curl"}, true); err != nil {
		t.Fatal(err)
	}
	if err := p.RememberFor("bob", []string{"bash.run:ls"}, false); err != nil {
		t.Fatal(err)
	}
	check := func(p *Policy) {
		t.Helper()
		if d := p.rulesFor(ann).decide("bash.run", []string{"curl"}); d.Verdict != Allow {
			t.Errorf("ann's curl = %v, want allow (her saved answer)", d.Verdict)
		}
		if d := p.rulesFor(bob).decide("bash.run", []string{"curl"}); d.Verdict != Ask {
			t.Errorf("bob's curl = %v, want ask (ann's answer is not his)", d.Verdict)
		}
		if d := p.rulesFor(nil).decide("bash.run", []string{"curl"}); d.Verdict != Ask {
			t.Errorf("an unauthenticated curl = %v, want ask", d.Verdict)
		}
		if d := p.rulesFor(bob).decide("bash.run", []string{"ls"}); d.Verdict != Deny {
			t.Errorf("bob's ls = %v, want deny (his saved answer)", d.Verdict)
		}
		if d := p.rulesFor(ann).decide("bash.run", []string{"ls"}); d.Verdict != Ask {
			t.Errorf("ann's ls = %v, want ask", d.Verdict)
		}
	}
	check(p)
	again := &Policy{Default: Ask}
	if err := again.Load(path); err != nil {
		t.Fatal(err)
	}
	check(again)
	b, _ := os.ReadFile(path)
	var s storedRules
	if err := json.Unmarshal(b, &s); err != nil || len(s.Allow) != 0 || len(s.Callers["ann"].Allow) != 1 {
		t.Errorf("permissions file = %s (%v); want ann's answer under callers, none global", b, err)
	}
}

// deniedPatterns hands a plugin the pattern parts of every deny rule that
// names the tool: the config's, the saved ones, and the caller's.
func TestDeniedPatterns(t *testing.T) {
	p := &Policy{Deny: []string{"fs.*:*.env", "fs.read_text_file:secret/*", "bash.run:rm", "fs.write_file"}, runtimeDeny: []string{"fs.grep:saved/*"}}
	ci := &Caller{Name: "ci", Deny: []string{"fs.*:ci-only/*", "git.*:x"}}
	for _, tt := range []struct {
		c    *Caller
		tool string
		want []string
	}{
		{nil, "fs.grep", []string{"*.env", "saved/*"}},
		{nil, "fs.read_text_file", []string{"*.env", "secret/*"}},
		{nil, "web.fetch", nil},
		{ci, "fs.grep", []string{"*.env", "saved/*", "ci-only/*"}},
		{ci, "git.status", []string{"x"}},
	} {
		if got := p.rulesFor(tt.c).deniedPatterns(tt.tool); !slices.Equal(got, tt.want) {
			t.Errorf("caller %v, %s: deniedPatterns = %q, want %q", tt.c, tt.tool, got, tt.want)
		}
	}
}

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
		Default: "deny",
		Access:  "write",
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

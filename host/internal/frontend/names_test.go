package frontend

import (
	"regexp"
	"strings"
	"testing"
)

func TestMCPName(t *testing.T) {
	long := strings.Repeat("x", 80)
	tests := []struct {
		server, tool string
		want         string
	}{
		{"filesystem", "read_text_file", "filesystem__read_text_file"},
		{"hello", "greet", "hello__greet"},
		{"web", "fetch.v2", "web__fetch_v2"},
		{"a", "b c/d", "a__b_c_d"},
		{"", "greet", "greet"}, // prefix = "": the bare name
		{"", "b c", "b_c"},
	}
	for _, tt := range tests {
		if got := MCPName(tt.server, tt.tool, 64); got != tt.want {
			t.Errorf("MCPName(%q, %q) = %q, want %q", tt.server, tt.tool, got, tt.want)
		}
	}
	a, b := MCPName("srv", long+"a", 64), MCPName("srv", long+"b", 64)
	if len(a) != 64 || len(b) != 64 {
		t.Errorf("long names not shortened to 64: %d, %d", len(a), len(b))
	}
	if a == b {
		t.Errorf("two long names shortened to the same %q", a)
	}
	if a != MCPName("srv", long+"a", 64) {
		t.Error("shortening is not deterministic")
	}
}

func FuzzMCPName(f *testing.F) {
	f.Add("filesystem", "read_text_file")
	f.Add("s", strings.Repeat("é", 100))
	valid := regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	f.Fuzz(func(t *testing.T, server, tool string) {
		if got := MCPName(server, tool, 64); !valid.MatchString(got) {
			t.Fatalf("MCPName(%q, %q) = %q: not a valid MCP name within 64", server, tool, got)
		}
	})
}

package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestPrintServersEscapesServerText: a plugin's version and its error
// (its own stderr or handshake text) are the server's words; the
// inspect/status table shows their escape sequences instead of obeying
// them.
func TestPrintServersEscapesServerText(t *testing.T) {
	var b bytes.Buffer
	PrintServers(&b, []ServerInfo{{
		Name: "evil", Kind: "plugin", Status: "failed", Source: "/p",
		Version: "1.0\x1b[2J\u202e", Error: "crashed\x1b]0;pwned\x07\nsecond line",
	}})
	got := b.String()
	for _, raw := range []string{"\x1b", "\x07", "\u202e"} {
		if strings.Contains(got, raw) {
			t.Errorf("table printed %q raw:\n%q", raw, got)
		}
	}
	for _, want := range []string{`1.0\u001b[2J\u202e`, `crashed\u001b]0;pwned\u0007` + "\nsecond line"} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}

package termsafe

import (
	"encoding/json"
	"testing"
)

func TestEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text, ünïcödé and 日本語\nsecond line", "plain text, ünïcödé and 日本語\nsecond line"},
		{"read \u202egnp.exe", `read \u202egnp.exe`},
		{"isolate \u2066x\u2069", `isolate \u2066x\u2069`},
		{"esc \x1b]0;pwned\x07 title", `esc \u001b]0;pwned\u0007 title`},
		{"tab\tcr\r", `tab\u0009cr\u000d`},
		{"bad \xff byte", `bad \ufffd byte`},
		{"zero\u200bwidth", `zero\u200bwidth`},
	}
	for _, tt := range tests {
		if got := Escape(tt.in); got != tt.want {
			t.Errorf("Escape(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	// Inside a JSON string the escapes are JSON's own.
	var s string
	if err := json.Unmarshal([]byte(`"`+Escape("a\u202eb")+`"`), &s); err != nil || s != "a\u202eb" {
		t.Errorf("escaped JSON string reads back as %q (%v)", s, err)
	}
}

// TestText: a tool's output keeps its tabs and lines; what could rewrite
// the terminal is still escaped.
func TestText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a\tb\nc\td", "a\tb\nc\td"},
		{"line\rover", `line\u000dover`},
		{"\x1b[2J\x1b[Hcleared", `\u001b[2J\u001b[Hcleared`},
		{"rlo \u202eexe.txt", `rlo \u202eexe.txt`},
	}
	for _, tt := range tests {
		if got := Text(tt.in); got != tt.want {
			t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// Package termsafe makes text that servers wrote safe to print on a
// person's terminal: a tool's description or schema may carry control
// characters (escape sequences that move the cursor or retitle the window)
// and bidirectional overrides (U+202E and its kin) that make a diff or a
// listing read differently from what it holds.
package termsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape returns s with every rune that is not printable (control and
// format characters, bidirectional overrides and isolates, invalid UTF-8)
// written as \uXXXX, which is also how JSON writes it, so escaped JSON stays
// valid. Newlines and spaces stay as they are.
func Escape(s string) string { return escape(s, false) }

// Text is Escape for a tool's output printed whole on a terminal: tabs
// stay as they are too (columns, indented code), everything else that
// Escape writes as \uXXXX still is (a carriage return could overwrite a
// line that was printed).
func Text(s string) string { return escape(s, true) }

func escape(s string, tabs bool) string {
	keep := func(r rune) bool {
		return r == '\n' || (tabs && r == '\t') || (r != utf8.RuneError && unicode.IsPrint(r))
	}
	clean := true
	for _, r := range s {
		if !keep(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\ufffd`)
		case keep(r):
			b.WriteString(s[i : i+size])
		case r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

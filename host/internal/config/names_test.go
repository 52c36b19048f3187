package config

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// The name checks are written by hand (a package-level expression with a
// bounded repetition is compiled at every start): they accept exactly
// what the expressions they replace accepted.
func TestNameChecksMatchTheirExpressions(t *testing.T) {
	cases := []struct {
		name  string
		re    *regexp.Regexp
		check func(string) bool
		chars string
	}{
		{"token", regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.@:-]{0,127}$`), ValidTokenName, "aZ09_.@:-|+/= é\x00"},
		{"caller", regexp.MustCompile(`^[A-Za-z0-9_.@:|+/=-]{1,256}$`), ValidCallerName, "aZ09_.@:|+/=- é\x00#"},
		{"prefix", regexp.MustCompile(`^[A-Za-z0-9_-]{0,48}$`), func(s string) bool { return nameOf(s, "_-", 48) }, "aZ09_-. é"},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range cases {
		inputs := []string{"", "a", "-a", "_", strings.Repeat("a", 48), strings.Repeat("a", 49), strings.Repeat("a", 128), strings.Repeat("a", 129), strings.Repeat("a", 256), strings.Repeat("a", 257), "auth0|5f00", "user@example.com", "a b", "a\n"}
		for range 5000 {
			n := rng.IntN(260)
			if rng.IntN(2) == 0 {
				n = rng.IntN(8)
			}
			var b strings.Builder
			for range n {
				// a character of the set, mostly; the set's bytes taken singly
				// (so half a UTF-8 sequence is tried too)
				b.WriteByte(c.chars[rng.IntN(len(c.chars))])
			}
			inputs = append(inputs, b.String())
		}
		accepted := 0
		for _, in := range inputs {
			want := c.re.MatchString(in)
			if got := c.check(in); got != want {
				t.Errorf("%s %q: check says %v, the expression %v", c.name, in, got, want)
			}
			if want {
				accepted++
			}
		}
		if accepted < 100 || accepted > len(inputs)-100 {
			t.Errorf("%s: %d of %d inputs accepted: the inputs do not try both sides", c.name, accepted, len(inputs))
		}
	}
}

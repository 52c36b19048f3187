package protocol

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// validToolName is written by hand (a package-level expression with a
// bounded repetition is compiled at every plugin's start): it accepts
// exactly what MCP's grammar, as an expression, accepts.
func TestValidToolNameMatchesTheGrammar(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
	const chars = "azAZ09_.-/ :é\x00"
	inputs := []string{"", "a", strings.Repeat("a", 128), strings.Repeat("a", 129), "git.status", "a b", "a\n"}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		n := rng.IntN(132)
		if rng.IntN(2) == 0 {
			n = rng.IntN(6)
		}
		var b strings.Builder
		for range n {
			b.WriteByte(chars[rng.IntN(len(chars))])
		}
		inputs = append(inputs, b.String())
	}
	accepted := 0
	for _, in := range inputs {
		want := re.MatchString(in)
		if got := validToolName(in); got != want {
			t.Errorf("%q: validToolName says %v, the grammar %v", in, got, want)
		}
		if got := ValidateToolName(in) == nil; got != want {
			t.Errorf("%q: ValidateToolName accepts: %v, the grammar %v", in, got, want)
		}
		if want {
			accepted++
		}
	}
	if accepted < 100 || accepted > len(inputs)-100 {
		t.Errorf("%d of %d inputs accepted: the inputs do not try both sides", accepted, len(inputs))
	}
}

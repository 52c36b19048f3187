package ablate

import (
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name, list string
		want       []string
	}{
		{"unset", "", nil},
		{"one", "shortpath", []string{ShortPath}},
		{"several, spaced", " poller, workpool ,,audit-linger", []string{Poller, WorkPool, AuditLinger}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parse(tt.list); !slices.Equal(got, tt.want) {
				t.Errorf("parse(%q) = %q, want %q", tt.list, got, tt.want)
			}
		})
	}
}

// Nothing is switched off unless the benchmark says so.
func TestOffByDefault(t *testing.T) {
	if v := off(); len(v) > 0 {
		t.Skipf("%s is set in this environment: %q", Env, v)
	}
	for _, name := range []string{ShortPath, Poller, WorkPool, AuditLinger} {
		if Off(name) {
			t.Errorf("Off(%q) = true with %s unset", name, Env)
		}
	}
}

package cli

import (
	"testing"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/tuning"
)

// countingQuiet counts what the observer tells it.
type countingQuiet struct{ touched, large int }

func (c *countingQuiet) Touch() { c.touched++ }
func (c *countingQuiet) Large() { c.large++ }

// Every call's start and end is activity; a call whose arguments or result
// reach tuning.LargeCall bytes is large (its heap goes back soon after).
func TestQuietObserverTellsOfLargeCalls(t *testing.T) {
	tests := []struct {
		name      string
		rec       registry.AuditRecord
		wantLarge int
	}{
		{"small", registry.AuditRecord{ArgsSize: 100, ResultSize: 5000}, 0},
		{"large result", registry.AuditRecord{ArgsSize: 100, ResultSize: tuning.LargeCall}, 1},
		{"large arguments", registry.AuditRecord{ArgsSize: tuning.LargeCall + 1}, 1},
		{"refused before it ran", registry.AuditRecord{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := &countingQuiet{}
			o := quietObserver{q}
			o.CallStarted("s", "t")
			o.CallEnded("s", "t", &tt.rec, 0)
			if q.touched != 2 || q.large != tt.wantLarge {
				t.Errorf("touched %d, large %d; want 2, %d", q.touched, q.large, tt.wantLarge)
			}
		})
	}
}

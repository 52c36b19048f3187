package external

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// A flood of drops logs a line a second, each with the count since the
// line before, not a line per drop.
func TestDropReportLogsOnceASecond(t *testing.T) {
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Warn})
	clock := time.Unix(1000, 0)
	d := dropReport{now: func() time.Time { return clock }}
	for i := range 300000 {
		if i == 150000 {
			clock = clock.Add(1100 * time.Millisecond)
		}
		d.dropped(log, "notifications dropped: too many waiting", "method", "notifications/tools/list_changed")
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("300,000 drops over two seconds logged %d lines, want 2:\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[0], "dropped=1") || !strings.Contains(lines[1], "dropped=150000") {
		t.Errorf("the lines do not count the drops (the first one alone, then the 150,000 since):\n%s", buf.String())
	}
}

package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
)

// Lines logged through slog reach hclog's JSON output (what the host
// parses) with their level, attributes and groups; levels below the
// process's level cost nothing and write nothing.
func TestLogHandler(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(&logHandler{l: hclog.New(&hclog.LoggerOptions{Output: &buf, JSONFormat: true, Level: hclog.Info})})
	l.Debug("hidden")
	l.With("tool", "grep").WithGroup("req").Warn("slow", "ms", 1200, slog.Group("path", "rel", "a.go"))
	l.Log(t.Context(), LevelTrace, "hidden too")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("wrote %d lines, want 1: %q", len(lines), buf.String())
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatal(err)
	}
	if got["@level"] != "warn" || got["@message"] != "slow" || got["tool"] != "grep" || got["req.ms"] != float64(1200) || got["req.path.rel"] != "a.go" {
		t.Errorf("line = %v", got)
	}
	if l.Enabled(t.Context(), slog.LevelDebug) {
		t.Error("debug enabled at info")
	}
}

type sink struct{ logs []*pluginv1.Log }

func (s *sink) Progress(*pluginv1.Progress) {}
func (s *sink) Log(l *pluginv1.Log)         { s.logs = append(s.logs, l) }
func (s *sink) Request(context.Context, string, []byte) ([]byte, error) {
	return nil, nil
}

// Request.Log sends the line with the call, fields as JSON.
func TestRequestLog(t *testing.T) {
	s := &sink{}
	r := &Request{Tool: "t", events: s}
	r.Log(slog.LevelError, "failed", "file", "a.txt", slog.Int("tries", 3))
	if len(s.logs) != 1 {
		t.Fatalf("sent %d logs", len(s.logs))
	}
	l := s.logs[0]
	var f map[string]any
	_ = json.Unmarshal(l.GetFieldsJson(), &f)
	if l.GetLevel() != pluginv1.LogLevel_LOG_LEVEL_ERROR || l.GetMessage() != "failed" || f["file"] != "a.txt" || f["tries"] != float64(3) {
		t.Errorf("log = %v fields %v", l, f)
	}
}

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestLogsOfOneServer: `switchboard logs NAME` prints what one server wrote
// on stderr and what the host logged about it, from the running host (not
// the host's own log, which is at warn here), refuses an unknown name
// listing the servers, and --follow prints new lines as they come.
func TestLogsOfOneServer(t *testing.T) {
	e := setup(t)
	e = setupWith(t, fmt.Sprintf(`plugin "fz" {
  path = %q
  env  = { FIXTURE_FEATURES = "1" }
}`, e.bins.TestPlugin))
	c, _ := mcpClient(t, e) // serve at SWITCHBOARD_LOG_LEVEL=warn
	initialize(t, c)
	if _, err := callTool(t.Context(), c, "fz__chatty", map[string]any{}, nil); err != nil {
		t.Fatal(err)
	}

	var lines []string
	if !eventually(10*time.Second, func() bool {
		out, _, _ := run(t, e, "logs", "fz", "--config", e.config)
		lines = strings.Split(strings.TrimSpace(out), "\n")
		return strings.Contains(out, "chatty on stderr")
	}) {
		t.Fatalf("logs fz has no line of the plugin's stderr:\n%s", strings.Join(lines, "\n"))
	}
	var sawStart bool
	for _, l := range lines {
		if strings.Contains(l, "hello") {
			t.Errorf("logs fz shows another server's line: %s", l)
		}
		sawStart = sawStart || strings.Contains(l, "plugin started")
	}
	if !sawStart {
		t.Errorf("logs fz lacks the host's own debug line about the start (kept whatever the host's level):\n%s", strings.Join(lines, "\n"))
	}

	_, errOut, code := run(t, e, "logs", "nope", "--config", e.config)
	if code != 1 || !strings.Contains(errOut, `no server named "nope"`) || !strings.Contains(errOut, "fz") {
		t.Errorf("logs nope = %d %q, want 1 naming the servers", code, errOut)
	}

	// --follow --json: the kept line, then the new one as it arrives.
	follow := exec.CommandContext(t.Context(), e.bins.Switchboard, "logs", "fz", "--follow", "--since", "1h", "--json", "--config", e.config)
	out, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = follow.Process.Kill(); _ = follow.Wait() })
	got := make(chan map[string]any, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				got <- m
			}
		}
		close(got)
	}()
	if _, err := callTool(t.Context(), c, "fz__chatty", map[string]any{}, nil); err != nil {
		t.Fatal(err)
	}
	seen := 0 // the first call's line is kept; the second's follows
	deadline := time.After(15 * time.Second)
	for {
		select {
		case m, ok := <-got:
			if !ok {
				t.Fatal("logs --follow ended")
			}
			if m["message"] == "chatty on stderr" {
				if seen++; seen < 2 {
					continue
				}
				if f, _ := m["fields"].(map[string]any); f["n"] != "7" {
					t.Errorf("fields = %v, want n=7", m["fields"])
				}
				return
			}
		case <-deadline:
			all, _, _ := run(t, e, "logs", "fz", "--config", e.config)
			t.Fatalf("logs --follow did not print the new line; logs now:\n%s", all)
		}
	}
}

// TestLogFormatJSON: log_format = "json" makes every line of the host's log
// a JSON object (for collectors); a wrong value is a diagnostic.
func TestLogFormatJSON(t *testing.T) {
	e := setupWith(t, `log_format = "json"`)
	cmd := exec.Command(e.bins.Switchboard, "tools", "--config", e.config)
	cmd.Env = append(cmd.Environ(), "SWITCHBOARD_LOG_LEVEL=debug")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tools: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) < 3 {
		t.Fatalf("only %d log lines at debug:\n%s", len(lines), stderr.String())
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil || m["@message"] == nil {
			t.Fatalf("log line is not hclog JSON: %q (%v)", l, err)
		}
	}

	bad := setupWith(t, `log_format = "xml"`)
	_, errOut, code := run(t, bad, "validate", "--config", bad.config)
	if code != 1 || !strings.Contains(errOut, `log_format "xml" is not one of text, json`) {
		t.Errorf("validate with log_format = xml: %d %q", code, errOut)
	}
}

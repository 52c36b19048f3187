package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestReplacedConfigStaysHidden: an editor's save replaces config.hcl with
// a new file, which the mounts of running sandboxes do not cover; the host
// notices and restarts the confined servers, so bash cannot read (or
// write) the new config.
func TestReplacedConfigStaysHidden(t *testing.T) {
	e := setup(t)
	c, _ := mcpClient(t, e)
	initialize(t, c)
	cat := func() string {
		res, err := callTool(t.Context(), c, "bash__run", map[string]any{"command": "cat ../config.hcl; echo END"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return resultText(res)
	}
	if out := cat(); strings.Contains(out, "builtin") {
		t.Fatalf("the config is visible to bash before any change: %q", out)
	}
	before := pids(status(t, e))["bash"]
	b, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.config+".new", append(b, []byte("# saved by an editor\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(e.config+".new", e.config); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for pids(status(t, e))["bash"] == before || pids(status(t, e))["bash"] == 0 {
		if time.Now().After(deadline) {
			t.Fatal("bash was not restarted after the config was replaced")
		}
		time.Sleep(100 * time.Millisecond)
	}
	var out string
	for time.Now().Before(deadline) {
		if out = cat(); strings.Contains(out, "END") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if strings.Contains(out, "saved by an editor") || strings.Contains(out, "builtin") {
		t.Errorf("after the save bash reads the new config: %q", out)
	}
}

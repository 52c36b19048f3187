package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDoctor: a healthy config gets ok on every line, including a start of
// each server; a pinned binary that changed, a data_dir others can write
// and a listen address in use each fail, naming what is wrong, with exit 1.
func TestDoctor(t *testing.T) {
	e := setup(t)
	// The person's git config, with safe.bareRepository=explicit.
	gitConfig := filepath.Join(t.TempDir(), "gitconfig")
	if err := os.WriteFile(gitConfig, []byte("[safe]\n\tbareRepository = explicit\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", gitConfig)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	out, errOut, code := run(t, e, "doctor", "--json", "--config", e.config)
	if code != 0 {
		t.Fatalf("doctor on a healthy config = %d\n%s\n%s", code, out, errOut)
	}
	var got []struct{ Check, Verdict, Detail string }
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, out)
	}
	seen := map[string]string{}
	for _, f := range got {
		seen[f.Check] = f.Verdict
	}
	for _, c := range []string{"config", "sandbox", "git", "git safety", "bash", "data_dir", "server filesystem", "server fx", "server hello"} {
		if seen[c] != "ok" {
			t.Errorf("check %q = %q, want ok (all: %+v)", c, seen[c], got)
		}
	}
	// Without the setting: a warning that says what to run (not a
	// failure: the host runs either way).
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	out, _, code = run(t, e, "doctor", "--config", e.config)
	if code != 0 || !regexp.MustCompile(`(?m)^warn\s+git safety\s+safe.bareRepository = all`).MatchString(out) || !strings.Contains(out, "git config --global safe.bareRepository explicit") {
		t.Errorf("doctor without safe.bareRepository = %d, want 0 and a warning naming the fix:\n%s", code, out)
	}

	// A changed pinned binary, a data_dir others may write, a port in use.
	bin := filepath.Join(t.TempDir(), "hello")
	data, err := os.ReadFile(e.bins.Hello)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	bad := setupWith(t, `plugin "pinned" {
  path   = "`+bin+`"
  sha256 = "`+strings.Repeat("ab", 32)+`"
}`)
	dataDir := filepath.Join(filepath.Dir(bad.config), "state")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dataDir, 0o777); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	out, _, code = run(t, bad, "doctor", "--config", bad.config, "--http", busy.Addr().String())
	if code != 1 {
		t.Errorf("doctor with a bad pin and a shared data_dir = %d, want 1\n%s", code, out)
	}
	for _, want := range []string{"FAIL  pin pinned", "the config pins " + strings.Repeat("ab", 32), "FAIL  data_dir", "writable by", "FAIL  http", "cannot listen on " + busy.Addr().String(), "servers", "not started"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}

	// A locked binary that changed afterwards.
	bin2 := filepath.Join(t.TempDir(), "switchboard-plugin-hello2")
	if err := os.WriteFile(bin2, data, 0o755); err != nil {
		t.Fatal(err)
	}
	locked := setupWith(t, `plugin "hello2" { path = "`+bin2+`" }`)
	if out, errOut, code := run(t, locked, "plugin", "lock", "--config", locked.config); code != 0 {
		t.Fatalf("plugin lock = %d\n%s\n%s", code, out, errOut)
	}
	out, _, code = run(t, locked, "doctor", "--config", locked.config)
	if code != 0 || !regexp.MustCompile(`(?m)^ok\s+lock hello2`).MatchString(out) {
		t.Errorf("doctor right after plugin lock = %d:\n%s", code, out)
	}
	f, err := os.OpenFile(bin2, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write([]byte("tampered"))
	f.Close()
	out, _, code = run(t, locked, "doctor", "--config", locked.config)
	if code != 1 || !regexp.MustCompile(`(?m)^FAIL\s+lock hello2`).MatchString(out) {
		t.Errorf("doctor with a changed locked binary = %d, want 1 and FAIL on lock hello2:\n%s", code, out)
	}
}

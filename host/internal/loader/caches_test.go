package loader

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/host/internal/sandbox"
	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

// An external stdio server could write the whole of ~/.cache, which holds
// Go's build cache: an entry planted there is linked by the person's next
// `go build`, outside any sandbox (red team round 5). The test runs a
// command in an external server's default sandbox that plants a file in
// ~/.cache/go-build and writes to uv's cache; the plant must fail and the
// package cache stay writable. The control runs the same command
// unconfined, where both writes succeed.
func TestExternalServerCannotWriteGoBuildCache(t *testing.T) {
	bins := fixtures.Build(t)
	if r := (&sandbox.Sandbox{Helper: bins.Sandbox, Policy: sandbox.Policy{Mode: sandbox.ModeRequired}}).Report(); r.Landlock == 0 && !r.Namespaces {
		t.Skipf("nothing confines here: %s", r)
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", "")
	goBuild := filepath.Join(home, ".cache", "go-build")
	for _, d := range []string{goBuild, filepath.Join(home, ".cache", "uv"), filepath.Join(home, ".npm")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "project"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, dir, "project_dir = \"project\"\nexternal \"x\" {\n command = \"/bin/sh\"\n}\n")
	sb := confinement(cfg, hostFilesOf(cfg), registry.KindExternal, "x", config.Sandbox{}, nil, "", bins.Switchboard)
	sb.TempRoot = t.TempDir()

	const script = `echo planted > "$1/.cache/go-build/ab-d"; echo ok > "$1/.cache/uv/entry"; echo npm > "$1/.npm/entry"; true`
	run := func(confined bool) string {
		for _, f := range []string{filepath.Join(goBuild, "ab-d"), filepath.Join(home, ".cache", "uv", "entry"), filepath.Join(home, ".npm", "entry")} {
			_ = os.Remove(f)
		}
		shIn(t, sb, confined, script, home)
		var got []string
		for _, f := range []string{filepath.Join(goBuild, "ab-d"), filepath.Join(home, ".cache", "uv", "entry"), filepath.Join(home, ".npm", "entry")} {
			if _, err := os.Stat(f); err == nil {
				got = append(got, strings.TrimPrefix(f, home+"/"))
			}
		}
		return strings.Join(got, " ")
	}
	if got := run(false); got != ".cache/go-build/ab-d .cache/uv/entry .npm/entry" {
		t.Fatalf("control (unconfined) wrote %q, want all three", got)
	}
	if got := run(true); got != ".cache/uv/entry .npm/entry" {
		t.Errorf("confined external server wrote %q, want the package caches only (not go-build)", got)
	}
}

// A first `npx` or `uvx` needs its cache folder, which the sandbox does not
// let it create (the home folder is not writable): the sandbox makes the
// two at the server's start, not when a command only reads the config.
func TestExternalServerPackageCachesMade(t *testing.T) {
	bins := fixtures.Build(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "project"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, dir, "project_dir = \"project\"\nexternal \"x\" {\n command = \"/bin/sh\"\n sandbox { mode = \"best-effort\" }\n}\n")
	sb := confinement(cfg, hostFilesOf(cfg), registry.KindExternal, "x", config.Sandbox{Mode: "best-effort"}, nil, "", bins.Switchboard)
	sb.TempRoot = t.TempDir()
	made := []string{filepath.Join(home, ".npm"), filepath.Join(cache, "uv")}
	for _, d := range made {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s was made before any start", d)
		}
		if !slices.Contains(sb.Policy.Write, d) {
			t.Errorf("%s is not writable: %v", d, sb.Policy.Write)
		}
	}
	if slices.Contains(sb.Policy.Write, filepath.Join(home, ".cache")) || slices.Contains(sb.Policy.Write, cache) {
		t.Errorf("the whole cache folder is writable: %v", sb.Policy.Write)
	}
	conf, err := sb.Wrap(exec.Command("/bin/true"), "")
	if err != nil {
		t.Fatalf("wrap: %v", err)
	}
	if conf != nil {
		defer conf.Stopped()
	}
	for _, d := range made {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			t.Errorf("%s was not made at the start: %v", d, err)
		}
	}
}

// TestExternalServerCannotReadOtherProgramsConfig: an external stdio server
// reads the package runners' settings in ~/.config (uv's here), not the
// rest of it, where other programs keep their tokens (gh's hosts.yml).
// The control reads both unconfined.
func TestExternalServerCannotReadOtherProgramsConfig(t *testing.T) {
	bins := fixtures.Build(t)
	if r := (&sandbox.Sandbox{Helper: bins.Sandbox, Policy: sandbox.Policy{Mode: sandbox.ModeRequired}}).Report(); r.Landlock == 0 && !r.Namespaces {
		t.Skipf("nothing confines here: %s", r)
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	for f, body := range map[string]string{".config/gh/hosts.yml": "oauth_token: gho_SECRET\n", ".config/uv/uv.toml": "index-url = \"https://pypi.example\"\n"} {
		if err := os.MkdirAll(filepath.Join(home, filepath.Dir(f)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, f), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "project"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, dir, "project_dir = \"project\"\nexternal \"x\" {\n command = \"/bin/sh\"\n}\n")
	sb := confinement(cfg, hostFilesOf(cfg), registry.KindExternal, "x", config.Sandbox{}, nil, "", bins.Switchboard)
	sb.TempRoot = t.TempDir()
	const script = `cat "$1/.config/uv/uv.toml" "$1/.config/gh/hosts.yml" 2>/dev/null; true`
	run := func(confined bool) string {
		return shIn(t, sb, confined, script, home)
	}
	if got := run(false); !strings.Contains(got, "gho_SECRET") || !strings.Contains(got, "index-url") {
		t.Fatalf("control (unconfined) read %q, want both files", got)
	}
	got := run(true)
	if strings.Contains(got, "gho_SECRET") {
		t.Errorf("a confined external server read gh's token: %q", got)
	}
	if !strings.Contains(got, "index-url") {
		t.Errorf("a confined external server could not read uv's settings: %q", got)
	}
}

// shIn runs script with /bin/sh (arg as $1) in sb's sandbox, or unconfined
// for a control, and returns what it wrote on stdout.
func shIn(t *testing.T, sb *sandbox.Sandbox, confined bool, script, arg string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script, "sh", arg)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	var out strings.Builder
	cmd.Stdout = &out
	if !confined {
		if err := cmd.Run(); err != nil {
			t.Fatalf("unconfined: %v", err)
		}
		return out.String()
	}
	conf, err := sb.Wrap(cmd, "")
	if err != nil {
		t.Fatalf("wrap: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if conf != nil {
		if err := conf.Started(cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
		defer conf.Stopped()
	}
	_ = cmd.Wait()
	return out.String()
}

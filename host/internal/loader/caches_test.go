package loader

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/host/internal/sandbox"
	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

// An external stdio server could write the person's package caches,
// whose contents programs outside any sandbox run unchecked: Go's build
// cache (a planted entry is linked by the next `go build`, red team round
// 5), npx's packages in ~/.npm/_npx and uv's tools in ~/.local/share/uv
// (a server edited a cached package's script and the person's next `npx`
// ran it unconfined, red team round 4). The test performs those writes
// from an external server's default sandbox: each must fail, while the
// same writes into the server's own home folder (its HOME, in its state
// folder, where its runners keep their caches) succeed. The control runs
// the command unconfined, where the writes into the person's home succeed.
func TestExternalServerCannotWriteTheUsersCaches(t *testing.T) {
	bins := fixtures.Build(t)
	if r := (&sandbox.Sandbox{Helper: bins.Switchboard, Policy: sandbox.Policy{Mode: sandbox.ModeRequired}}).Report(); r.Landlock == 0 && !r.Namespaces {
		t.Skipf("nothing confines here: %s", r)
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("XDG_STATE_HOME", "")
	planted := []string{".cache/go-build/ab-d", ".cache/uv/entry", ".npm/_npx/0123/node_modules/cowsay/cli.js", ".local/share/uv/tools/ruff/bin/ruff"}
	for _, f := range planted {
		if err := os.MkdirAll(filepath.Join(home, filepath.Dir(f)), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "project"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, dir, "project_dir = \"project\"\nexternal \"x\" {\n command = \"/bin/sh\"\n}\n")
	state := ExternalState(cfg, "x")
	sb := confinement(cfg, hostFilesOf(cfg), registry.KindExternal, "x", config.Sandbox{}, nil, state, bins.Switchboard)
	sb.TempRoot = t.TempDir()

	script := ""
	for _, f := range planted {
		script += fmt.Sprintf("echo planted > \"$1/%s\"; ", f)
	}
	// Its own caches, where its runners put them: through HOME and the
	// variables npm and the XDG runners read.
	script += `mkdir -p "$HOME/.npm" && echo own > "$HOME/.npm/entry"; mkdir -p "$npm_config_cache/_npx" && echo own > "$npm_config_cache/_npx/entry"; mkdir -p "$XDG_CACHE_HOME/uv" && echo own > "$XDG_CACHE_HOME/uv/entry"; true`
	written := func() []string {
		var got []string
		for _, f := range planted {
			if b, err := os.ReadFile(filepath.Join(home, f)); err == nil && string(b) == "planted\n" {
				got = append(got, f)
			}
			_ = os.Remove(filepath.Join(home, f))
		}
		return got
	}
	shIn(t, sb, false, script, home)
	if got := written(); len(got) != len(planted) {
		t.Fatalf("control (unconfined) wrote %v, want all of %v", got, planted)
	}
	shIn(t, sb, true, script, home)
	if got := written(); len(got) > 0 {
		t.Errorf("a confined external server wrote into the person's caches: %v", got)
	}
	for _, f := range []string{".npm/entry", ".npm/_npx/entry", ".cache/uv/entry"} {
		if b, err := os.ReadFile(filepath.Join(state, "home", f)); err != nil || string(b) != "own\n" {
			t.Errorf("the server's own %s was not written in its home folder: %q, %v", f, b, err)
		}
	}
}

// An external server's home folder is made at its start (npx and uvx need
// their cache folders, and the server may not create folders in the
// person's home), in its state folder; nothing of the person's home is
// writable.
func TestExternalServerHomeMade(t *testing.T) {
	bins := fixtures.Build(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "project"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, dir, "project_dir = \"project\"\nexternal \"x\" {\n command = \"/bin/sh\"\n sandbox { mode = \"best-effort\" }\n}\n")
	state := ExternalState(cfg, "x")
	sb := confinement(cfg, hostFilesOf(cfg), registry.KindExternal, "x", config.Sandbox{Mode: "best-effort"}, nil, state, bins.Switchboard)
	sb.TempRoot = t.TempDir()
	own := filepath.Join(state, "home")
	if sb.Policy.Env["HOME"] != own || sb.Policy.Env["npm_config_cache"] != filepath.Join(own, ".npm") {
		t.Errorf("the server's environment does not point at its own home: %v", sb.Policy.Env)
	}
	for _, w := range sb.Policy.Write {
		if w != cfg.ProjectDir && within(w, home) {
			t.Errorf("%s in the person's home is writable: %v", w, sb.Policy.Write)
		}
	}
	if _, err := os.Stat(own); err == nil {
		t.Errorf("%s was made before any start", own)
	}
	conf, err := sb.Wrap(exec.Command("/bin/true"), "")
	if err != nil {
		t.Fatalf("wrap: %v", err)
	}
	if conf != nil {
		defer conf.Stopped()
	}
	if st, err := os.Stat(own); err != nil || !st.IsDir() {
		t.Errorf("%s was not made at the start: %v", own, err)
	}
}

// TestExternalServerCannotReadOtherProgramsConfig: an external stdio server
// reads the package runners' settings in ~/.config (uv's here), not the
// rest of it, where other programs keep their tokens (gh's hosts.yml).
// The control reads both unconfined.
func TestExternalServerCannotReadOtherProgramsConfig(t *testing.T) {
	bins := fixtures.Build(t)
	if r := (&sandbox.Sandbox{Helper: bins.Switchboard, Policy: sandbox.Policy{Mode: sandbox.ModeRequired}}).Report(); r.Landlock == 0 && !r.Namespaces {
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
	sb := confinement(cfg, hostFilesOf(cfg), registry.KindExternal, "x", config.Sandbox{}, nil, ExternalState(cfg, "x"), bins.Switchboard)
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
	if !confined {
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("unconfined: %v", err)
		}
		return string(out)
	}
	conf, err := sb.Wrap(cmd, "")
	if err != nil {
		t.Fatalf("wrap: %v", err)
	}
	if conf != nil {
		defer conf.Stopped()
	}
	// Combined output: what the script writes to stderr is sent to
	// /dev/null by the scripts themselves.
	out, _ := fixtures.RunConfined(conf, cmd)
	return string(out)
}

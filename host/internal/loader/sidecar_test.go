package loader

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/host/internal/builtins"
	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/host/internal/sandbox"
	"github.com/switchboard-mcp/switchboard/internal/fixtures"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
)

// pinSidecars sets this process's pins (builtins.Sidecars, which make
// build sets at link time) for the test.
func pinSidecars(t *testing.T, pins string) {
	t.Helper()
	old := builtins.Sidecars
	builtins.Sidecars = pins
	t.Cleanup(func() { builtins.Sidecars = old })
}

func sha256Of(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// copyFile copies src to dst with mode.
func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}

// A built-in runs from its own binary only when that file is the one the
// host pins; anything else there (another build, a file a plugin planted,
// one rewritten after it was checked while keeping its size and mtime) is
// not run, and the host serves the built-in itself.
func TestSidecarRunsOnlyThePinnedBinary(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "switchboard")
	side := filepath.Join(dir, builtins.BinaryPrefix+"git")
	for _, f := range []string{self, side} {
		if err := os.WriteFile(f, []byte("built "+f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pin := sha256Of(t, side)
	spec := launcher.Spec{Name: "git", Path: self, Args: []string{builtins.ServeCommand, "git"}}
	log := hclog.NewNullLogger()
	served := func(s *sidecar) string {
		t.Helper()
		got := s.apply(spec, log)
		if got.Path == self {
			if !slices.Equal(got.Args, spec.Args) || got.SHA256 != "" {
				t.Fatalf("served by the host with %v, sha256 %q", got.Args, got.SHA256)
			}
			return "host"
		}
		if got.Path != side || got.Args != nil || got.SHA256 != pin || got.Hasher == nil {
			t.Fatalf("sidecar spec = %s %v sha256 %q hasher %v", got.Path, got.Args, got.SHA256, got.Hasher != nil)
		}
		return "sidecar"
	}

	pinSidecars(t, "")
	if s := sidecarOf(self, "git", t.TempDir()); s != nil {
		t.Fatalf("a host that pins nothing runs %s", s.path)
	}
	pinSidecars(t, "web="+strings.Repeat("0", 64)+", git="+pin)
	if builtins.Pin("git") != pin || builtins.Pin("bash") != "" {
		t.Fatalf("Pin(git) = %q, Pin(bash) = %q", builtins.Pin("git"), builtins.Pin("bash"))
	}
	data := t.TempDir()
	s := sidecarOf(self, "git", data)
	if got := served(s); got != "sidecar" {
		t.Fatalf("the pinned binary: served by the %s", got)
	}
	if _, err := os.Stat(filepath.Join(data, HashesFile)); err != nil {
		t.Errorf("the hash is not cached: %v", err)
	}
	if got := served(s); got != "sidecar" {
		t.Errorf("the pinned binary, hash cached: served by the %s", got)
	}

	// Rewritten in place, same size, mtime set back: the cached hash must
	// not vouch for it (its ctime changed).
	st, _ := os.Stat(side)
	if err := os.WriteFile(side, []byte(strings.Replace("built "+side, "built", "evil!", 1)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(side, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	if st2, _ := os.Stat(side); st2.Size() != st.Size() || !st2.ModTime().Equal(st.ModTime()) {
		t.Fatal("the rewrite changed size or mtime")
	}
	if got := served(s); got != "host" {
		t.Errorf("a binary rewritten after its check: served by the %s", got)
	}
	// A fresh host (another process: the cache file only) sees the same.
	hashCaches.Delete(data)
	if got := served(sidecarOf(self, "git", data)); got != "host" {
		t.Errorf("a binary rewritten after its check, new host: served by the %s", got)
	}
	if err := os.Remove(side); err != nil {
		t.Fatal(err)
	}
	if got := served(s); got != "host" {
		t.Errorf("no binary beside the host: served by the %s", got)
	}
}

// The host runs the control built-in from its own binary, which the
// switchboard binary pins (as make build links it), inside its sandbox;
// the other built-ins from the host's binary. A plugin planted under the
// control built-in's binary name (a working plugin: hello) never runs.
func TestBuiltinRunsFromItsOwnBinary(t *testing.T) {
	bins := fixtures.Build(t)
	pinSidecars(t, "switchboard="+sha256Of(t, bins.Control))
	exes := func(self string) map[string][]string {
		t.Helper()
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, "project"), 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := writeConfig(t, dir, "project_dir = \"project\"\ndata_dir = \"state\"\nbuiltin \"git\" {}\n")
		h, err := Start(t.Context(), cfg, Options{Self: self, Logger: hclog.NewNullLogger(), WaitAll: true})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		defer func() {
			if err := h.Registry().Shutdown(context.Background(), time.Second); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		}()
		if _, err := h.Registry().Call(t.Context(), "switchboard.servers", []byte(`{}`), nil); err != nil {
			t.Fatalf("the control built-in does not answer: %v", err)
		}
		out := map[string][]string{}
		for _, e := range h.Registry().Entries() {
			p, ok := e.Server.(registry.Process)
			if !ok || p.PID() == 0 {
				continue
			}
			for _, pid := range append([]int{p.PID()}, fixtures.Descendants(p.PID())...) {
				if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil {
					out[e.Server.Name()] = append(out[e.Server.Name()], exe)
				}
			}
		}
		return out
	}
	got := exes(bins.Switchboard)
	if !slices.Contains(got["switchboard"], bins.Control) {
		t.Errorf("the control built-in runs %v, want its own binary %s", got["switchboard"], bins.Control)
	}
	if !slices.Contains(got["git"], bins.Switchboard) {
		t.Errorf("git (no binary of its own beside the host) runs %v, want %s", got["git"], bins.Switchboard)
	}
	if r := (&sandbox.Sandbox{Helper: bins.Sandbox, Policy: sandbox.Policy{Mode: sandbox.ModeRequired}}).Report(); r.Namespaces && !slices.Contains(got["switchboard"], bins.Sandbox) {
		t.Errorf("the control built-in's own binary runs outside its sandbox: %v", got["switchboard"])
	}

	// Planted: the host beside a hello plugin named as the control built-in.
	dir := t.TempDir()
	self := filepath.Join(dir, "switchboard")
	copyFile(t, bins.Switchboard, self, 0o755)
	copyFile(t, bins.Sandbox, filepath.Join(dir, HelperBinary), 0o755)
	planted := filepath.Join(dir, builtins.BinaryPrefix+"switchboard")
	copyFile(t, bins.Hello, planted, 0o755)
	got = exes(self)
	if slices.Contains(got["switchboard"], planted) {
		t.Errorf("the planted binary ran as the control built-in: %v", got["switchboard"])
	}
	if !slices.Contains(got["switchboard"], self) {
		t.Errorf("the control built-in runs %v, want the host's binary %s", got["switchboard"], self)
	}
}

// A built-in's own binary is read-only in every sandbox, like the host's:
// bash, which may write the project, cannot replace it when the binaries
// sit in the project (make run's layout). The control writes it unconfined.
func TestSidecarReadOnlyInSandboxes(t *testing.T) {
	bins := fixtures.Build(t)
	if r := (&sandbox.Sandbox{Helper: bins.Sandbox, Policy: sandbox.Policy{Mode: sandbox.ModeRequired}}).Report(); r.Landlock == 0 && !r.Namespaces {
		t.Skipf("nothing confines here: %s", r)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	self := filepath.Join(bin, "switchboard")
	copyFile(t, bins.Switchboard, self, 0o755)
	copyFile(t, bins.Sandbox, filepath.Join(bin, HelperBinary), 0o755)
	side := filepath.Join(bin, builtins.BinaryPrefix+"switchboard")
	copyFile(t, bins.Control, side, 0o755)
	pinSidecars(t, "switchboard="+sha256Of(t, side))
	cfg := writeConfig(t, dir, fmt.Sprintf("project_dir = \".\"\ndata_dir = %q\nbuiltin \"bash\" {}\n", t.TempDir()))
	sb := confinement(cfg, hostFilesOf(cfg), registry.KindBuiltin, "bash", config.Sandbox{}, nil, filepath.Join(cfg.DataDir, "bash"), self)
	sb.TempRoot = t.TempDir()
	const script = `echo planted > "$1" 2>/dev/null; cat "$1" | head -c 8`
	if out := shIn(t, sb, true, script, side); strings.Contains(out, "planted") {
		t.Errorf("confined bash replaced the built-in's binary: %q", out)
	}
	if sha256Of(t, side) != builtins.Pin("switchboard") {
		t.Error("the built-in's binary changed under confined bash")
	}
	if out := shIn(t, sb, false, script, side); !strings.Contains(out, "planted") {
		t.Errorf("control (unconfined) did not replace it: %q", out)
	}
}

package loader

import (
	"context"
	"fmt"
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

// pinBuiltins sets this process's pin of switchboard-builtins
// (builtins.ServeBinaryPin, which make build sets at link time) for the
// test.
// pinHelper sets the helper's pin (HelperPin) for the test.
func pinHelper(t *testing.T, pin string) {
	t.Helper()
	old := helperPin.Load()
	helperPin.Store(&pin)
	t.Cleanup(func() { helperPin.Store(old) })
}

func pinBuiltins(t *testing.T, pin string) {
	t.Helper()
	old := builtins.ServeBinaryPin
	builtins.ServeBinaryPin = pin
	t.Cleanup(func() { builtins.ServeBinaryPin = old })
}

func sha256Of(t *testing.T, path string) string {
	t.Helper()
	sum, err := launcher.FileSHA256(path)
	if err != nil {
		t.Fatal(err)
	}
	return sum
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

// Built-ins are served through switchboard-builtins only when that file
// is the one the host pins; anything else there (another build, a file a
// plugin planted, one rewritten after it was checked while keeping its
// size and mtime) is not run, and the host re-executes itself.
func TestBuiltinBinaryRunsOnlyWhenPinned(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "switchboard")
	bin := filepath.Join(dir, builtins.ServeBinary)
	for _, f := range []string{self, bin} {
		if err := os.WriteFile(f, []byte("built "+f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pin := sha256Of(t, bin)
	spec := launcher.Spec{Name: "git", Path: self, Args: []string{builtins.ServeCommand, "git"}}
	log := hclog.NewNullLogger()
	served := func(s *builtinBinary) string {
		t.Helper()
		got := s.apply(spec, log)
		if got.Path == self {
			if !slices.Equal(got.Args, spec.Args) || got.SHA256 != "" {
				t.Fatalf("served by the host with %v, sha256 %q", got.Args, got.SHA256)
			}
			return "host"
		}
		if got.Path != bin || !slices.Equal(got.Args, []string{"git"}) || got.SHA256 != pin || got.Hasher == nil {
			t.Fatalf("built-ins' binary spec = %s %v sha256 %q hasher %v", got.Path, got.Args, got.SHA256, got.Hasher != nil)
		}
		return "switchboard-builtins"
	}

	pinBuiltins(t, "")
	if s := builtinBinaryOf(self, t.TempDir()); s != nil {
		t.Fatalf("a host that pins nothing runs %s", s.path)
	}
	pinBuiltins(t, pin)
	data := t.TempDir()
	s := builtinBinaryOf(self, data)
	if got := served(s); got != "switchboard-builtins" {
		t.Fatalf("the pinned binary: served by the %s", got)
	}
	if _, err := os.Stat(filepath.Join(data, HashesFile)); err != nil {
		t.Errorf("the hash is not cached: %v", err)
	}
	if got := served(s); got != "switchboard-builtins" {
		t.Errorf("the pinned binary, hash cached: served by the %s", got)
	}

	// Made not executable (a tool that reached its mode): the host serves
	// the built-ins itself rather than fail every start.
	if err := os.Chmod(bin, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := served(s); got != "host" {
		t.Errorf("the pinned binary, not executable: served by the %s", got)
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := served(s); got != "switchboard-builtins" {
		t.Errorf("the pinned binary, executable again: served by the %s", got)
	}

	// Rewritten in place, same size, mtime set back: the cached hash must
	// not vouch for it (its ctime changed).
	st, _ := os.Stat(bin)
	if err := os.WriteFile(bin, []byte(strings.Replace("built "+bin, "built", "evil!", 1)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(bin, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	if st2, _ := os.Stat(bin); st2.Size() != st.Size() || !st2.ModTime().Equal(st.ModTime()) {
		t.Fatal("the rewrite changed size or mtime")
	}
	if got := served(s); got != "host" {
		t.Errorf("a binary rewritten after its check: served by the %s", got)
	}
	// A fresh host (another process: the cache file only) sees the same.
	hashCaches.Delete(data)
	if got := served(builtinBinaryOf(self, data)); got != "host" {
		t.Errorf("a binary rewritten after its check, new host: served by the %s", got)
	}
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	if got := served(s); got != "host" {
		t.Errorf("no binary beside the host: served by the %s", got)
	}
}

// A host pinned as make build pins it serves built-ins through
// switchboard-builtins, inside their sandboxes; without it beside, by
// re-executing itself; and a plugin planted under its name (a working
// plugin: hello) never runs.
func TestBuiltinsServedByTheirBinary(t *testing.T) {
	bins := fixtures.Build(t)
	pinBuiltins(t, sha256Of(t, bins.Builtins))
	// The helper too, as make build pins it (HelperPin): this test
	// binary's loader is the host's.
	pinHelper(t, sha256Of(t, bins.Sandbox))
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
				if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil {
					out["comm"] = append(out["comm"], strings.TrimSpace(string(comm)))
				}
			}
		}
		return out
	}
	got := exes(bins.Switchboard)
	for _, name := range []string{"switchboard", "git"} {
		if !slices.Contains(got[name], bins.Builtins) {
			t.Errorf("%s runs %v, want %s", name, got[name], bins.Builtins)
		}
	}
	if r := (&sandbox.Sandbox{Helper: bins.Sandbox, Policy: sandbox.Policy{Mode: sandbox.ModeRequired}}).Report(); r.Namespaces && !slices.Contains(got["git"], bins.Sandbox) {
		t.Errorf("git runs outside its sandbox: %v", got["git"])
	}
	// Executed through the descriptor that was hashed, the process is
	// named after its binary all the same, not "3".
	if !slices.Contains(got["comm"], builtins.ServeBinary[:15]) || slices.Contains(got["comm"], "3") {
		t.Errorf("process names %v, want %s for the built-ins (and no \"3\")", got["comm"], builtins.ServeBinary[:15])
	}

	self := fixtures.Unpinned(t)
	got = exes(self)
	if !slices.Contains(got["git"], self) {
		t.Errorf("without switchboard-builtins beside the host, git runs %v, want the host's binary %s", got["git"], self)
	}

	// Planted: a hello plugin under the built-ins' binary's name.
	planted := filepath.Join(filepath.Dir(self), builtins.ServeBinary)
	copyFile(t, bins.Hello, planted, 0o755)
	got = exes(self)
	for _, name := range []string{"switchboard", "git"} {
		if slices.Contains(got[name], planted) {
			t.Errorf("the planted binary ran as %s: %v", name, got[name])
		}
		if !slices.Contains(got[name], self) {
			t.Errorf("%s runs %v, want the host's binary %s", name, got[name], self)
		}
	}
}

// switchboard-builtins is read-only in every sandbox, like the host's
// binary: bash, which may write the project, cannot replace it when the
// binaries sit in the project (make run's layout). The control writes it
// unconfined.
func TestBuiltinBinaryReadOnlyInSandboxes(t *testing.T) {
	bins := fixtures.Build(t)
	if r := (&sandbox.Sandbox{Helper: bins.Switchboard, Policy: sandbox.Policy{Mode: sandbox.ModeRequired}}).Report(); r.Landlock == 0 && !r.Namespaces {
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
	served := filepath.Join(bin, builtins.ServeBinary)
	copyFile(t, bins.Builtins, served, 0o755)
	pinBuiltins(t, sha256Of(t, served))
	cfg := writeConfig(t, dir, fmt.Sprintf("project_dir = \".\"\ndata_dir = %q\nbuiltin \"bash\" {}\n", t.TempDir()))
	sb := confinement(cfg, hostFilesOf(cfg), registry.KindBuiltin, "bash", config.Sandbox{}, nil, filepath.Join(cfg.DataDir, "bash"), self)
	sb.TempRoot = t.TempDir()
	const script = `echo planted > "$1" 2>/dev/null; cat "$1" | head -c 8`
	if out := shIn(t, sb, true, script, served); strings.Contains(out, "planted") {
		t.Errorf("confined bash replaced the built-ins' binary: %q", out)
	}
	if sha256Of(t, served) != builtins.ServeBinaryPin {
		t.Error("the built-ins' binary changed under confined bash")
	}
	if out := shIn(t, sb, false, script, served); !strings.Contains(out, "planted") {
		t.Errorf("control (unconfined) did not replace it: %q", out)
	}
}

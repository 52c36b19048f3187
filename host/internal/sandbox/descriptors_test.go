//go:build linux

package sandbox_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/switchboard-mcp/switchboard/host/internal/sandbox"
	"github.com/switchboard-mcp/switchboard/internal/fixtures"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
)

// A pinned binary is executed through the descriptor its host hashed. That
// descriptor leads to the real file past the sandbox's read-only mount, so
// a command the plugin starts could change the binary's mode (and, once
// it no longer runs, its bytes) through /proc/self/fd/3 (red team round
// 6); and any descriptor the host inherited without close-on-exec would
// reach the sandbox the same way. The test starts a pinned shell as the
// launcher does, in a folder the policy may write with the binary
// read-only (the layout after make run), and has it and a command it
// starts change the binary's mode through the descriptor and look for the
// host's stray descriptor. Confined, neither works; unconfined (the
// control), both do.
func TestPinnedDescriptorStaysOutOfTheSandbox(t *testing.T) {
	bins := fixtures.Build(t)
	if r := (&sandbox.Sandbox{Helper: bins.Sandbox, Policy: sandbox.Policy{Mode: sandbox.ModeRequired}}).Report(); !r.Namespaces {
		t.Skipf("no namespaces here: %s", r)
	}
	dir := t.TempDir()
	shell := filepath.Join(dir, "sh")
	copyExecutable(t, "/bin/sh", shell)
	// A descriptor of the host's without close-on-exec, as a host started
	// by a careless parent has.
	stray, err := syscall.Open(filepath.Join(dir, "stray"), syscall.O_CREAT|syscall.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Close(stray) }()
	const script = `chmod 0600 /proc/self/fd/3 2>/dev/null; sh -c 'chmod 0700 /proc/self/fd/3' 2>/dev/null; test -e /proc/self/fd/$1 && echo STRAY; echo ran`
	run := func(confined bool) (mode os.FileMode, out string) {
		t.Helper()
		if err := os.Chmod(shell, 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(shell)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(launcher.PinnedExecPath, "-c", script, "sh", strconv.Itoa(stray))
		cmd.Args[0] = shell
		cmd.ExtraFiles = []*os.File{f}
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		var conf launcher.Confinement
		if confined {
			sb := &sandbox.Sandbox{
				Name: "sh", Helper: bins.Sandbox, TempRoot: t.TempDir(),
				Policy: sandbox.Policy{Mode: sandbox.ModeRequired, Write: []string{dir}, ReadOnly: []string{shell}}.Clean(dir),
			}
			var err error
			if conf, err = sb.Wrap(cmd, ""); err != nil {
				t.Fatalf("Wrap: %v", err)
			}
			defer conf.Stopped()
		}
		b, err := fixtures.RunConfined(conf, cmd)
		_ = f.Close()
		if err != nil || !strings.Contains(string(b), "ran") {
			t.Fatalf("the pinned shell did not run (confined %v): %v\n%s", confined, err, b)
		}
		st, err := os.Stat(shell)
		if err != nil {
			t.Fatal(err)
		}
		return st.Mode().Perm(), string(b)
	}
	if mode, out := run(false); mode == 0o755 || !strings.Contains(out, "STRAY") {
		t.Fatalf("control (unconfined): mode %v, output %q; want the mode changed and the stray descriptor seen", mode, out)
	}
	if mode, out := run(true); mode != 0o755 || strings.Contains(out, "STRAY") {
		t.Errorf("confined: the binary's mode is %v (want 0755 kept), output %q (want no stray descriptor)", mode, out)
	}
}

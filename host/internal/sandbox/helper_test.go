//go:build linux

package sandbox_test

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/switchboard-mcp/switchboard/host/internal/sandbox"
	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

// envAsUser tells the test binary, run again as another user, to start one
// confined shell from the folder it names and print what the shell sees.
const envAsUser = "SWITCHBOARD_TEST_SANDBOX_AS_USER"

// A host run by an ordinary user confines its plugins too. The helper
// starts as that user in its new user namespace, where an exec drops every
// capability unless they are ambient: without them its first mount failed
// ("making / private: operation not permitted") and no confined plugin
// could start. As root, the test runs itself again as nobody; as an
// ordinary user, the other tests here are that case already.
func TestHostThatIsNotRootConfines(t *testing.T) {
	if dir := os.Getenv(envAsUser); dir != "" {
		confinedShell(t, dir)
		return
	}
	if os.Getuid() != 0 {
		t.Skip("not root: every other test here runs the sandbox as an ordinary user")
	}
	bins := fixtures.Build(t)
	dir, err := os.MkdirTemp("", "switchboard-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // nobody must reach the copies
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work") // nobody's own
	if err := os.Mkdir(work, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(work, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	copyExecutable(t, self, filepath.Join(dir, "sandbox.test"))
	copyExecutable(t, bins.Sandbox, filepath.Join(dir, "switchboard-sandbox"))
	run := func(confined bool) string {
		cmd := exec.Command(filepath.Join(dir, "sandbox.test"), "-test.run=^TestHostThatIsNotRootConfines$", "-test.count=1", "-test.v")
		cmd.Dir = work
		cmd.Env = []string{envAsUser + "=" + dir, "PATH=/usr/bin:/bin", "HOME=" + work, "TMPDIR=" + work}
		if !confined {
			cmd.Env = append(cmd.Env, "SWITCHBOARD_TEST_SANDBOX_OFF=1")
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the test as nobody (confined %v): %v\n%s", confined, err, out)
		}
		return string(out)
	}
	// The control: unconfined, the shell's PID 1 is the machine's init.
	if out := run(false); !strings.Contains(out, "uid=65534") || strings.Contains(out, "init=switchboard-san") {
		t.Fatalf("unconfined as nobody, the shell printed %q", out)
	}
	out := run(true)
	if !strings.Contains(out, "init=switchboard-san uid=65534") {
		t.Errorf("confined by a host that is not root, the shell's PID 1 is not the sandbox's helper: %q", out)
	}
	noCapabilities(t, out)
	// The same shell confined by this host, which is root.
	if out := confinedShellOutput(t, t.TempDir(), bins.Sandbox); !strings.Contains(out, "init=switchboard-san uid=0") {
		t.Errorf("confined by a root host, the shell's PID 1 is not the sandbox's helper: %q", out)
	} else {
		noCapabilities(t, out)
	}
}

// noCapabilities fails unless every capability set in out (the Cap lines
// of /proc/self/status) is empty.
func noCapabilities(t *testing.T, out string) {
	t.Helper()
	n := 0
	for _, line := range strings.Split(out, "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "Cap") {
			continue
		}
		n++
		if strings.TrimSpace(value) != "0000000000000000" {
			t.Errorf("the confined shell has capabilities: %s", line)
		}
	}
	if n != 5 {
		t.Errorf("want the five capability sets of the confined shell, got %d: %q", n, out)
	}
}

// confinedShell is the part run as another user: one shell, confined
// unless told otherwise, whose output goes to this test's output.
func confinedShell(t *testing.T, dir string) {
	work := filepath.Join(dir, "work")
	if os.Getenv("SWITCHBOARD_TEST_SANDBOX_OFF") != "" {
		out, err := exec.Command("/bin/sh", "-c", shellProbe).CombinedOutput()
		fmt.Printf("shell: %s\n", out)
		if err != nil {
			t.Fatalf("the shell: %v", err)
		}
		return
	}
	fmt.Printf("shell: %s\n", confinedShellOutput(t, work, filepath.Join(dir, "switchboard-sandbox")))
}

// shellProbe prints the shell's PID 1, its user and its capability sets.
const shellProbe = `echo "init=$(cat /proc/1/comm) uid=$(id -u)"; grep ^Cap /proc/self/status`

// confinedShellOutput runs shellProbe confined to work by helper.
func confinedShellOutput(t *testing.T, work, helper string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", shellProbe)
	cmd.Dir = work
	sb := &sandbox.Sandbox{
		Name: "sh", Helper: helper, TempRoot: work,
		Policy: sandbox.Policy{Mode: sandbox.ModeRequired, Write: []string{work}}.Clean(work),
	}
	conf, err := sb.Wrap(cmd, "")
	if err != nil {
		t.Fatalf("Wrap: %v", err)
	}
	defer conf.Stopped()
	out, err := fixtures.RunConfined(conf, cmd)
	if err != nil {
		t.Fatalf("the confined shell: %v\n%s", err, out)
	}
	return string(out)
}

func copyExecutable(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = src.Close() }()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755) // run by nobody
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// The helper runs with GOMAXPROCS=1; the plugin gets the value its own
// environment had, or none.
func TestHelperSettingsStayOutOfThePluginsEnvironment(t *testing.T) {
	bins := fixtures.Build(t)
	for _, tc := range []struct{ env, want string }{
		{"", "gomaxprocs=unset"},
		{"GOMAXPROCS=3", "gomaxprocs=3"},
	} {
		cmd := exec.Command("/bin/sh", "-c", `echo "gomaxprocs=${GOMAXPROCS-unset}"`)
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		if tc.env != "" {
			cmd.Env = append(cmd.Env, tc.env)
		}
		work := t.TempDir()
		sb := &sandbox.Sandbox{
			Name: "sh", Helper: bins.Sandbox, TempRoot: work,
			Policy: sandbox.Policy{Mode: sandbox.ModeRequired, Write: []string{work}}.Clean(work),
		}
		conf, err := sb.Wrap(cmd, "")
		if err != nil {
			t.Fatalf("Wrap: %v", err)
		}
		if !slices.Contains(cmd.Env, "GOMAXPROCS=1") {
			t.Errorf("the helper's environment has no GOMAXPROCS=1: %q", cmd.Env)
		}
		out, err := fixtures.RunConfined(conf, cmd)
		conf.Stopped()
		if err != nil {
			t.Fatalf("the confined shell: %v\n%s", err, out)
		}
		if got := strings.TrimSpace(string(out)); got != tc.want {
			t.Errorf("with %q in the plugin's environment, the plugin sees %q, want %q", tc.env, got, tc.want)
		}
	}
}

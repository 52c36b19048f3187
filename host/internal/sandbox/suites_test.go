//go:build linux

package sandbox_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/host/internal/builtins"
	"github.com/switchboard-mcp/switchboard/host/internal/sandbox"
	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

// TestBuiltinSuitesPassInsideTheirSandboxes runs each built-in's own test
// suite (compiled with go test -c) inside the sandbox that built-in gets
// by default: the suites create their projects under TMPDIR, which is the
// sandbox's private temp folder, and the rest of the machine is as the
// plugin sees it (system dirs read-only, the network only for web, git
// running nothing but git).
func TestBuiltinSuitesPassInsideTheirSandboxes(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles and runs four test suites")
	}
	bins := fixtures.Build(t)
	dir := t.TempDir()
	// The bash suite builds the plugin with go: it reads the toolchain's
	// module cache and writes its build cache.
	goenv, err := exec.Command("go", "env", "GOMODCACHE", "GOCACHE", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	gopaths := strings.Fields(string(goenv))
	if len(gopaths) != 3 {
		t.Fatalf("go env = %q", goenv)
	}
	root := fixtures.RepoRoot()
	for _, b := range builtins.All() {
		name := b.Name
		t.Run(name, func(t *testing.T) {
			bin := filepath.Join(dir, name+".test")
			build := exec.Command("go", "test", "-c", "-o", bin, "./plugins/"+name)
			build.Dir = fixtures.RepoRoot()
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go test -c ./plugins/%s: %v\n%s", name, err, out)
			}
			g := b.Grants(root, nil)
			pol := sandbox.Policy{
				Mode: sandbox.ModeRequired, Network: g.Network,
				Read:  []string{root, gopaths[0], gopaths[2]},
				Write: []string{gopaths[1]},
				Env:   map[string]string{"GOMODCACHE": gopaths[0], "GOCACHE": gopaths[1], "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"},
			}.Clean("/root")
			runSuite(t, bins.Sandbox, name, name, bin, pol)
			if g.ExecOnly {
				// git's sandbox runs git alone. The suite's set-up of
				// submodules runs git submodule, a shell script of git's
				// that runs sed and the rest, and one test lets a shell
				// hook run (with allow_hooks the sandbox is not ExecOnly):
				// those run in the sandbox above; the rest run again here
				// with nothing to execute but git.
				pol.ExecOnly, pol.Exec = true, g.Exec
				runSuite(t, bins.Sandbox, name+" (executing git alone)", name, bin, pol,
					"-test.skip=^(TestOptInHooks|TestGuardKeyFamilies|TestGuardCredentialHelper|TestGuardOptIns|TestGuardNoticesChanges)$")
			}
		})
	}
}

// runSuite runs plugin's compiled test suite bin inside a sandbox with
// pol; name says which run it is.
func runSuite(t *testing.T, helper, name, plugin, bin string, pol sandbox.Policy, args ...string) {
	t.Helper()
	root := fixtures.RepoRoot()
	sb := &sandbox.Sandbox{Name: plugin + "-suite", Policy: pol, Helper: helper}
	cmd := exec.Command(bin, append([]string{"-test.count=1", "-test.timeout=5m"}, args...)...)
	cmd.Dir = filepath.Join(root, "plugins", plugin) // testdata, and ./cmd for the bash suite's build
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8"}
	conf, err := sb.Wrap(cmd, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out, err := fixtures.RunConfined(conf, cmd)
	if conf != nil {
		conf.Stopped()
	}
	if err != nil {
		t.Fatalf("the %s suite failed inside its sandbox: %v\n%s", name, err, out)
	}
	if !strings.Contains(string(out), "PASS") {
		t.Fatalf("the %s suite printed no PASS:\n%s", name, string(out))
	}
}

//go:build linux

package sandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/host/internal/sandbox"
	"github.com/switchboard-mcp/switchboard/host/internal/sandboxinit"
	"github.com/switchboard-mcp/switchboard/internal/fixtures"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
)

// parentOf is the parent of process pid.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	ppid := fixtures.ParentOf(pid)
	if ppid == 0 {
		t.Fatalf("process %d is gone", pid)
	}
	return ppid
}

// socketsOf lists the sockets among a process's descriptors.
func socketsOf(t *testing.T, pid int) []string {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && strings.HasPrefix(l, "socket:") {
			out = append(out, e.Name()+" -> "+l)
		}
	}
	return out
}

// A confined plugin's helper is started by the spawner, a process of the
// host's own (the host never forks itself into new namespaces); the
// spawner's socket reaches no helper; and when the spawner dies its
// helpers and their plugins die with it, the host hears of it, and the
// next start has a new spawner.
func TestSpawnerStartsHelpersAndTakesThemAlong(t *testing.T) {
	w := newWorld(t)
	pol := w.policy()
	p := launch(t, w, &pol)
	helper := p.PID()
	spawner := parentOf(t, helper)
	if spawner == os.Getpid() {
		t.Fatalf("the helper %d is the host's own child: no spawner started it", helper)
	}
	// The spawner's working half, in a user namespace of its own, and its
	// first half, the host's child, which started it there.
	outer := parentOf(t, spawner)
	if parentOf(t, outer) != os.Getpid() {
		t.Fatalf("the helper's parent %d is not the child of the host's child", spawner)
	}
	for _, pid := range []int{spawner, outer} {
		if cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); !strings.Contains(string(cmdline), "switchboard-sandbox") {
			t.Fatalf("the spawner's process %d is not the sandbox helper binary (command line %q)", pid, cmdline)
		}
		// (Its environment says spawner mode, but the working half is not
		// dumpable: only a root test can read it.)
		if env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ"); err == nil && !strings.Contains(string(env), "SWITCHBOARD_SANDBOX=spawner") {
			t.Fatalf("the spawner's process %d is not in spawner mode (environment %q)", pid, env)
		}
	}
	// Helpers start inside the spawner's user namespace, not the host's:
	// no start forks into a new user namespace (sandboxinit.EnvSpawnerIDs).
	userNS := func(pid int) string {
		l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/user")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if host, sp, h := userNS(os.Getpid()), userNS(spawner), userNS(helper); sp == host || h != sp || userNS(outer) != host {
		t.Errorf("user namespaces: host %s, spawner's first half %s, working half %s, helper %s; want the working half's own, shared with the helper", host, userNS(outer), sp, h)
	}
	if s := socketsOf(t, helper); len(s) > 0 {
		t.Errorf("the helper holds sockets: %v", s)
	}
	// The plugin's own gRPC listener is a socket of its own making; a
	// command it starts inherits none.
	if out := attack(t, p, jsonArgs("op", "sh", "cmd", "echo sockets=$(ls -l /proc/self/fd/ | grep -c socket:)")); !strings.Contains(out, "sockets=0") {
		t.Errorf("a command in the sandbox holds sockets: %q", out)
	}

	// A second plugin shares the spawner.
	q := launch(t, w, &pol)
	if got := parentOf(t, q.PID()); got != spawner {
		t.Errorf("the second helper's parent is %d, want the spawner %d", got, spawner)
	}

	inside := append(fixtures.Descendants(helper), helper)
	fixtures.Kill([]int{spawner})
	if alive := fixtures.WaitGone(inside, 5*time.Second); len(alive) > 0 {
		t.Fatalf("processes of the sandbox outlived the spawner: %v", alive)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the host did not hear that the plugin ended with the spawner")
	}

	// The next start has a spawner again.
	r := launch(t, w, &pol)
	if out := attack(t, r, jsonArgs("op", "sh", "cmd", "echo alive")); !strings.Contains(out, "alive") {
		t.Fatalf("a plugin started after the spawner died: %q", out)
	}
	newOuter := parentOf(t, parentOf(t, r.PID()))
	if got := parentOf(t, newOuter); got != os.Getpid() {
		t.Fatalf("the new spawner's first half's parent is %d, want the host", got)
	}
	// Its first half's end (the process the host started) takes the
	// working half, the helpers and their plugins along too.
	inside = append(fixtures.Descendants(newOuter), newOuter)
	fixtures.Kill([]int{newOuter})
	if alive := fixtures.WaitGone(inside, 5*time.Second); len(alive) > 0 {
		t.Fatalf("processes of the sandbox outlived the spawner's first half: %v", alive)
	}
	select {
	case <-r.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the host did not hear that the plugin ended with the spawner's first half")
	}
}

// A server's env block cannot replace the sandbox's instructions, and its
// values reach the server as they do unconfined (the last of a name wins,
// as exec.Cmd passes an environment). Red team: through the spawner a
// configured SWITCHBOARD_SANDBOX won over the host's and a plugin ran
// without Landlock, writing outside its folders; a configured LANG or
// PATH was silently replaced by the host's.
func TestEnvBlockCannotReplaceTheSandbox(t *testing.T) {
	w := newWorld(t)
	bins := fixtures.Build(t)
	outside := t.TempDir()
	escaped := filepath.Join(outside, "escaped")
	permissive := sandboxinit.Spec{
		Path: bins.TestPlugin, Args: []string{bins.TestPlugin}, Binary: bins.TestPlugin,
		Namespaces: false, Landlock: false, Network: true, Write: []string{"/"},
	}.Encode()
	pol := w.policy()
	spec := launcher.Spec{
		Name: "fx", Path: bins.TestPlugin, ProjectDir: w.project, DataDir: t.TempDir(),
		Env:     map[string]string{"SWITCHBOARD_SANDBOX": permissive, "LANG": "fr_FR.UTF-8"},
		Sandbox: &sandbox.Sandbox{Name: "fx", Policy: pol, Helper: bins.Sandbox},
	}
	p, err := launcher.Launch(t.Context(), spec, hclog.NewNullLogger())
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	out := attack(t, p, jsonArgs("op", "sh", "cmd", "touch "+escaped+" 2>&1; echo lang=$LANG"))
	if _, err := os.Stat(escaped); err == nil {
		t.Fatalf("a configured SWITCHBOARD_SANDBOX replaced the sandbox: the plugin wrote %s (%q)", escaped, out)
	}
	if !strings.Contains(out, "lang=fr_FR.UTF-8") {
		t.Errorf("the configured LANG did not reach the confined plugin: %q", out)
	}
	// The control: the same write from an unconfined plugin lands.
	open := launch(t, w, nil)
	attack(t, open, jsonArgs("op", "sh", "cmd", "touch "+escaped))
	if _, err := os.Stat(escaped); err != nil {
		t.Errorf("control: an unconfined plugin could not write %s either, so the test proves nothing", escaped)
	}
}

// LastWins keeps one entry a name, the last, in the order of the kept
// entries (as exec.Cmd does).
func TestSpawnerEnvironmentLastWins(t *testing.T) {
	got := sandbox.LastWinsForTest([]string{"A=1", "B=2", "A=3", "C", "B=4"})
	if want := []string{"A=3", "C", "B=4"}; !slices.Equal(got, want) {
		t.Errorf("LastWins = %q, want %q", got, want)
	}
}

// A start the spawner cannot carry (an environment past its limit) fails
// with an error that says what to change, and leaves nothing open.
func TestSpawnerRefusesAnOversizedStart(t *testing.T) {
	w := newWorld(t)
	bins := fixtures.Build(t)
	pol := w.policy()
	fds := func() int {
		entries, _ := os.ReadDir("/proc/self/fd")
		return len(entries)
	}
	before := fds()
	spec := launcher.Spec{
		Name: "fx", Path: bins.TestPlugin, ProjectDir: w.project, DataDir: t.TempDir(),
		Env:     map[string]string{"HUGE": strings.Repeat("x", 512<<10)},
		Sandbox: &sandbox.Sandbox{Name: "fx", Policy: pol, Helper: bins.Sandbox},
	}
	p, err := launcher.Launch(t.Context(), spec, hclog.NewNullLogger())
	if err == nil {
		_ = p.Close(context.Background())
		t.Fatal("a start with a 512 KiB environment was made")
	}
	if !strings.Contains(err.Error(), "env block smaller") {
		t.Errorf("error = %v, want it to say to keep the env block smaller", err)
	}
	if after := fds(); after > before+2 { // the spawner's socket, a /dev/null at most
		t.Errorf("%d descriptors open before the failed start, %d after", before, after)
	}
}

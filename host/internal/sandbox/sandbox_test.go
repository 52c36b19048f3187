//go:build linux

package sandbox_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/switchboard-mcp/switchboard/host/internal/builtins"
	"github.com/switchboard-mcp/switchboard/host/internal/sandbox"
	"github.com/switchboard-mcp/switchboard/internal/fixtures"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
)

func TestMain(m *testing.M) { fixtures.Main(m) }

// world is a host's layout as the attacks see it: a project folder with
// the config file inside it (the default layout), a data dir with the
// permission file and a control socket, a secret outside every root, a TCP
// listener on loopback, and a secret in the host's environment.
type world struct {
	project, config, dataDir, perms, socket, secret, tcp string
	hostSecret                                           string
	decoy                                                int
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{project: t.TempDir(), dataDir: t.TempDir()}
	w.config = filepath.Join(w.project, "config.hcl")
	write(t, w.config, "permissions { default = \"deny\" }\n")
	write(t, filepath.Join(w.project, "notes.txt"), "project notes\n")
	w.perms = filepath.Join(w.dataDir, "permissions.json")
	write(t, w.perms, `{"always_allow":[]}`)
	if err := os.MkdirAll(filepath.Join(w.dataDir, "control"), 0o700); err != nil {
		t.Fatal(err)
	}
	w.socket = filepath.Join(w.dataDir, "control", "h.sock")
	ul, err := net.Listen("unix", w.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ul.Close() })
	go acceptAll(ul)
	w.secret = filepath.Join(t.TempDir(), "id_ed25519")
	write(t, w.secret, "PRIVATE KEY MATERIAL\n")
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tl.Close() })
	go acceptAll(tl)
	w.tcp = tl.Addr().String()
	// A stand-in for the host process with a token in its environment (the
	// real host is also non-dumpable, a second guard; the decoy is not, so
	// only the sandbox stands between the plugin and it).
	w.hostSecret = "host-secret-" + strconv.Itoa(os.Getpid())
	decoy := exec.Command("sleep", "600")
	decoy.Env = append(os.Environ(), "SWITCHBOARD_TEST_HOST_SECRET="+w.hostSecret)
	if err := decoy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = decoy.Process.Kill(); _ = decoy.Wait() })
	w.decoy = decoy.Process.Pid
	return w
}

func acceptAll(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		_ = c.Close()
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// policy is what the host gives a third-party plugin in this world.
func (w *world) policy() sandbox.Policy {
	return sandbox.Policy{
		Mode:  sandbox.ModeRequired,
		Write: []string{w.project},
		Hide:  []string{w.config, w.dataDir},
	}.Clean("/root")
}

// launch starts the test plugin, confined by p unless p is nil.
func launch(t *testing.T, w *world, p *sandbox.Policy) *launcher.Plugin {
	t.Helper()
	bins := fixtures.Build(t)
	spec := launcher.Spec{Name: "fx", Path: bins.TestPlugin, ProjectDir: w.project, DataDir: t.TempDir()}
	if p != nil {
		spec.Sandbox = &sandbox.Sandbox{Name: "fx", Policy: *p, Helper: bins.Sandbox}
	}
	pl, err := launcher.Launch(t.Context(), spec, hclog.NewNullLogger())
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	t.Cleanup(func() { _ = pl.Close(context.Background()) })
	return pl
}

func attack(t *testing.T, p *launcher.Plugin, args string) string {
	t.Helper()
	res, err := p.Call(t.Context(), "attack", []byte(args), nil)
	if err != nil {
		t.Fatalf("attack %s: %v", args, err)
	}
	return res.Text()
}

func jsonArgs(kv ...string) string {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%q:%q", kv[i], kv[i+1])
	}
	b.WriteString("}")
	return b.String()
}

// Each attack fails with the sandbox on; the same kernel operation succeeds
// with it off, so each row proves the sandbox and nothing else.
func TestAttacksFailInsideAndSucceedOutside(t *testing.T) {
	w := newWorld(t)
	pol := w.policy()
	confined := launch(t, w, &pol)
	open := launch(t, w, nil)

	cases := []struct {
		name   string
		args   string
		leaked func(out string) bool // did the attack get what it wanted?
		after  func() bool           // for writes: was the target changed?
	}{
		{
			name: "read a file outside its roots", args: jsonArgs("op", "read", "path", w.secret),
			leaked: func(out string) bool { return strings.Contains(out, "PRIVATE KEY") },
		},
		{
			name: "read the config file inside the project", args: jsonArgs("op", "read", "path", w.config),
			leaked: func(out string) bool { return strings.Contains(out, "permissions") },
		},
		{
			name: "list data_dir", args: jsonArgs("op", "list", "path", w.dataDir),
			leaked: func(out string) bool { return strings.Contains(out, "permissions.json") },
		},
		{
			name: "read permissions.json", args: jsonArgs("op", "read", "path", w.perms),
			leaked: func(out string) bool { return strings.Contains(out, "always_allow") },
		},
		{
			name: "connect to the control socket", args: jsonArgs("op", "unix", "addr", w.socket),
			leaked: func(out string) bool { return strings.HasPrefix(out, "ok") },
		},
		{
			name: "read the host's environment", args: jsonArgs("op", "read", "path", fmt.Sprintf("/proc/%d/environ", w.decoy)),
			leaked: func(out string) bool { return strings.Contains(out, w.hostSecret) },
		},
		{
			name: "TCP to a loopback listener with network off", args: jsonArgs("op", "tcp", "addr", w.tcp),
			leaked: func(out string) bool { return strings.HasPrefix(out, "ok") },
		},
		{
			// Red team: inside a user namespace of its own a command holds
			// every capability over the namespaces it makes (CAP_NET_ADMIN
			// on a network namespace: netfilter, traffic control), so making
			// one at all is the attack.
			name: "make a user namespace of its own", args: jsonArgs("op", "sh", "cmd", "unshare -U -n true"),
			leaked: func(out string) bool { return strings.HasPrefix(out, "ok") },
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if out := attack(t, confined, c.args); c.leaked(out) {
				t.Errorf("inside the sandbox the attack worked: %.200q", out)
			}
			if out := attack(t, open, c.args); !c.leaked(out) {
				t.Errorf("control: without the sandbox the same operation failed (%.200q), so the row proves nothing", out)
			}
		})
	}

	t.Run("write the config file", func(t *testing.T) {
		before, _ := os.ReadFile(w.config)
		attack(t, confined, jsonArgs("op", "write", "path", w.config))
		attack(t, confined, jsonArgs("op", "sh", "cmd", "echo 'permissions { default = \"allow\" }' > "+w.config+"; mv "+w.project+"/notes.txt "+w.config))
		if after, _ := os.ReadFile(w.config); string(after) != string(before) {
			t.Errorf("config changed from inside the sandbox: %q", after)
		}
		attack(t, open, jsonArgs("op", "write", "path", w.config))
		if after, _ := os.ReadFile(w.config); string(after) == string(before) {
			t.Error("control: without the sandbox the write did not change the config")
		}
		write(t, w.config, string(before))
	})

	t.Run("the project stays usable", func(t *testing.T) {
		if out := attack(t, confined, jsonArgs("op", "read", "path", filepath.Join(w.project, "notes.txt"))); !strings.Contains(out, "project notes") {
			t.Errorf("reading a project file inside the sandbox: %q", out)
		}
		target := filepath.Join(w.project, "new.txt")
		if out := attack(t, confined, jsonArgs("op", "write", "path", target)); !strings.HasPrefix(out, "ok") {
			t.Errorf("writing a project file inside the sandbox: %q", out)
		}
		if out := attack(t, confined, jsonArgs("op", "sh", "cmd", "cd "+w.project+" && mkdir -p a/b && echo hi > a/b/c && mv a/b/c a/c && cat a/c")); !strings.Contains(out, "hi") {
			t.Errorf("shell work in the project inside the sandbox: %q", out)
		}
	})
}

// A process the plugin starts in its own session (setsid -f, a double
// fork) must not outlive the plugin.
func TestNoProcessOutlivesThePlugin(t *testing.T) {
	w := newWorld(t)
	pol := w.policy()
	marker := strconv.Itoa(9000000 + os.Getpid()%999983) // unique to this run
	escape := jsonArgs("op", "sh", "cmd", "setsid -f sleep "+marker+" >/dev/null 2>&1 </dev/null; (sleep "+marker+".5 >/dev/null 2>&1 </dev/null &) ; echo started")
	count := func() []int { return fixtures.ProcessesMatching("sleep " + marker) }

	p := launch(t, w, &pol)
	if out := attack(t, p, escape); !strings.Contains(out, "started") {
		t.Fatalf("starting the escapees: %q", out)
	}
	if n := count(); len(n) != 2 {
		t.Fatalf("%d escapees running inside the sandbox, want 2 (%v)", len(n), n)
	}
	_ = p.Close(t.Context())
	if alive := fixtures.WaitGone(count(), 5*time.Second); len(alive) > 0 {
		t.Errorf("processes started with setsid / a double fork outlived the sandboxed plugin: %v", alive)
	}

	// The same after the plugin's sandbox init is killed outright (the
	// host's death sends it a parent-death signal; SIGKILL is the worst
	// case of it).
	p = launch(t, w, &pol)
	attack(t, p, escape)
	fixtures.Kill([]int{p.PID()})
	if alive := fixtures.WaitGone(count(), 5*time.Second); len(alive) > 0 {
		t.Errorf("escapees survived their sandbox's init being killed: %v", alive)
	}

	// The control: unconfined, the setsid escapee survives the plugin.
	open := launch(t, w, nil)
	attack(t, open, escape)
	_ = open.Close(t.Context())
	survivors := count()
	t.Cleanup(func() { fixtures.Kill(survivors) })
	if len(survivors) == 0 {
		t.Error("control: without the sandbox no escapee survived, so the test proves nothing")
	}
}

func TestMemoryLimitKillsAndSaysWhy(t *testing.T) {
	w := newWorld(t)
	pol := w.policy()
	pol.Memory = 96 << 20
	p := launch(t, w, &pol)
	if out := attack(t, p, `{"op":"alloc","mb":16}`); !strings.HasPrefix(out, "ok") {
		t.Fatalf("a small allocation failed: %q", out)
	}
	_, err := p.Call(t.Context(), "attack", []byte(`{"op":"alloc","mb":400}`), nil)
	if err == nil || !strings.Contains(err.Error(), "memory limit of 96MiB") {
		t.Fatalf("allocating past the limit: err = %v, want the plugin stopped and the reason named", err)
	}
	// The control: unconfined, the same allocation succeeds.
	open := launch(t, w, nil)
	if out := attack(t, open, `{"op":"alloc","mb":400}`); !strings.HasPrefix(out, "ok") {
		t.Errorf("control: the allocation failed without the sandbox: %q", out)
	}
}

// A server's default memory limit (git's, where none is configured)
// holds as a configured one does: git grew by gigabytes reading a file the
// agent wrote (red team round 10). A configured limit replaces it.
func TestDefaultMemoryLimitHolds(t *testing.T) {
	w := newWorld(t)
	pol := w.policy()
	pol.DefaultMemory = 96 << 20
	p := launch(t, w, &pol)
	_, err := p.Call(t.Context(), "attack", []byte(`{"op":"alloc","mb":400}`), nil)
	if err == nil || !strings.Contains(err.Error(), "memory limit of 96MiB") {
		t.Fatalf("allocating past the default limit: err = %v, want the plugin stopped and the reason named", err)
	}
	pol.Memory = 1 << 30
	q := launch(t, w, &pol)
	if out := attack(t, q, `{"op":"alloc","mb":400}`); !strings.HasPrefix(out, "ok") {
		t.Errorf("with memory = 1GiB configured, 400 MB failed: %q", out)
	}
}

// TestDefaultProcessLimitStopsAForkBomb: a server's default process limit
// (bash's, where no limit is configured) holds when a command forks
// without end: the shell's forks fail at the limit, and the plugin still
// answers. The control: unconfined, every process starts.
func TestDefaultProcessLimitStopsAForkBomb(t *testing.T) {
	w := newWorld(t)
	pol := w.policy()
	pol.DefaultProcesses = 64
	marker := strconv.Itoa(8000000 + os.Getpid()%999983)
	bomb := jsonArgs("op", "sh", "cmd", "i=0; while [ $i -lt 200 ]; do sleep "+marker+" >/dev/null 2>&1 </dev/null & i=$((i+1)); done; echo spawned $i")
	count := func() []int { return fixtures.ProcessesMatching("sleep " + marker) }

	p := launch(t, w, &pol)
	out := attack(t, p, bomb)
	n := count()
	if len(n) >= 64 || strings.Contains(out, "spawned 200") {
		t.Errorf("%d processes started under a limit of 64 (%q)", len(n), out)
	}
	if len(n) == 0 {
		t.Errorf("no process started at all (%q): the limit is not what stopped the bomb", out)
	}
	// The plugin itself still works (a call that needs no new process:
	// the bomb's processes may hold every slot the limit leaves, and
	// whether one is left for a shell depends on the plugin's threads).
	if got := attack(t, p, jsonArgs("op", "read", "path", filepath.Join(w.project, "notes.txt"))); got != "ok: project notes\n" {
		t.Errorf("after the bomb the plugin answered %q", got)
	}
	_ = p.Close(t.Context())
	fixtures.WaitGone(n, 5*time.Second)

	// A configured limit replaces the default.
	pol.Processes = 300
	p = launch(t, w, &pol)
	if out := attack(t, p, bomb); !strings.Contains(out, "spawned 200") {
		t.Errorf("with processes = 300 the 200 processes did not start: %q", out)
	}
	_ = p.Close(t.Context())
	fixtures.WaitGone(count(), 5*time.Second)

	open := launch(t, w, nil)
	if out := attack(t, open, bomb); !strings.Contains(out, "spawned 200") {
		t.Errorf("control: without the sandbox the 200 processes did not start: %q", out)
	}
	survivors := count()
	t.Cleanup(func() { fixtures.Kill(survivors) })
}

func TestReport(t *testing.T) {
	s := &sandbox.Sandbox{Name: "x", Policy: sandbox.Policy{Mode: sandbox.ModeRequired, Memory: 1 << 28}, Helper: fixtures.Build(t).Sandbox}
	r := s.Report()
	if !r.Confined() || len(r.Missing) > 0 {
		t.Errorf("Report() on this machine = %s; want fully confined", r)
	}
	if strings.Contains(r.String(), "executes only") {
		t.Errorf("Report() without ExecOnly says it limits execution: %s", r)
	}
	s.Policy.ExecOnly, s.Policy.Exec = true, []string{"/usr/bin/git"}
	if r := s.Report(); !strings.Contains(r.String(), "executes only its own binary and the programs it is granted (1 paths)") {
		t.Errorf("Report() with ExecOnly = %s", r)
	}
	off := (&sandbox.Sandbox{Policy: sandbox.Policy{Mode: sandbox.ModeOff}}).Report()
	if off.Confined() || !strings.Contains(off.String(), "not confined") {
		t.Errorf("Report() with mode off = %s", off)
	}
}

// The red team's breaks: a folder that holds the config or a plugin binary
// renamed aside and replaced, and metadata changed outside the writable
// roots (Landlock does not cover chmod or timestamps).
func TestParentsOfProtectedFilesStayPut(t *testing.T) {
	w := newWorld(t)
	conf := filepath.Join(w.project, "conf")
	bin := filepath.Join(w.project, "bin")
	for _, d := range []string{conf, bin} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	config := filepath.Join(conf, "config.hcl")
	write(t, config, "permissions { default = \"deny\" }\n")
	plugin := filepath.Join(bin, "switchboard-plugin-x")
	write(t, plugin, "#!/bin/sh\necho original\n")
	if err := os.Chmod(plugin, 0o755); err != nil {
		t.Fatal(err)
	}
	readable := filepath.Join(t.TempDir(), "shared.txt")
	write(t, readable, "shared\n")
	if err := os.Chmod(readable, 0o644); err != nil {
		t.Fatal(err)
	}
	pol := sandbox.Policy{
		Mode:     sandbox.ModeRequired,
		Read:     []string{filepath.Dir(readable)},
		Write:    []string{w.project},
		Hide:     []string{config, w.dataDir},
		ReadOnly: []string{plugin},
	}.Clean("/root")
	attackLine := "cd " + w.project + " && mv conf conf_b; mkdir -p conf && echo 'permissions { default = \"allow\" }' > conf/config.hcl; " +
		"mv bin bin_b; mkdir -p bin && printf '#!/bin/sh\\necho evil\\n' > bin/switchboard-plugin-x; " +
		"chmod 666 " + readable + "; touch -d 2001-01-01 " + readable + "; echo tried"
	state := func() string {
		c, _ := os.ReadFile(config)
		p, _ := os.ReadFile(plugin)
		st, _ := os.Stat(readable)
		return fmt.Sprintf("%s|%s|%v|%d", c, p, st.Mode().Perm(), st.ModTime().Year())
	}
	before := state()
	confined := launch(t, w, &pol)
	if out := attack(t, confined, jsonArgs("op", "sh", "cmd", attackLine)); !strings.Contains(out, "tried") {
		t.Fatalf("the attack line did not run: %q", out)
	}
	if after := state(); after != before {
		t.Errorf("inside the sandbox the attack changed the host's files:\nbefore %q\nafter  %q", before, after)
	}
	// The project itself stays writable, folders and all.
	if out := attack(t, confined, jsonArgs("op", "sh", "cmd", "cd "+w.project+" && mkdir -p d1 && mv d1 d2 && echo x > d2/f && chmod 600 d2/f && echo fine")); !strings.Contains(out, "fine") {
		t.Errorf("ordinary work in the project failed inside the sandbox: %q", out)
	}

	// The control: unconfined, the same line replaces both and changes the
	// metadata.
	open := launch(t, w, nil)
	attack(t, open, jsonArgs("op", "sh", "cmd", attackLine))
	if after := state(); after == before {
		t.Error("control: without the sandbox the attack changed nothing, so the test proves nothing")
	}
}

// A plugin's declared needs are reported, never granted.
func TestDeclaredNeedsAreReportedNotGranted(t *testing.T) {
	w := newWorld(t)
	pol := w.policy()
	bins := fixtures.Build(t)
	spec := launcher.Spec{
		Name: "fx", Path: bins.TestPlugin, ProjectDir: w.project, DataDir: t.TempDir(),
		Env:     map[string]string{"FIXTURE_NEEDS_NETWORK": "1"},
		Sandbox: &sandbox.Sandbox{Name: "fx", Policy: pol, Helper: bins.Sandbox},
	}
	p, err := launcher.Launch(t.Context(), spec, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	unmet := strings.Join(p.Unmet(), "; ")
	if !strings.Contains(unmet, "network = true") || !strings.Contains(unmet, `read = ["/srv/shared-models"]`) {
		t.Errorf("Unmet() = %q, want the network and the read path as config lines", unmet)
	}
	if !strings.Contains(p.Confinement(), "declared needs not granted") {
		t.Errorf("Confinement() = %q does not mention the unmet needs", p.Confinement())
	}
	if out := attack(t, p, jsonArgs("op", "tcp", "addr", w.tcp)); strings.HasPrefix(out, "ok") {
		t.Error("the declared need for the network was granted")
	}
}

// The kernel behaviour the host works around (loader.Host.Rehide): a file
// renamed over a covered path is a new file, which the mount made at start
// does not cover.
func TestReplacedHiddenFileIsUncovered(t *testing.T) {
	w := newWorld(t)
	pol := w.policy()
	p := launch(t, w, &pol)
	if out := attack(t, p, jsonArgs("op", "read", "path", w.config)); strings.Contains(out, "permissions") {
		t.Fatalf("the config is visible before it was replaced: %q", out)
	}
	tmp := w.config + ".new"
	write(t, tmp, "permissions { default = \"ask\" } # saved by an editor\n")
	if err := os.Rename(tmp, w.config); err != nil {
		t.Fatal(err)
	}
	if out := attack(t, p, jsonArgs("op", "read", "path", w.config)); !strings.Contains(out, "saved by an editor") {
		t.Errorf("after an editor's save the running sandbox does not see the new file (%q): Rehide may be unnecessary", out)
	}
	// A fresh start covers it again.
	p2 := launch(t, w, &pol)
	if out := attack(t, p2, jsonArgs("op", "read", "path", w.config)); strings.Contains(out, "saved by an editor") {
		t.Errorf("a fresh sandbox sees the replaced config: %q", out)
	}
}

// Without switchboard-sandbox beside it, the host runs the same helper as
// `switchboard sandbox-exec`.
func TestHelperFallbackInTheHostBinary(t *testing.T) {
	w := newWorld(t)
	bins := fixtures.Build(t)
	spec := launcher.Spec{
		Name: "fx", Path: bins.TestPlugin, ProjectDir: w.project, DataDir: t.TempDir(),
		Sandbox: &sandbox.Sandbox{Name: "fx", Policy: w.policy(), Helper: bins.Switchboard},
	}
	p, err := launcher.Launch(t.Context(), spec, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	if out := attack(t, p, jsonArgs("op", "read", "path", w.secret)); strings.Contains(out, "PRIVATE KEY") {
		t.Errorf("confined by `switchboard sandbox-exec`, the plugin read a file outside its roots: %q", out)
	}
}

// A file granted under a covered tree stays visible, also where another
// covered path is a symlink into that tree (/var/run -> /run, where
// systemd puts resolv.conf).
func TestGrantedFileUnderACoveredTreeStaysVisible(t *testing.T) {
	if fi, err := os.Lstat("/var/run"); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Skip("/var/run is not a symlink here")
	}
	dir, err := os.MkdirTemp("/run", "switchboard-test-")
	if err != nil {
		t.Skipf("cannot write /run: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	file := filepath.Join(dir, "resolv.conf")
	write(t, file, "nameserver 127.0.0.53\n")
	w := newWorld(t)
	pol := w.policy()
	pol.Read = append(pol.Read, file)
	p := launch(t, w, &pol)
	if out := attack(t, p, jsonArgs("op", "read", "path", file)); !strings.Contains(out, "nameserver") {
		t.Errorf("a granted file under /run is not visible inside: %q", out)
	}
	if out := attack(t, p, jsonArgs("op", "list", "path", "/run")); strings.Contains(out, "systemd") || strings.Contains(out, "lock") {
		t.Errorf("the rest of /run is visible inside: %q", out)
	}
}

// A host running as root runs its sandboxed processes as root without
// capabilities, and root still passes the owner check on root's own files:
// a private key under /etc/ssl/private was readable, since the sandbox
// granted all of /etc/ssl for its certificates (red team round 5). The
// test plants a root-only key there (as root; the folder is made if
// missing and removed after) and reads it confined and, as the control,
// unconfined.
func TestRootOnlyKeyUnderSystemCertificates(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("not root: the sandboxed process is not root either, and the key is not the test's to plant")
	}
	dir := "/etc/ssl/private"
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(dir) })
	}
	key, err := os.CreateTemp(dir, "switchboard-test-*.key")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(key.Name()) })
	if _, err := key.WriteString("-----BEGIN PRIVATE KEY----- root only\n"); err != nil {
		t.Fatal(err)
	}
	_ = key.Close()
	if err := os.Chmod(key.Name(), 0o600); err != nil {
		t.Fatal(err)
	}
	w := newWorld(t)
	pol := w.policy()
	confined := launch(t, w, &pol)
	open := launch(t, w, nil)
	args := jsonArgs("op", "read", "path", key.Name())
	if out := attack(t, confined, args); strings.Contains(out, "root only") {
		t.Errorf("inside the sandbox the root-only key was read: %.200q", out)
	}
	if out := attack(t, open, args); !strings.Contains(out, "root only") {
		t.Errorf("control: without the sandbox the key could not be read (%.200q), so the test proves nothing", out)
	}
	// The certificates themselves stay readable (TLS for web and git).
	if certs, _ := filepath.Glob("/etc/ssl/certs/*"); len(certs) > 0 {
		if out := attack(t, confined, jsonArgs("op", "list", "path", "/etc/ssl/certs")); strings.HasPrefix(out, "denied") {
			t.Errorf("listing /etc/ssl/certs inside the sandbox: %.200q", out)
		}
	}
}

// A plugin inherits the host's working directory. Started from inside a
// folder the sandbox hides (a host run from its data_dir), it must not see
// what that folder holds through the directory it inherited, which was
// looked up before the cover went on; started from a folder it may write
// (a host run from the project), relative paths must write there, not
// meet the read-only view beneath the writable one.
func TestWorkingDirectoryIsLookedUpInsideTheSandbox(t *testing.T) {
	w := newWorld(t)
	pol := w.policy()
	probe := "pwd; stat -c 'size=%s' permissions.json; ls -a"
	t.Run("hidden", func(t *testing.T) {
		t.Chdir(w.dataDir)
		// The control: unconfined, the plugin sees the folder's files.
		if out := attack(t, launch(t, w, nil), jsonArgs("op", "sh", "cmd", probe)); !strings.Contains(out, "size=") || !strings.Contains(out, "control") {
			t.Fatalf("unconfined from data_dir the plugin does not see its files: %q", out)
		}
		out := attack(t, launch(t, w, &pol), jsonArgs("op", "sh", "cmd", probe))
		if strings.Contains(out, "size=") || strings.Contains(out, "control") || strings.Contains(out, "permissions.json\n") {
			t.Errorf("confined, a plugin started in the hidden data_dir sees what it holds: %q", out)
		}
		// Inside a hidden folder the path does not exist under the cover:
		// the plugin starts in /.
		t.Chdir(filepath.Join(w.dataDir, "control"))
		out = attack(t, launch(t, w, &pol), jsonArgs("op", "sh", "cmd", "pwd; stat -c 'size=%s' h.sock"))
		if !strings.Contains(out, "\n/\n") && !strings.HasPrefix(out, "ok: /\n") || strings.Contains(out, "size=") {
			t.Errorf("confined, a plugin started inside the hidden data_dir does not start in / or sees what is there: %q", out)
		}
	})
	t.Run("writable", func(t *testing.T) {
		t.Chdir(w.project)
		out := attack(t, launch(t, w, &pol), jsonArgs("op", "sh", "cmd", "echo relative > written.txt && cat written.txt"))
		if !strings.Contains(out, "ok: relative") {
			t.Errorf("confined, a plugin started in the project cannot write a relative path there: %q", out)
		}
		if b, err := os.ReadFile(filepath.Join(w.project, "written.txt")); err != nil || string(b) != "relative\n" {
			t.Errorf("the relative write did not reach the project: %q %v", b, err)
		}
	})
}

// TestExecOnlyRunsTheListedProgramsAlone: with ExecOnly (the git
// built-in's sandbox) the plugin runs what Exec lists and nothing else it
// can read, a shell included: the kernel's answer to a program named in a
// repository's config that the plugin's own checks missed. The control:
// without ExecOnly the same shell runs.
func TestExecOnlyRunsTheListedProgramsAlone(t *testing.T) {
	w := newWorld(t)
	allowed, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true on PATH")
	}
	allowed, _ = filepath.EvalSymlinks(allowed)
	shell, _ := filepath.EvalSymlinks("/bin/sh")
	pol := w.policy()
	pol.ExecOnly, pol.Exec = true, builtins.ExecWithInterpreter(allowed)
	p := launch(t, w, &pol)
	if out := attack(t, p, jsonArgs("op", "exec", "path", allowed)); !strings.HasPrefix(out, "ok:") {
		t.Errorf("with ExecOnly, the listed %s did not run: %q", allowed, out)
	}
	for _, prog := range []string{shell, "/bin/sh", filepath.Join(w.project, "copy-of-true")} {
		if prog == filepath.Join(w.project, "copy-of-true") {
			// A copy of an allowed program in a folder the plugin may
			// write is a different file: it does not run either.
			b, err := os.ReadFile(allowed)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(prog, b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if out := attack(t, p, jsonArgs("op", "exec", "path", prog)); !strings.Contains(out, "permission denied") {
			t.Errorf("with ExecOnly, %s ran: %q", prog, out)
		}
	}
	if out := attack(t, p, jsonArgs("op", "sh", "cmd", "echo ran")); !strings.Contains(out, "permission denied") {
		t.Errorf("with ExecOnly, a shell command ran: %q", out)
	}
	open := w.policy()
	if out := attack(t, launch(t, w, &open), jsonArgs("op", "sh", "cmd", "echo ran")); out != "ok: ran\n" {
		t.Errorf("control: confined without ExecOnly, the shell did not run: %q", out)
	}
}

// TestKernelKeyringsAreOutOfReach: the kernel's keyrings are not
// namespaced, and the sandbox maps the host's user to itself, so a key the
// host's user may read was readable from a sandbox by its id (listed in
// /proc/keys), and a key could be planted in the user's keyring (red
// team). The sandbox refuses the keyring calls and covers /proc/keys. The
// control: the same read unconfined returns the secret.
func TestKernelKeyringsAreOutOfReach(t *testing.T) {
	w := newWorld(t)
	secret := "keyring-secret-" + strconv.Itoa(os.Getpid())
	id, err := unix.AddKey("user", "switchboard-test-"+strconv.Itoa(os.Getpid()), []byte(secret), unix.KEY_SPEC_USER_KEYRING)
	if err != nil {
		t.Skipf("no kernel keyrings here: %v", err)
	}
	t.Cleanup(func() { _, _ = unix.KeyctlInt(unix.KEYCTL_INVALIDATE, id, 0, 0, 0) })
	// Readable by the user, not only by a possessor: as a credential
	// cache is.
	if err := unix.KeyctlSetperm(id, 0x3f3f0000); err != nil {
		t.Fatal(err)
	}
	open := launch(t, w, nil)
	if out := attack(t, open, jsonArgs("op", "key", "path", strconv.Itoa(id))); out != "ok: "+secret {
		t.Fatalf("control: unconfined, the plugin could not read the user's key: %q", out)
	}
	uringOpen := attack(t, open, jsonArgs("op", "uring"))
	pol := w.policy()
	p := launch(t, w, &pol)
	if out := attack(t, p, jsonArgs("op", "key", "path", strconv.Itoa(id))); strings.Contains(out, secret) || !strings.Contains(out, "denied") {
		t.Errorf("confined, the plugin read the host user's key: %q", out)
	}
	// io_uring too (red team, round 3), where the kernel offers it.
	if out := attack(t, p, jsonArgs("op", "uring")); strings.HasPrefix(uringOpen, "ok") && !strings.Contains(out, "operation not permitted") {
		t.Errorf("confined, the plugin set up an io_uring: %q", out)
	}
	if out := attack(t, p, jsonArgs("op", "read", "path", "/proc/keys")); strings.Contains(out, "switchboard-test-") {
		t.Errorf("confined, /proc/keys lists the host user's keys: %q", out)
	}
	ring, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_USER_KEYRING, false)
	if err != nil {
		t.Fatal(err)
	}
	planted := "switchboard-planted-" + strconv.Itoa(os.Getpid())
	_ = attack(t, p, jsonArgs("op", "addkey", "path", planted, "addr", strconv.Itoa(ring)))
	if pid, err := unix.KeyctlSearch(ring, "user", planted, 0); err == nil {
		_, _ = unix.KeyctlInt(unix.KEYCTL_INVALIDATE, pid, 0, 0, 0)
		t.Error("confined, the plugin planted a key in the host user's keyring")
	}
}

// A sandbox makes no set-user-ID or set-group-ID file: with the host's
// user mapped to itself, a sandbox of a host run as root copied python into
// the project and made it setuid root, and any user of the machine then ran
// it as root (red team). chmod, and a file made with such a mode (open),
// are refused; the control: the same commands unconfined make both.
func TestSetIDFilesCannotBeMade(t *testing.T) {
	w := newWorld(t)
	py := "/usr/bin/python3" // a system path: the sandbox hides home folders
	if _, err := os.Stat(py); err != nil {
		py = ""
	}
	script := func(dir string) string {
		s := "cd " + dir + " && cp /bin/true uid && chmod 4755 uid; cp /bin/true gid && chmod g+s gid; install -m 4755 /bin/true inst"
		if py != "" {
			s += "; " + py + ` -c 'import os; os.close(os.open("made", os.O_CREAT|os.O_WRONLY, 0o4755))'`
		}
		return s + "; true"
	}
	files := []string{"uid", "gid", "inst"}
	if py != "" {
		files = append(files, "made")
	}
	setID := func(dir string) []string {
		var got []string
		for _, f := range files {
			if st, err := os.Stat(filepath.Join(dir, f)); err == nil && st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
				got = append(got, f)
			}
		}
		return got
	}
	open := launch(t, w, nil)
	control := filepath.Join(w.project, "control")
	if err := os.Mkdir(control, 0o755); err != nil {
		t.Fatal(err)
	}
	attack(t, open, jsonArgs("op", "sh", "cmd", script(control)))
	if got := setID(control); len(got) != len(files) {
		t.Fatalf("control: unconfined, the commands made set-ID files %v, want all of %v", got, files)
	}
	pol := w.policy()
	p := launch(t, w, &pol)
	confined := filepath.Join(w.project, "confined")
	if err := os.Mkdir(confined, 0o755); err != nil {
		t.Fatal(err)
	}
	out := attack(t, p, jsonArgs("op", "sh", "cmd", script(confined)))
	if got := setID(confined); len(got) > 0 {
		t.Errorf("confined, the commands made set-ID files %v (%q)", got, out)
	}
	// Ordinary modes still work.
	if out := attack(t, p, jsonArgs("op", "sh", "cmd", "cd "+confined+" && cp /bin/true plain && chmod 755 plain && ./plain && echo ran")); !strings.Contains(out, "ran") {
		t.Errorf("confined, an ordinary chmod and run failed: %q", out)
	}
}

// The folders the host makes before a start (a repository's hooks folder,
// named by files a server may write) are made only under the folders the
// server may write, and never through a link: a .git file pointing
// elsewhere had the host (root) make folders anywhere (red team round 9).
// The control: the folder inside the project is made.
func TestFoldersMadeOnlyInWritableFolders(t *testing.T) {
	w := newWorld(t)
	bins := fixtures.Build(t)
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(w.project, "link")); err != nil {
		t.Fatal(err)
	}
	inside := filepath.Join(w.project, "repo", ".git", "hooks")
	pol := w.policy()
	pol.Make = []string{
		filepath.Join(outside, "far", "hooks"),
		filepath.Join(w.project, "link", "through", "hooks"),
		inside,
	}
	sb := &sandbox.Sandbox{Name: "fx", Policy: pol, Helper: bins.Sandbox, TempRoot: t.TempDir()}
	conf, err := sb.Wrap(exec.Command("/bin/true"), "")
	if err != nil {
		t.Fatalf("Wrap: %v", err)
	}
	if conf != nil {
		conf.Stopped()
	}
	for _, p := range []string{filepath.Join(outside, "far"), filepath.Join(outside, "through")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("the host made %s, outside the server's folders", p)
		}
	}
	if st, err := os.Stat(inside); err != nil || !st.IsDir() {
		t.Errorf("control: %s was not made: %v", inside, err)
	}
}

// A plugin without network cannot have the host connect to its loopback:
// its handshake named 127.0.0.1 and a port, and the host dialled it from
// its own network (a reach into the host's loopback services, and a
// channel out for a plugin that has none; red team round 9). The control:
// the same plugin unconfined has the host dial the listener.
func TestOfflinePluginCannotAimTheHostsDial(t *testing.T) {
	w := newWorld(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	dialled := dials(ln)
	plugin := filepath.Join(t.TempDir(), "aim")
	script := "#!/bin/sh\necho '1|2|tcp|" + ln.Addr().String() + "|grpc|'\nsleep 5\n"
	if err := os.WriteFile(plugin, []byte(script), 0o755); err != nil { //nolint:gosec // G306: an executable
		t.Fatal(err)
	}
	start := func(p *sandbox.Policy) {
		t.Helper()
		spec := launcher.Spec{Name: "aim", Path: plugin, ProjectDir: w.project, DataDir: t.TempDir(), StartTimeout: 5 * time.Second}
		if p != nil {
			spec.Sandbox = &sandbox.Sandbox{Name: "aim", Policy: *p, Helper: fixtures.Build(t).Sandbox}
		}
		if pl, err := launcher.Launch(t.Context(), spec, hclog.NewNullLogger()); err == nil {
			_ = pl.Close(context.Background())
		}
	}
	pol := w.policy() // Network false
	start(&pol)
	select {
	case <-dialled:
		t.Fatal("the host dialled the address an offline plugin named")
	case <-time.After(500 * time.Millisecond):
	}
	start(nil)
	select {
	case <-dialled:
	case <-time.After(5 * time.Second):
		t.Fatal("control: unconfined, the host did not dial the plugin's address either, so the test proves nothing")
	}
}

// A plugin cannot aim the host's connection through a link in its socket
// folder: a link there to another socket (another host's control socket,
// a listener outside every sandbox) had the host connect to it (red team
// round 10). Every other test's plugins show the plugin's own socket still
// connects.
func TestHandshakeLinkIsNotFollowed(t *testing.T) {
	w := newWorld(t)
	target := filepath.Join(t.TempDir(), "l.sock")
	ln, err := net.Listen("unix", target)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	dialled := dials(ln)
	// A link to the socket, and (red team round 11) a link to its folder
	// with the socket named through it.
	for _, tc := range []struct{ link, name, want string }{
		{target, "p", "not a socket"},
		{filepath.Dir(target), "d/l.sock", "not in its socket folder"},
	} {
		plugin := filepath.Join(t.TempDir(), "aim")
		script := "#!/bin/sh\nln -s " + tc.link + " \"$PLUGIN_UNIX_SOCKET_DIR/" + strings.Split(tc.name, "/")[0] + "\"\necho \"1|2|unix|$PLUGIN_UNIX_SOCKET_DIR/" + tc.name + "|grpc|\"\nsleep 5\n"
		if err := os.WriteFile(plugin, []byte(script), 0o755); err != nil { //nolint:gosec // G306: an executable
			t.Fatal(err)
		}
		spec := launcher.Spec{Name: "aim", Path: plugin, ProjectDir: w.project, DataDir: t.TempDir(), StartTimeout: 5 * time.Second}
		pl, err := launcher.Launch(t.Context(), spec, hclog.NewNullLogger())
		if err == nil {
			_ = pl.Close(context.Background())
			t.Fatalf("%s: a handshake naming a link was accepted", tc.name)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error = %v, want it to say %q", tc.name, err, tc.want)
		}
		select {
		case <-dialled:
			t.Fatalf("%s: the host connected to the socket the plugin's link named", tc.name)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// dials reports each connection ln accepts (and closes it) until ln is
// closed.
func dials(ln net.Listener) <-chan struct{} {
	dialled := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dialled <- struct{}{}
			_ = c.Close()
		}
	}()
	return dialled
}

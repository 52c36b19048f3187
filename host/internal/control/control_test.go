package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// spawner is a Handler whose Connect really starts the command, as the
// host's does: the attack's effect is a process that ran (a marker file).
type spawner struct {
	mu     sync.Mutex
	events []Event
	conns  []string
}

func (s *spawner) Status() any                         { return []string{} }
func (s *spawner) Restart(string) (string, error)      { return "", nil }
func (s *spawner) Reload(context.Context) (any, error) { return "reloaded", nil }
func (s *spawner) Disconnect(context.Context, string) error {
	return nil
}

func (s *spawner) Connect(ctx context.Context, spec ExternalSpec) error {
	s.mu.Lock()
	s.conns = append(s.conns, spec.Name)
	s.mu.Unlock()
	return exec.CommandContext(ctx, spec.Command, spec.Args...).Run()
}

func (s *spawner) audit(ev Event) {
	s.mu.Lock()
	s.events = append(s.events, ev)
	s.mu.Unlock()
}

func (s *spawner) snapshot() ([]Event, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events), slices.Clone(s.conns)
}

func listen(t *testing.T, configure func(*Guard)) (*Server, *spawner) {
	t.Helper()
	g, err := NewGuard()
	if err != nil {
		t.Fatal(err)
	}
	if configure != nil {
		configure(g)
	}
	h := &spawner{}
	// A short data dir: socket paths are limited to ~100 bytes.
	dir, err := os.MkdirTemp("", "sbctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s, err := Listen(dir, h, Options{Guard: g, Audit: h.audit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, h
}

// attack is the request an agent's bash would send: connect a "server"
// whose command creates marker.
func attack(sock, marker string) []string {
	body := fmt.Sprintf(`{"name":"evil","command":"sh","args":["-c","touch %s"]}`, marker)
	return []string{
		"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--unix-socket", sock,
		"-X", "POST", "-H", "Content-Type: application/json", "-d", body, "http://switchboard/v1/external",
	}
}

func need(t *testing.T, bins ...string) {
	t.Helper()
	for _, b := range bins {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("%s not installed", b)
		}
	}
}

// TestPeerInAnotherPIDNamespaceIsRefused performs the attack from a
// sandboxed plugin's position (its own PID namespace): the POST has no
// effect. The control sends the same request from the host's namespace,
// where it works.
func TestPeerInAnotherPIDNamespaceIsRefused(t *testing.T) {
	need(t, "curl", "unshare")
	sandboxes := map[string][]string{
		"pid namespace":           {"unshare", "--pid", "--fork", "--mount-proc"},
		"user and pid namespaces": {"unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc"},
	}
	for name, wrap := range sandboxes {
		t.Run(name, func(t *testing.T) {
			if out, err := exec.Command(wrap[0], append(wrap[1:], "true")...).CombinedOutput(); err != nil {
				t.Skipf("%s does not work here: %v %s", strings.Join(wrap, " "), err, out)
			}
			s, h := listen(t, nil)
			marker := filepath.Join(t.TempDir(), "pwned")
			argv := append(slices.Clone(wrap), attack(s.Path(), marker)...)
			out, err := exec.Command(argv[0], argv[1:]...).Output()
			if err != nil {
				t.Fatalf("%s: %v", strings.Join(argv, " "), err)
			}
			if string(out) != "403" {
				t.Errorf("status from another PID namespace = %s, want 403", out)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the refused peer's command ran (marker created)")
			}
			events, conns := h.snapshot()
			if len(conns) != 0 {
				t.Errorf("Connect was called for %v", conns)
			}
			if len(events) != 1 || events[0].Action != "connect" || events[0].Outcome != "refused" ||
				events[0].Peer.PID <= 0 || !strings.Contains(events[0].Error, "PID namespace") {
				t.Errorf("audit = %+v, want one refused connect with the peer's pid", events)
			}

			// Control: the same request from the host's namespace works.
			out, err = exec.Command("curl", attack(s.Path(), marker)[1:]...).Output()
			if err != nil || string(out) != "200" {
				t.Fatalf("control from the host's namespace = %s %v, want 200", out, err)
			}
			if _, err := os.Stat(marker); err != nil {
				t.Fatal("control: the command did not run; the test proves nothing")
			}
		})
	}
}

// TestPeerOfAnotherUserIsRefused: even if the socket's mode let another
// user in, the peer's uid is checked.
func TestPeerOfAnotherUserIsRefused(t *testing.T) {
	need(t, "curl", "setpriv")
	if os.Getuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	s, h := listen(t, nil)
	if err := os.Chmod(s.Path(), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(s.Path()), 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(filepath.Dir(s.Path())), 0o711); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(os.TempDir(), fmt.Sprintf("sbctl-uid-%d", time.Now().UnixNano()))
	t.Cleanup(func() { os.Remove(marker) })
	argv := append([]string{"setpriv", "--reuid=4321", "--regid=4321", "--clear-groups"}, attack(s.Path(), marker)...)
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	if err != nil {
		t.Fatalf("%v: %v", argv, err)
	}
	if string(out) != "403" {
		t.Errorf("status for uid 4321 = %s, want 403", out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("another user's command ran")
	}
	if events, _ := h.snapshot(); len(events) != 1 || events[0].Peer.UID != 4321 || events[0].Outcome != "refused" {
		t.Errorf("audit = %+v, want one refused request from uid 4321", events)
	}
}

// TestPluginDescendantIsRefused: a process started by a plugin (not yet
// sandboxed, so in the host's namespace) is refused by its ancestry.
func TestPluginDescendantIsRefused(t *testing.T) {
	need(t, "curl", "sh")
	var mu sync.Mutex
	var plugins []int
	s, h := listen(t, func(g *Guard) {
		g.PluginPIDs(func() []int {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(plugins)
		})
	})
	marker := filepath.Join(t.TempDir(), "pwned")
	quoted := make([]string, 0, 16)
	for _, a := range attack(s.Path(), marker) {
		quoted = append(quoted, "'"+a+"'")
	}
	// The "plugin" waits for a line, then runs curl as its child.
	plugin := exec.Command("sh", "-c", "read x; "+strings.Join(quoted, " ")+"; echo")
	stdin, err := plugin.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	plugin.Stdout = &out
	if err := plugin.Start(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	plugins = append(plugins, plugin.Process.Pid)
	mu.Unlock()
	fmt.Fprintln(stdin, "go")
	stdin.Close()
	if err := plugin.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.String()); got != "403" {
		t.Errorf("status for a plugin's child = %s, want 403", got)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the plugin's child's command ran")
	}
	if events, _ := h.snapshot(); len(events) != 1 || !strings.Contains(events[0].Error, "descends from the plugin") {
		t.Errorf("audit = %+v", events)
	}
}

// TestEveryActionIsAudited: status, restart, reload, connect, disconnect
// (and an unknown path) each leave one event naming this process as peer.
func TestEveryActionIsAudited(t *testing.T) {
	s, h := listen(t, nil)
	dataDir := filepath.Dir(filepath.Dir(s.Path()))
	ctx := t.Context()
	calls := []struct{ method, path, action, target string }{
		{"GET", "/v1/status", "status", ""},
		{"POST", "/v1/restart?name=git", "restart", "git"},
		{"POST", "/v1/reload", "reload", ""},
		{"POST", "/v1/external", "connect", "rt"},
		{"DELETE", "/v1/external?name=rt", "disconnect", "rt"},
		{"POST", "/v1/nothing", "POST /v1/nothing", ""},
	}
	for _, c := range calls {
		var body []any
		if c.action == "connect" {
			body = append(body, ExternalSpec{Name: "rt", Command: "true", Env: map[string]string{"TOKEN": "s3cret"}})
		}
		if _, err := Call(ctx, dataDir, c.method, c.path, body...); err != nil {
			t.Fatalf("%s %s: %v", c.method, c.path, err)
		}
	}
	events, _ := h.snapshot()
	if len(events) != len(calls) {
		t.Fatalf("got %d events, want %d: %+v", len(events), len(calls), events)
	}
	for i, c := range calls {
		ev := events[i]
		wantOutcome := "ok"
		if c.action == "POST /v1/nothing" {
			wantOutcome = "error"
		}
		if ev.Action != c.action || ev.Target != c.target || ev.Outcome != wantOutcome || ev.Peer.PID != os.Getpid() || ev.Peer.UID != os.Getuid() {
			t.Errorf("event %d = %+v, want action %q target %q outcome %s from pid %d", i, ev, c.action, c.target, wantOutcome, os.Getpid())
		}
	}
	if b, _ := json.Marshal(events); strings.Contains(string(b), "s3cret") {
		t.Error("an environment value reached the audit event")
	}
	if events[3].Detail != "true" {
		t.Errorf("connect detail = %q, want the command line", events[3].Detail)
	}
}

func TestListenNeedsGuard(t *testing.T) {
	if _, err := Listen(t.TempDir(), &spawner{}, Options{}); err == nil {
		t.Fatal("Listen without a guard succeeded")
	}
}

// TestGuardCheck judges peers against a fake /proc.
func TestGuardCheck(t *testing.T) {
	proc := t.TempDir()
	mk := func(pid, ppid int, ns, cgroup string) {
		dir := filepath.Join(proc, fmt.Sprint(pid))
		if err := os.MkdirAll(filepath.Join(dir, "ns"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(ns, filepath.Join(dir, "ns", "pid")); err != nil {
			t.Fatal(err)
		}
		must(t, os.WriteFile(filepath.Join(dir, "cgroup"), []byte("0::"+cgroup+"\n"), 0o644))
		must(t, os.WriteFile(filepath.Join(dir, "stat"), fmt.Appendf(nil, "%d (a (b) c) S %d 1 1", pid, ppid), 0o644))
	}
	host := "pid:[1]"
	must(t, os.MkdirAll(filepath.Join(proc, "self", "ns"), 0o755))
	must(t, os.Symlink(host, filepath.Join(proc, "self", "ns", "pid")))
	mk(10, 1, host, "/user.slice")
	mk(20, 10, host, "/user.slice")          // a plugin (registered below)
	mk(21, 20, host, "/user.slice")          // its child
	mk(30, 1, "pid:[2]", "/user.slice")      // sandboxed
	mk(40, 1, host, "/switchboard/bash/sub") // in a plugin's cgroup
	mk(41, 1, host, "/switchboard/bashful")  // a sibling cgroup, not below it
	g, err := newGuard(proc)
	must(t, err)
	g.PluginPIDs(func() []int { return []int{20} })
	g.AddPluginNamespace("pid:[2]")
	g.AddPluginCgroup("/switchboard/bash/")
	uid := os.Getuid()
	tests := []struct {
		name string
		peer Peer
		want string // "" = served
	}{
		{"host's user and namespace", Peer{PID: 10, UID: uid}, ""},
		{"other uid", Peer{PID: 10, UID: uid + 1}, "is not the host's uid"},
		{"invisible pid", Peer{PID: 0, UID: uid}, "not visible"},
		{"gone", Peer{PID: 99, UID: uid}, "cannot read its PID namespace"},
		{"plugin itself", Peer{PID: 20, UID: uid}, "descends from the plugin process 20"},
		{"plugin's child", Peer{PID: 21, UID: uid}, "descends from the plugin process 20"},
		{"sandboxed", Peer{PID: 30, UID: uid}, "a plugin's PID namespace"},
		{"plugin cgroup", Peer{PID: 40, UID: uid}, "plugin cgroup /switchboard/bash"},
		{"sibling cgroup", Peer{PID: 41, UID: uid}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := g.Check(tt.peer)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Check(%+v) = %v, want served", tt.peer, err)
			case tt.want != "" && (!errors.Is(err, ErrPeerRefused) || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Check(%+v) = %v, want a refusal containing %q", tt.peer, err, tt.want)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Status carries the host's own figures: its goroutines, which go up with
// the goroutines it runs (the figure make chaos watches for leaks).
func TestStatusHostStats(t *testing.T) {
	s, _ := listen(t, nil)
	dataDir := filepath.Dir(filepath.Dir(s.Path()))
	read := func() HostStats {
		t.Helper()
		replies, err := Call(t.Context(), dataDir, "GET", "/v1/status")
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Host *HostStats `json:"host"`
		}
		if err := json.Unmarshal(replies[0].Body, &body); err != nil || body.Host == nil {
			t.Fatalf("status = %s (%v); want a host section", replies[0].Body, err)
		}
		return *body.Host
	}
	before := read()
	if before.Goroutines <= 0 || before.HeapBytes == 0 {
		t.Fatalf("host = %+v; want goroutines and heap", before)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() { defer wg.Done(); <-stop }()
	}
	after := read()
	close(stop)
	wg.Wait()
	// The serving of each read runs goroutines of its own that come and
	// go (a connection's), so allow for a few of them either way.
	if after.Goroutines < before.Goroutines+90 {
		t.Errorf("goroutines %d, then %d with 100 more running", before.Goroutines, after.Goroutines)
	}
}

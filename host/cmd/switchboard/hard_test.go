package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

// auditRecords waits until audit.jsonl holds a record that match accepts,
// and returns every record read.
func auditRecords(t *testing.T, e env, match func(map[string]any) bool) ([]map[string]any, bool) {
	t.Helper()
	path := filepath.Join(filepath.Dir(e.config), "state", "audit.jsonl")
	var recs []map[string]any
	found := eventually(10*time.Second, func() bool {
		recs = nil
		found := false
		if f, err := os.Open(path); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				var r map[string]any
				if json.Unmarshal(sc.Bytes(), &r) == nil {
					recs = append(recs, r)
					found = found || match(r)
				}
			}
			f.Close()
		}
		return found
	})
	return recs, found
}

// TestUnknownToolOverMCPIsAudited: a model probing for tools that are not
// served leaves records, as the CLI's refusals do.
func TestUnknownToolOverMCPIsAudited(t *testing.T) {
	e := setup(t)
	c, _ := mcpClient(t, e)
	initialize(t, c)
	_, err := callTool(t.Context(), c, "nosuch__tool", map[string]any{"x": 1}, nil)
	if err == nil {
		t.Fatal("calling an unknown tool succeeded")
	}
	recs, ok := auditRecords(t, e, func(r map[string]any) bool {
		return r["tool"] == "nosuch__tool" && r["decision"] == "unknown" && r["outcome"] == "refused"
	})
	if !ok {
		t.Fatalf("no audit record of the unknown tool; audit.jsonl has %v", recs)
	}
}

// startServe starts `switchboard serve` (under wrap, a command prefix,
// if any) with extra environment and waits for its control socket (made
// after the host hardened itself).
func startServe(t *testing.T, e env, wrap []string, extraEnv ...string) *exec.Cmd {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	argv := append(slices.Clone(wrap), e.bins.Switchboard, "serve", "--config", e.config)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = r
	cmd.Env = append(append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=warn"), extraEnv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	t.Cleanup(func() {
		w.Close()
		_ = waitExit(t, cmd)
	})
	sock := filepath.Join(filepath.Dir(e.config), "state", "control", fmt.Sprintf("%d.sock", cmd.Process.Pid))
	if !waitFile(sock, 30*time.Second) {
		t.Fatalf("serve made no control socket; stderr: %s", stderr.String())
	}
	return cmd
}

// noCaps runs a command as this user without any capability: root
// without CAP_SYS_PTRACE is an ordinary user for /proc's checks. (The
// kernel also refuses a reader whose capabilities are not a superset of
// its target's, so the targets run under it too.)
var noCaps = []string{"setpriv", "--inh-caps=-all", "--bounding-set=-all", "--"}

func unprivileged(argv ...string) *exec.Cmd {
	argv = append(slices.Clone(noCaps), argv...)
	return exec.Command(argv[0], argv[1:]...)
}

// TestHostEnvironIsHidden performs the read an agent's bash would do:
// cat /proc/<host>/environ. The host is non-dumpable, so it fails; the
// control reads a dumpable process with the same secret.
func TestHostEnvironIsHidden(t *testing.T) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv not installed")
	}
	const secret = "SB_TEST_SECRET=hunter2-e2e"
	e := setup(t)
	host := startServe(t, e, noCaps, secret)
	out, _ := unprivileged("cat", fmt.Sprintf("/proc/%d/environ", host.Process.Pid)).Output()
	if bytes.Contains(out, []byte("hunter2")) {
		t.Fatal("the host's environment was read by another process of the same user")
	}

	// Control: the same reader against a process that stayed dumpable.
	sleeper := unprivileged("sleep", "60")
	sleeper.Env = []string{secret}
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() }()
	// Until setpriv has exec'd sleep, its credential changes leave the
	// process non-dumpable for a moment: read once it is sleep.
	eventually(10*time.Second, func() bool {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", sleeper.Process.Pid))
		return strings.TrimSpace(string(comm)) == "sleep"
	})
	var errb bytes.Buffer
	reader := unprivileged("cat", fmt.Sprintf("/proc/%d/environ", sleeper.Process.Pid))
	reader.Stderr = &errb
	out, err := reader.Output()
	if err != nil || !bytes.Contains(out, []byte("hunter2")) {
		t.Fatalf("control: the reader could not read a dumpable process (%v %q %s); the test proves nothing", err, out, errb.String())
	}
}

// TestDisconnectRemovesConnected: what `connect` added, `disconnect`
// removes: its process ends and its tools go. Both actions are audited
// with the peer's pid and uid.
func TestDisconnectRemovesConnected(t *testing.T) {
	e := setup(t)
	startServe(t, e, nil)
	readyPIDs(t, e)
	if out, errOut, code := run(t, e, "connect", "--config", e.config, "rt", "--", e.bins.MCPServer); code != 0 {
		t.Fatalf("connect = %d %q %q", code, out, errOut)
	}
	pid := readyPIDs(t, e)["rt"]
	if pid == 0 || !fixtures.Alive(pid) {
		t.Fatalf("connected server has no live process (pid %d)", pid)
	}
	if out, _, _ := run(t, e, "tools", "--config", e.config); strings.Contains(out, "rt.") {
		t.Log("note: one-shot tools does not see runtime servers, as expected")
	}
	if out, errOut, code := run(t, e, "disconnect", "--config", e.config, "rt"); code != 0 {
		t.Fatalf("disconnect = %d %q %q", code, out, errOut)
	}
	if alive := fixtures.WaitGone([]int{pid}, 10*time.Second); len(alive) > 0 {
		t.Errorf("the disconnected server's process %d is still alive", pid)
	}
	for _, s := range status(t, e).Servers {
		if s.Name == "rt" {
			t.Errorf("status still lists rt after disconnect: %+v", s)
		}
	}
	// Disconnecting again finds nothing.
	if _, _, code := run(t, e, "disconnect", "--config", e.config, "rt"); code == 0 {
		t.Error("a second disconnect of rt succeeded")
	}
	recs, _ := auditRecords(t, e, func(r map[string]any) bool { return r["action"] == "disconnect" && r["outcome"] == "error" })
	var actions []string
	for _, r := range recs {
		if a, ok := r["action"].(string); ok {
			peer, _ := r["peer"].(map[string]any)
			if peer == nil || peer["pid"].(float64) <= 0 {
				t.Errorf("control record without its peer: %v", r)
			}
			actions = append(actions, a+":"+fmt.Sprint(r["outcome"]))
		}
	}
	for _, want := range []string{"status:ok", "connect:ok", "disconnect:ok", "disconnect:error"} {
		if !slices.Contains(actions, want) {
			t.Errorf("audit lacks %s; control records: %v", want, actions)
		}
	}
}

// TestControlRefusesSandboxedPeer performs the attack against a
// real host: curl in another PID namespace POSTs /v1/external with a
// command that would create a marker. Refused, nothing runs, audited.
func TestControlRefusesSandboxedPeer(t *testing.T) {
	for _, bin := range []string{"curl", "unshare"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed", bin)
		}
	}
	if err := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "true").Run(); err != nil {
		t.Skipf("unshare --pid does not work here: %v", err)
	}
	e := setup(t)
	host := startServe(t, e, nil)
	sock := filepath.Join(filepath.Dir(e.config), "state", "control", fmt.Sprintf("%d.sock", host.Process.Pid))
	marker := filepath.Join(t.TempDir(), "pwned")
	body := fmt.Sprintf(`{"name":"evil","command":"sh","args":["-c","touch %s; sleep 600"]}`, marker)
	out, err := exec.Command("unshare", "--pid", "--fork", "--mount-proc",
		"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--unix-socket", sock,
		"-X", "POST", "-d", body, "http://switchboard/v1/external").Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "403" {
		t.Errorf("sandboxed POST /v1/external = %s, want 403", out)
	}
	if waitFile(marker, time.Second) {
		t.Fatal("the sandboxed peer's command ran")
	}
	for _, s := range status(t, e).Servers {
		if s.Name == "evil" {
			t.Fatalf("evil was connected: %+v", s)
		}
	}
	if _, ok := auditRecords(t, e, func(r map[string]any) bool {
		return r["action"] == "connect" && r["outcome"] == "refused" && r["target"] == nil
	}); !ok {
		t.Error("the refused connect is not in audit.jsonl")
	}
}

// TestDataDirModes: serve creates data_dir 0700; a data_dir others can
// write is refused with the path and the chmod to run, and nothing starts.
func TestDataDirModes(t *testing.T) {
	e := setup(t)
	state := filepath.Join(filepath.Dir(e.config), "state")
	if out, errOut, code := run(t, e, "tools", "--config", e.config); code != 0 {
		t.Fatalf("tools = %d %q %q", code, out, errOut)
	}
	fi, err := os.Stat(state)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("data_dir created with mode %04o, want 0700", fi.Mode().Perm())
	}
	if err := os.Chmod(state, 0o777); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := run(t, e, "call", "--config", e.config, "hello.greet", `{"name":"Ada"}`)
	if code != 2 || !strings.Contains(errOut, state) || !strings.Contains(errOut, "chmod go-w '"+state+"'") {
		t.Errorf("call with a 0777 data_dir = %d %q, want exit 2 naming %s and the chmod", code, errOut, state)
	}
}

// TestAuditSurvivesAKilledHost: every call the client got an answer for is
// in the audit log even when the host is SIGKILLed right after the last
// answer (records are written before the answer is sent). Before, 844 of
// 1,000 answered calls were there; with audit_durable = false this test
// fails.
func TestAuditSurvivesAKilledHost(t *testing.T) {
	e := setupWith(t, `permissions { default = "allow" }`)
	c, cmd := mcpClient(t, e)
	initialize(t, c)
	const calls = 300
	var wg sync.WaitGroup
	var answered atomic.Int64
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < calls; i += 8 {
				if res, err := callTool(t.Context(), c, "hello__greet", map[string]any{"name": fmt.Sprintf("n%d", i)}, nil); err == nil && !res.IsError {
					answered.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(e.config), "state", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Count(string(b), `"tool":"hello.greet"`)
	if answered.Load() != calls || int64(got) < answered.Load() {
		t.Errorf("%d calls answered, %d in the audit log after SIGKILL; want all %d", answered.Load(), got, calls)
	}
}

// TestCallTimeoutCancelsInThePlugin: a call past its tool's call_timeout is
// answered with an error that says so, the plugin sees the cancellation,
// and the audit log records a timeout. Before, a call to a stuck plugin
// waited for the health check, or forever.
func TestCallTimeoutCancelsInThePlugin(t *testing.T) {
	e := setupWith(t, `permissions { default = "allow" }`)
	if err := os.WriteFile(e.config, []byte(strings.Replace(mustRead(t, e.config), `plugin "fx" {`, `plugin "fx" {
  tool "sleep" {
    call_timeout = "700ms"
  }`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := mcpClient(t, e)
	initialize(t, c)
	start := time.Now()
	res, err := callTool(t.Context(), c, "fx__sleep", map[string]any{"ms": 60000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(res); !res.IsError || !strings.Contains(got, "did not finish within 700ms") || !strings.Contains(got, `tool "sleep" { call_timeout } in the fx block`) {
		t.Errorf("timed-out call = %q (isError %v)", got, res.IsError)
	}
	if waited := time.Since(start); waited > 30*time.Second {
		t.Errorf("the call took %s", waited)
	}
	if !waitFile(e.marker, 10*time.Second) {
		t.Error("the plugin never saw the call cancelled")
	}
	if recs, ok := auditRecords(t, e, func(r map[string]any) bool { return r["tool"] == "fx.sleep" && r["outcome"] == "timeout" }); !ok {
		t.Errorf("no timeout in the audit log: %v", recs)
	}
}

// TestReattachToAPluginStartedByHand: a plugin started with --debug serves
// without a host and prints the SWITCHBOARD_REATTACH line; hosts given it
// call that very process (one after the other: it outlives each) instead
// of starting one.
func TestReattachToAPluginStartedByHand(t *testing.T) {
	e := setupWith(t, `permissions { default = "allow" }`)
	plug := exec.Command(e.bins.TestPlugin, "--debug")
	stdout, err := plug.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := plug.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = plug.Process.Signal(os.Interrupt)
		_ = plug.Wait()
	})
	var line string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, "export SWITCHBOARD_REATTACH=") {
			line = l
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	raw := strings.Trim(strings.TrimPrefix(line, "export SWITCHBOARD_REATTACH="), "'")
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &m); err != nil || m["fixture"] == nil {
		t.Fatalf("debug mode printed %q, want an export line keyed by the plugin's name", line)
	}
	// The config calls it fx.
	t.Setenv("SWITCHBOARD_REATTACH", `{"fx":`+string(m["fixture"])+`}`)
	for i := 0; i < 2; i++ {
		out, errOut, code := run(t, e, "call", "--config", e.config, "fx.pid")
		if code != 0 || strings.TrimSpace(out) != strconv.Itoa(plug.Process.Pid) {
			t.Fatalf("host %d: fx.pid = %d %q %q, want the pid of the plugin started by hand (%d)", i+1, code, out, errOut, plug.Process.Pid)
		}
	}
	if err := plug.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the plugin started by hand did not outlive the hosts: %v", err)
	}
}

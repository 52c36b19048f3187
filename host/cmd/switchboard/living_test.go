package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

// TestReconnect: SIGKILL a plugin; it goes reconnecting (its tools leave
// the list), comes back ready (they return), the client sees
// list_changed both times, and can call it again.
func TestReconnect(t *testing.T) {
	e := setupWith(t, `restart {
  base_delay = "1500ms"
  max_delay  = "3s"
}`)
	c, _ := mcpClient(t, e)
	var mu sync.Mutex
	changes := 0
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/tools/list_changed" {
			mu.Lock()
			changes++
			mu.Unlock()
		}
	})
	initialize(t, c)
	res, err := callTool(t.Context(), c, "fx__instance", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := resultText(res)
	// The plugin's process group, as the host sees it (a sandboxed plugin
	// runs under its sandbox's init, which leads the group).
	pid := pids(status(t, e))["fx"]
	if pid == 0 {
		t.Fatal("status shows no pid for fx")
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	// While it is away, a call says what is happening.
	sawReconnecting := false
	back := eventually(10*time.Second, func() bool {
		res, err := callTool(t.Context(), c, "fx__instance", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := resultText(res)
		if res.IsError && strings.Contains(got, "fx is reconnecting: attempt 1") {
			if !sawReconnecting {
				sawReconnecting = true
				tools, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
				if err != nil {
					t.Fatal(err)
				}
				for _, tl := range tools.Tools {
					if strings.HasPrefix(tl.Name, "fx__") {
						t.Errorf("%s is listed while fx is reconnecting", tl.Name)
						break
					}
				}
			}
			return false
		}
		return !res.IsError && got != first // back, as a new process
	})
	if !sawReconnecting {
		t.Error("no call saw the reconnecting state")
	}
	if !back {
		t.Fatal("fx did not come back within 10s")
	}
	res, err = callTool(t.Context(), c, "fx__instance", nil, nil)
	if err != nil || res.IsError || resultText(res) == first {
		t.Fatalf("after reconnect fx__instance = %q (%v), want a new start", resultText(res), err)
	}
	tools, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tl := range tools.Tools {
		found = found || tl.Name == "fx__pid"
	}
	if !found {
		t.Error("fx__pid is not listed after the reconnect")
	}
	if !eventually(5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return changes >= 2
	}) {
		t.Errorf("saw %d tools/list_changed notifications, want at least 2 (gone, back)", changes)
	}
}

var reconnectLogRE = regexp.MustCompile(`server reconnecting: server=crashy attempt=(\d+) in=(\S+)`)

// TestCrashLoopBacksOffAndFails: a plugin that dies soon after every start
// is restarted with growing delays and then given up on.
func TestCrashLoopBacksOffAndFails(t *testing.T) {
	bins := fixtures.Build(t)
	e := setupWith(t, `plugin "crashy" {
  path = "`+bins.TestPlugin+`"
  env  = { FIXTURE_EXIT_AFTER_MS = "150" }
  restart {
    base_delay   = "100ms"
    max_delay    = "2s"
    jitter       = 0
    max_attempts = 3
  }
}`)
	cmd := exec.Command(e.bins.Switchboard, "serve", "--config", e.config)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var logs fixtures.Buffer
	cmd.Stderr = &logs
	cmd.Env = append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=info")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	}()
	eventually(20*time.Second, func() bool { return strings.Contains(logs.String(), "server failed: giving up: server=crashy") })
	out := logs.String()
	if !strings.Contains(out, "server failed: giving up: server=crashy") {
		t.Fatalf("crashy never failed; logs:\n%s", out)
	}
	var delays []time.Duration
	for _, m := range reconnectLogRE.FindAllStringSubmatch(out, -1) {
		d, err := time.ParseDuration(m[2])
		if err != nil {
			t.Fatalf("bad delay %q", m[2])
		}
		delays = append(delays, d)
	}
	if len(delays) != 3 {
		t.Fatalf("saw %d reconnect attempts, want 3:\n%s", len(delays), out)
	}
	for i := 1; i < len(delays); i++ {
		if delays[i] <= delays[i-1] {
			t.Errorf("delays %v do not grow", delays)
		}
	}
	// A failed server makes status exit non-zero, for scripts, after the
	// whole report.
	for _, args := range [][]string{{"status", "--config", e.config}, {"status", "--json", "--config", e.config}} {
		out, errOut, code := run(t, e, args...)
		if code != 1 || !strings.Contains(errOut, "1 server(s) failed: crashy") || !strings.Contains(out, "hello") {
			t.Errorf("%v with a failed server = %d, %q, %q; want exit 1 naming crashy after the full report", args, code, out, errOut)
		}
	}
}

// TestInterruptCancelsCalls: SIGINT on serve cancels in-flight calls at
// once instead of waiting for them.
func TestInterruptCancelsCalls(t *testing.T) {
	e := setupWith(t, `shutdown_grace = "1m"`)
	c, cmd := mcpClient(t, e)
	initialize(t, c)
	started := watchProgress(c)
	go func() {
		_, _ = callTool(t.Context(), c, "fx__sleep", map[string]any{"ms": 60000}, "in-flight")
	}()
	started.waitStarted(t, "in-flight")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop promptly after SIGINT (shutdown_grace is 1m: the call was waited for, not cancelled)")
	}
	if _, err := os.Stat(e.marker); err != nil {
		t.Error("the in-flight call's handler never saw the cancellation")
	}
}

// TestHungPluginIsReplaced: a plugin that stops answering (SIGSTOP) fails
// its health check and is replaced.
func TestHungPluginIsReplaced(t *testing.T) {
	e := setupWith(t, `restart {
  base_delay      = "100ms"
  health_interval = "500ms"
  health_timeout  = "300ms"
}`)
	c, _ := mcpClient(t, e)
	initialize(t, c)
	res, err := callTool(t.Context(), c, "fx__instance", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := resultText(res)
	pid := pids(status(t, e))["fx"] // its process group, as the host sees it
	if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	if !eventually(15*time.Second, func() bool {
		res, err := callTool(t.Context(), c, "fx__instance", nil, nil)
		return err == nil && !res.IsError && resultText(res) != first
	}) {
		t.Fatal("the hung plugin was never replaced")
	}
	if alive := fixtures.WaitGone([]int{pid}, 5*time.Second); len(alive) > 0 {
		t.Errorf("the hung plugin %d was replaced but is still alive", pid)
	}
}

// TestSlowPluginJoinsLater: a plugin whose handshake takes long does not
// hold up the host: initialize is answered with the servers that are up,
// the slow one shows as starting, and it joins with list_changed.
func TestSlowPluginJoinsLater(t *testing.T) {
	bins := fixtures.Build(t)
	e := setupWith(t, `start_wait = "3s"
plugin "slow" {
  path = "`+bins.TestPlugin+`"
  env  = { FIXTURE_START_DELAY_MS = "9000" }
}`)
	c, _ := mcpClient(t, e)
	changed := make(chan struct{}, 8)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/tools/list_changed" {
			changed <- struct{}{}
		}
	})
	initialize(t, c)
	has := func(name string) bool {
		res, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range res.Tools {
			if tool.Name == name {
				return true
			}
		}
		return false
	}
	if has("slow__echo") {
		t.Fatal("initialize waited for the slow plugin")
	}
	if !has("hello__greet") {
		t.Error("the servers that were up are not listed")
	}
	st := status(t, e)
	for _, s := range st.Servers {
		if s.Name == "slow" && s.Status != "starting" {
			t.Errorf("slow is %q, want starting", s.Status)
		}
	}
	select {
	case <-changed:
	case <-time.After(60 * time.Second):
		t.Fatal("no list_changed when the slow plugin came up")
	}
	if !eventually(10*time.Second, func() bool { return has("slow__echo") }) {
		t.Error("the slow plugin's tools never appeared")
	}
}

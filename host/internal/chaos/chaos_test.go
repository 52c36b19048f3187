// Package chaos is `make chaos`: callers over stdio and over HTTP at once,
// against two hosts on one config, while the plugins and the external
// server behind them are SIGKILLed and SIGSTOPped, print garbage on
// stdout, flood stderr and exhaust their memory, and while the config is
// reloaded; it reports what a user would count and fails on any call left
// unanswered, any process left behind, or growth beyond the bounds it
// states. It is not part of `make test` (SWITCHBOARD_CHAOS=1 runs it; its
// length is bounded).
package chaos

import (
	"bufio"
	"context"
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

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

func TestMain(m *testing.M) { fixtures.Main(m) }

// The bounds the run holds the hosts to, between a reading before the
// faults and one after them, in the same state (same servers, same
// sessions open, no call running).
const (
	rssFactor      = 2        // RSS after ≤ rssFactor × before + rssSlackKB
	rssSlackKB     = 50 << 10 // 50 MB
	goroutineSlack = 25       // goroutines after ≤ before + goroutineSlack
	callTimeout    = 60 * time.Second
	warmUp         = 5 * time.Second // the same load, before the first reading
)

// counts are one front end's calls.
type counts struct{ sent, ok, failed, unanswered atomic.Int64 }

func (c *counts) String() string {
	return fmt.Sprintf("sent %d, answered with a result %d, answered with an error %d, unanswered %d",
		c.sent.Load(), c.ok.Load(), c.failed.Load(), c.unanswered.Load())
}

// call makes one call, bounded so that one never answered is counted as
// such, and returns the result's text or the error's.
func call(c *client.Client, n *counts, tool string, args map[string]any) (string, bool) {
	n.sent.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	switch {
	case ctx.Err() != nil:
		n.unanswered.Add(1)
		return "unanswered", false
	case err != nil:
		n.failed.Add(1)
		return err.Error(), false
	case res.IsError:
		n.failed.Add(1)
		return text(res), false
	}
	n.ok.Add(1)
	return text(res), true
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if t, ok := c.(mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// workload is what the callers call in turn: every server, each through
// the same host.
var workload = []string{"fx__echo", "fx__echo", "ext__echo", "noisy__echo", "hog__echo"}

// hammer runs one caller per client until stop.
func hammer(clients []*client.Client, stop <-chan struct{}, n *counts) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := i; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				call(c, n, workload[k%len(workload)], map[string]any{"text": strconv.Itoa(k)})
			}
		}()
	}
	return &wg
}

func rssKB(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	return 0
}

// hostStatus is one host's part of `switchboard status --json`.
type hostStatus struct {
	PID  int `json:"pid"`
	Host struct {
		Goroutines int `json:"goroutines"`
	} `json:"host"`
	Servers []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
		PID    int    `json:"pid"`
	} `json:"servers"`
}

// world is the run: the config, the binaries, the two hosts.
type world struct {
	t    *testing.T
	bins fixtures.Binaries
	cfg  string
	dir  string
}

func (w *world) status() []hostStatus {
	out, _ := exec.Command(w.bins.Switchboard, "status", "--json", "--config", w.cfg).Output()
	var all []hostStatus
	_ = json.Unmarshal(out, &all)
	return all
}

// serverPIDs waits (up to 15 s) for server name to be ready in both hosts
// (a fault is meant for a live server, not one still restarting from the
// last), and returns its pids; fewer when it was not ready in time.
func (w *world) serverPIDs(name string) []int {
	var pids []int
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		pids = pids[:0]
		for _, h := range w.status() {
			for _, s := range h.Servers {
				if s.Name == name && s.Status == "ready" && s.PID > 0 {
					pids = append(pids, s.PID)
				}
			}
		}
		if len(pids) == 2 {
			break
		}
	}
	return pids
}

// tree is pid and its descendants (a sandboxed server runs under the
// sandbox's init).
func tree(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, fixtures.Children(out[i])...)
	}
	return out
}

// writeConfig writes the config; round changes the noisy plugin's
// environment, so a reload restarts it and keeps the others.
func (w *world) writeConfig(round int) {
	body := fmt.Sprintf(`project_dir = "p"
data_dir = "state"
watch_config = false
duplicate_call_limit = 0
call_timeout = "5s"
permissions { default = "allow" }
restart {
  base_delay = "100ms"
  max_delay = "1s"
  max_attempts = 0
  health_interval = "1s"
  health_timeout = "1s"
}
plugin "fx" { path = %[1]q }
plugin "noisy" {
  path = %[1]q
  env = { ROUND = "%[3]d" }
}
plugin "hog" {
  path = %[1]q
  sandbox { memory = "64MiB" }
}
external "ext" { command = %[2]q }
`, w.bins.TestPlugin, w.bins.MCPServer, round)
	if err := os.WriteFile(w.cfg, []byte(body), 0o600); err != nil {
		w.t.Fatal(err)
	}
}

func initialize(t *testing.T, c *client.Client) {
	t.Helper()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	init.Params.ClientInfo = mcp.Implementation{Name: "chaos", Version: "1"}
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatal(err)
	}
}

// startStdio starts a host over stdio with its client.
func (w *world) startStdio(log io.Writer) (*client.Client, *exec.Cmd) {
	var host *exec.Cmd
	c, err := client.NewStdioMCPClientWithOptions(w.bins.Switchboard, nil, []string{"serve", "--config", w.cfg},
		transport.WithCommandFunc(func(ctx context.Context, command string, _ []string, args []string) (*exec.Cmd, error) {
			host = exec.CommandContext(ctx, command, args...)
			host.Env = append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=warn")
			host.Stderr = log
			return host, nil
		}))
	if err != nil {
		w.t.Fatal(err)
	}
	if err := c.Start(w.t.Context()); err != nil {
		w.t.Fatal(err)
	}
	initialize(w.t, c)
	return c, host
}

// startHTTP starts a host serving HTTP on a free loopback port and
// returns it with its URL.
func (w *world) startHTTP(log io.Writer) (*exec.Cmd, string) {
	host := exec.Command(w.bins.Switchboard, "serve", "--config", w.cfg, "--http", "127.0.0.1:0")
	host.Env = append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=warn")
	stderr, err := host.StderrPipe()
	if err != nil {
		w.t.Fatal(err)
	}
	if err := host.Start(); err != nil {
		w.t.Fatal(err)
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if u, ok := strings.CutPrefix(line, "switchboard: serving MCP at "); ok {
				urls <- u
			}
			_, _ = io.WriteString(log, line+"\n")
		}
		_, _ = io.Copy(log, stderr)
	}()
	select {
	case u := <-urls:
		return host, u
	case <-time.After(time.Minute):
		_ = host.Process.Kill()
		_ = host.Wait()
		w.t.Fatal("the HTTP host did not say where it serves within a minute")
	}
	return nil, ""
}

func (w *world) httpClient(url string) *client.Client {
	tr, err := transport.NewStreamableHTTP(url)
	if err != nil {
		w.t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithLegacyProtocolOnly())
	if err := c.Start(w.t.Context()); err != nil {
		w.t.Fatal(err)
	}
	initialize(w.t, c)
	return c
}

// waitReady waits until both hosts have every server ready.
func (w *world) waitReady(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		all := w.status()
		ready := len(all) == 2
		for _, h := range all {
			for _, s := range h.Servers {
				ready = ready && s.Status == "ready"
			}
		}
		if ready {
			return true
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false
}

// reading is one host's figures.
type reading struct{ rssKB, goroutines int }

func (w *world) read(pids []int) map[int]reading {
	out := map[int]reading{}
	for _, h := range w.status() {
		if slices.Contains(pids, h.PID) {
			out[h.PID] = reading{rssKB(h.PID), h.Host.Goroutines}
		}
	}
	return out
}

// TestChaos is the chaos run. SWITCHBOARD_CHAOS=1 enables it;
// SWITCHBOARD_CHAOS_SECONDS sets the length of the faults (default 90);
// SWITCHBOARD_CHAOS_LOGS=DIR keeps the hosts' logs there, and
// SWITCHBOARD_CHAOS_DUMP=1 ends the hosts with SIGQUIT after the last
// reading, so their logs end with every goroutine's stack (for a leak).
func TestChaos(t *testing.T) {
	if os.Getenv("SWITCHBOARD_CHAOS") == "" {
		t.Skip("make chaos runs it (SWITCHBOARD_CHAOS=1)")
	}
	secs := 90
	if n, err := strconv.Atoi(os.Getenv("SWITCHBOARD_CHAOS_SECONDS")); err == nil && n > 0 {
		secs = n
	}
	const callers = 32
	w := &world{t: t, bins: fixtures.Build(t), dir: t.TempDir()}
	w.cfg = filepath.Join(w.dir, "config.hcl")
	if err := os.Mkdir(filepath.Join(w.dir, "p"), 0o755); err != nil {
		t.Fatal(err)
	}
	w.writeConfig(0)
	logDir := w.dir
	if d := os.Getenv("SWITCHBOARD_CHAOS_LOGS"); d != "" {
		logDir = d // kept after the run
	}
	stdioLog, err := os.Create(filepath.Join(logDir, "stdio-host.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer stdioLog.Close()
	httpLog, err := os.Create(filepath.Join(logDir, "http-host.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer httpLog.Close()

	// Two hosts on the config: one over stdio, one over HTTP.
	sc, stdioHost := w.startStdio(stdioLog)
	httpHost, url := w.startHTTP(httpLog)
	defer func() { // whatever happened, no host is left
		_ = httpHost.Process.Kill()
		_ = stdioHost.Process.Kill()
	}()
	var httpClients []*client.Client
	for range callers {
		httpClients = append(httpClients, w.httpClient(url))
	}
	faultHTTP := w.httpClient(url)
	if !w.waitReady(time.Minute) {
		t.Fatalf("the servers were not all ready within a minute: %+v", w.status())
	}
	hosts := []int{stdioHost.Process.Pid, httpHost.Process.Pid}
	stdioClients := make([]*client.Client, callers) // one stdio client, shared
	for i := range stdioClients {
		stdioClients[i] = sc
	}
	// Warm up without faults, so that what the hosts keep by design for
	// the load (idle workers, up to frontend.Workers, connections) is
	// there before the first reading, and growth after means a leak.
	var warm counts
	stop := make(chan struct{})
	wgWarm := []*sync.WaitGroup{hammer(stdioClients, stop, &warm), hammer(httpClients, stop, &warm)}
	time.Sleep(warmUp)
	close(stop)
	for _, wg := range wgWarm {
		wg.Wait()
	}
	time.Sleep(2 * time.Second) // let the hosts settle before the first reading
	before := w.read(hosts)

	stop = make(chan struct{})
	var overStdio, overHTTP, faults counts
	wgStdio := hammer(stdioClients, stop, &overStdio)
	wgHTTP := hammer(httpClients, stop, &overHTTP)

	// The faults, in turn, each on both hosts' servers, for the run's
	// length. A fault made by a call goes through both front ends.
	done := map[string]int{}
	var notes []string
	note := func(s string) {
		if len(notes) < 20 && !slices.Contains(notes, s) {
			notes = append(notes, s)
		}
	}
	both := func(tool string, args map[string]any) []string {
		var out []string
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, c := range []*client.Client{sc, faultHTTP} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, _ := call(c, &faults, tool, args)
				mu.Lock()
				out = append(out, s)
				mu.Unlock()
			}()
		}
		wg.Wait()
		return out
	}
	signal := func(name string, sig syscall.Signal) int {
		n := 0
		for _, pid := range w.serverPIDs(name) {
			pids := []int{pid}
			if sig == syscall.SIGSTOP {
				pids = tree(pid)
			}
			for _, p := range pids {
				if syscall.Kill(p, sig) == nil {
					n++
				}
			}
			if sig == syscall.SIGSTOP {
				time.AfterFunc(3*time.Second, func() {
					for _, p := range pids {
						_ = syscall.Kill(p, syscall.SIGCONT)
					}
				})
			}
		}
		return n
	}
	steps := []struct {
		name string
		do   func() bool
	}{
		{"SIGKILL fx", func() bool { return signal("fx", syscall.SIGKILL) > 0 }},
		{"SIGSTOP fx 3s", func() bool { return signal("fx", syscall.SIGSTOP) > 0 }},
		{"garbage on stdout", func() bool {
			w.serverPIDs("noisy")
			w.serverPIDs("ext")
			for _, s := range both("noisy__fault", map[string]any{"kind": "stdout", "mb": 4}) {
				note("noisy stdout: " + s)
			}
			for _, s := range both("ext__fault", map[string]any{"kind": "stdout", "mb": 32}) {
				note("ext stdout: " + s)
			}
			return true
		}},
		{"SIGKILL ext", func() bool { return signal("ext", syscall.SIGKILL) > 0 }},
		{"stderr flood", func() bool {
			w.serverPIDs("noisy")
			w.serverPIDs("ext")
			both("noisy__fault", map[string]any{"kind": "stderr", "mb": 16})
			both("ext__fault", map[string]any{"kind": "stderr", "mb": 16})
			return true
		}},
		{"SIGSTOP ext 3s", func() bool { return signal("ext", syscall.SIGSTOP) > 0 }},
		{"memory exhausted", func() bool {
			w.serverPIDs("hog")
			ok := true
			for _, s := range both("hog__fault", map[string]any{"kind": "memory"}) {
				if !strings.Contains(s, "memory limit of 64MiB") {
					ok = false
					note("hog: " + s)
				}
			}
			return ok
		}},
		{"reload", func() bool {
			w.writeConfig(done["reload"] + 1)
			out, err := exec.Command(w.bins.Switchboard, "reload", "--config", w.cfg).CombinedOutput()
			if err != nil {
				note("reload: " + string(out))
			}
			return err == nil
		}},
	}
	failedFaults := map[string]int{}
	deadline := time.Now().Add(time.Duration(secs) * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		s := steps[i%len(steps)]
		if s.do() {
			done[s.name]++
		} else {
			failedFaults[s.name]++
		}
		time.Sleep(1500 * time.Millisecond)
	}
	close(stop)
	wgStdio.Wait()
	wgHTTP.Wait()

	// Settle: the last restarts; then the hosts are read in the state
	// they were first read in.
	ready := w.waitReady(time.Minute)
	time.Sleep(3 * time.Second)
	after := w.read(hosts)
	if os.Getenv("SWITCHBOARD_CHAOS_DUMP") != "" {
		// The hosts' goroutines, into their logs (SIGQUIT ends them).
		_ = syscall.Kill(hosts[0], syscall.SIGQUIT)
		_ = syscall.Kill(hosts[1], syscall.SIGQUIT)
		time.Sleep(2 * time.Second)
	}
	stdioLogSize, httpLogSize := fileSize(stdioLog.Name()), fileSize(httpLog.Name())

	for _, c := range append(httpClients, faultHTTP) {
		_ = c.Close()
	}
	_ = syscall.Kill(httpHost.Process.Pid, syscall.SIGTERM)
	_ = sc.Close()
	waitExit := func(cmd *exec.Cmd) {
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Errorf("host %d did not exit within 30 s of its client leaving", cmd.Process.Pid)
		}
	}
	waitExit(stdioHost)
	waitExit(httpHost)
	left := fixtures.WaitGone(fixtures.ProcessesMatching(w.bins.Dir), 5*time.Second)

	var b strings.Builder
	fmt.Fprintf(&b, "chaos: %d s, %d callers over stdio and %d over HTTP (two hosts on one config), at once\n", secs, callers, callers)
	fmt.Fprintf(&b, "  warm-up (%s, no faults, before the first reading): %s\n", warmUp, warm.String())
	fmt.Fprintf(&b, "  faults done (each on both hosts): %v\n", done)
	if len(failedFaults) > 0 {
		fmt.Fprintf(&b, "  faults that did not go as expected: %v\n", failedFaults)
	}
	fmt.Fprintf(&b, "  calls over stdio: %s\n", overStdio.String())
	fmt.Fprintf(&b, "  calls over HTTP:  %s\n", overHTTP.String())
	fmt.Fprintf(&b, "  fault calls:      %s\n", faults.String())
	for i, name := range []string{"stdio", "HTTP"} {
		pid := hosts[i]
		fmt.Fprintf(&b, "  %s host: RSS %d kB before, %d kB after (bound %d); goroutines %d before, %d after (bound %d)\n",
			name, before[pid].rssKB, after[pid].rssKB, rssFactor*before[pid].rssKB+rssSlackKB,
			before[pid].goroutines, after[pid].goroutines, before[pid].goroutines+goroutineSlack)
	}
	fmt.Fprintf(&b, "  host logs (level warn): stdio %d kB, HTTP %d kB\n", stdioLogSize>>10, httpLogSize>>10)
	fmt.Fprintf(&b, "  processes left after the hosts exited: %d\n", len(left))
	for _, n := range notes {
		fmt.Fprintf(&b, "  note: %.300s\n", n)
	}
	fmt.Print(b.String())

	for name, n := range map[string]*counts{"warm-up": &warm, "stdio": &overStdio, "HTTP": &overHTTP, "fault": &faults} {
		if u := n.unanswered.Load(); u != 0 {
			t.Errorf("%d %s calls were never answered", u, name)
		}
	}
	if len(left) != 0 {
		t.Errorf("processes left: %v", left)
		fixtures.Kill(left)
	}
	if !ready {
		t.Error("the servers were not all ready again within a minute of the faults' end")
	}
	for i, name := range []string{"stdio", "HTTP"} {
		b, a := before[hosts[i]], after[hosts[i]]
		if a.rssKB == 0 || a.rssKB > rssFactor*b.rssKB+rssSlackKB {
			t.Errorf("%s host: RSS %d kB before, %d kB after: beyond the bound", name, b.rssKB, a.rssKB)
		}
		if a.goroutines == 0 || a.goroutines > b.goroutines+goroutineSlack {
			t.Errorf("%s host: goroutines %d before, %d after: beyond the bound", name, b.goroutines, a.goroutines)
		}
	}
	if overStdio.ok.Load() == 0 || overHTTP.ok.Load() == 0 {
		t.Error("no call succeeded on one of the front ends")
	}
	if len(failedFaults) > 0 {
		t.Errorf("faults that did not go as expected: %v", failedFaults)
	}
	if t.Failed() {
		for _, f := range []string{stdioLog.Name(), httpLog.Name()} {
			fmt.Printf("--- end of %s:\n%s\n", filepath.Base(f), tail(f, 40))
		}
	}
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		if len(l) > 400 {
			lines[i] = l[:400] + "…"
		}
	}
	return strings.Join(lines, "\n")
}

package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/tuning"
)

// mcpProc is an MCP client connected over stdio to a process it started.
type mcpProc struct {
	c   *client.Client
	cmd *exec.Cmd
}

func startMCP(b *testing.B, env []string, command string, args ...string) (*mcpProc, time.Duration) {
	b.Helper()
	p := &mcpProc{}
	start := time.Now()
	c, err := client.NewStdioMCPClientWithOptions(command, nil, args,
		transport.WithCommandFunc(func(ctx context.Context, command string, _ []string, args []string) (*exec.Cmd, error) {
			p.cmd = exec.CommandContext(ctx, command, args...)
			p.cmd.Env = append(append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=error"), env...)
			return p.cmd, nil
		}))
	if err != nil {
		b.Fatal(err)
	}
	initClient(b, c)
	if _, err := c.ListTools(context.Background(), mcp.ListToolsRequest{}); err != nil {
		b.Fatal(err)
	}
	p.c = c
	b.Cleanup(func() { _ = c.Close() })
	return p, time.Since(start)
}

func (p *mcpProc) echo(tool string) func(context.Context) error {
	return func(ctx context.Context) error {
		req := mcp.CallToolRequest{}
		req.Params.Name = tool
		req.Params.Arguments = map[string]any{"text": "ping"}
		res, err := p.c.CallTool(ctx, req)
		if err == nil && res.IsError {
			err = fmt.Errorf("%s: %v", tool, res.Content)
		}
		return err
	}
}

func (p *mcpProc) list() func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := p.c.ListTools(ctx, mcp.ListToolsRequest{})
		return err
	}
}

// startHTTP runs a command that announces an http:// URL (the fixture on
// stdout, switchboard on stderr) and returns the URL.
func startHTTP(b *testing.B, command string, args ...string) string {
	b.Helper()
	url, _ := startHTTPProc(b, command, args...)
	return url
}

// startHTTPProc is startHTTP that also returns the process's pid.
func startHTTPProc(b *testing.B, command string, args ...string) (string, int) {
	b.Helper()
	cmd := exec.Command(command, args...)
	cmd.Env = append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=error")
	pr, pw, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	pw.Close()
	b.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait(); pr.Close() })
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if i := strings.Index(sc.Text(), "http://"); i >= 0 {
			url := strings.TrimSpace(sc.Text()[i:])
			go func() {
				for sc.Scan() {
				}
			}()
			return url, cmd.Process.Pid
		}
	}
	b.Fatalf("%s announced no URL", command)
	return "", 0
}

// initClient starts an MCP client and runs the handshake.
func initClient(b *testing.B, c *client.Client) {
	b.Helper()
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "bench", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		b.Fatal(err)
	}
}

func httpClient(b *testing.B, url string) *mcpProc {
	b.Helper()
	c, err := client.NewStreamableHttpClient(url)
	if err != nil {
		b.Fatal(err)
	}
	initClient(b, c)
	b.Cleanup(func() { _ = c.Close() })
	return &mcpProc{c: c}
}

// rssKB reads a process's resident set size.
func rssKB(pid int) int { return procKB(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:") }

// steadyRSSKB is a process's RSS as it stays: the median of nine readings
// over a second. An idle host's periodic checks (every 2 s) map pages of
// its binary for the ~100 ms until it unmaps them again; a single reading
// that fell in one read 3-5 MB more, and readings a multiple of 2 s apart
// fell in them together.
func steadyRSSKB(pid int) int {
	var kb []int
	for i := range 9 {
		if i > 0 {
			time.Sleep(110 * time.Millisecond)
		}
		kb = append(kb, rssKB(pid))
	}
	slices.Sort(kb)
	return kb[len(kb)/2]
}

// rssParts says what a process's RSS is made of: its heap and other
// anonymous memory, and file pages (its binary's).
func rssParts(pid int) string {
	status := fmt.Sprintf("/proc/%d/status", pid)
	return fmt.Sprintf(" (anon %d + file %d kB)", procKB(status, "RssAnon:"), procKB(status, "RssFile:"))
}

// procKB reads the kB figure on the line of a /proc file that starts with
// key (0 when there is none).
func procKB(file, key string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return kb
		}
	}
	return 0
}

// writeConfig writes a config whose servers start with the host (the
// figures of BenchmarkHost are for running servers; BenchmarkLazy
// compares the start modes).
func writeConfig(b *testing.B, body string) string { return writeConfigStart(b, "eager", body) }

// writeConfigStart writes a config with the top-level start mode start.
func writeConfigStart(b *testing.B, start, body string) string {
	dir := b.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "p"), 0o755); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "config.hcl")
	cfg := "project_dir = \"p\"\ndata_dir = \"state\"\nduplicate_call_limit = 0\nwatch_config = false\nstart = \"" + start + "\"\n" + body
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

type row struct {
	name, figure, baseline, ratio string
}

// BenchmarkHost measures the host against the direct path, every figure
// beside a baseline taken in the same run, and ends with the ratios the
// targets are stated in.
func BenchmarkHost(b *testing.B) {
	if b.N < 100 {
		return
	}
	bins := fixtures.Build(b)
	ctx := context.Background()
	var rows []row
	add := func(name, fig, base, ratio string) { rows = append(rows, row{name, fig, base, ratio}) }
	ratio := func(a, b float64) string { return fmt.Sprintf("%.2fx", a/b) }
	summary := map[string]float64{}

	// 1. An echo tool called by an MCP client over stdio: an mcp-go server
	// directly, and an SDK plugin through switchboard serve.
	direct, _ := startMCP(b, nil, bins.MCPServer)
	// The direct server tuned as switchboard is (one scheduler slot), to
	// show what that tuning alone is worth.
	directOne, _ := startMCP(b, []string{"GOMAXPROCS=1"}, bins.MCPServer)
	hostCfg := writeConfig(b, fmt.Sprintf("plugin \"fx\" { path = %q }\n", bins.TestPlugin))
	profCfg := hostCfg
	if p := os.Getenv("BENCH_PLUGIN_CPUPROFILE"); p != "" {
		profCfg = writeConfig(b, fmt.Sprintf("plugin \"fx\" {\n  path = %q\n  env = { SWITCHBOARD_PLUGIN_CPUPROFILE = %q }\n}\n", bins.TestPlugin, p))
	}
	var hostEnv []string
	if e := os.Getenv("BENCH_HOST_ENV"); e != "" {
		hostEnv = strings.Fields(e)
	}
	profEnv := hostEnv
	if p := os.Getenv("BENCH_HOST_CPUPROFILE"); p != "" {
		profEnv = append(slices.Clone(hostEnv), "SWITCHBOARD_CPUPROFILE="+p)
	}
	host, _ := startMCP(b, profEnv, bins.Switchboard, "serve", "--config", profCfg)
	hostPID := host.cmd.Process.Pid
	// The floor of the design at one caller, measured beside it: a minimal
	// mcp-go stdio server whose tool calls a plugin process over gRPC (the
	// test plugin in bare mode, the host's protocol client; no go-plugin,
	// TLS, guards or sandbox: the mcpserver fixture's gateway mode).
	minimal, _ := startMCP(b, nil, bins.MCPServer, "--gateway-plugin", bareSocket(b, bins.TestPlugin))
	startRSS := rssKB(hostPID)
	calls := 0
	hostPlugins := descendants(hostPID) // a confined plugin runs under the sandbox helper
	for _, callers := range []int{1, 8, 32} {
		n := map[int]int{1: 6000, 8: 8000, 32: 12000}[callers]
		paths := []func(context.Context) error{direct.echo("echo"), host.echo("fx__echo")}
		if callers == 1 {
			paths = append(paths, directOne.echo("echo"), minimal.echo("echo"))
		}
		st := interleave(b, n, callers, 6, paths...)
		d, h := st[0], st[1]
		if callers == 1 {
			add("direct server tuned alike (GOMAXPROCS=1) p50", us(st[2].p50), us(d.p50)+" (direct, as shipped)", ratio(float64(st[2].p50), float64(d.p50)))
			add("minimal mcp-go server + plugin process p50", us(st[3].p50), us(d.p50)+" (direct, as shipped)", ratio(float64(st[3].p50), float64(d.p50)))
			summary["minimal p50 / direct, 1 caller"] = float64(st[3].p50) / float64(d.p50)
		}
		calls += n + 200
		add(fmt.Sprintf("MCP echo p50, %d callers", callers), us(h.p50), us(d.p50), ratio(float64(h.p50), float64(d.p50)))
		add(fmt.Sprintf("MCP echo p99, %d callers", callers), us(h.p99), us(d.p99), ratio(float64(h.p99), float64(d.p99)))
		add(fmt.Sprintf("MCP echo calls/s, %d callers", callers), fmt.Sprintf("%.0f", h.perSec), fmt.Sprintf("%.0f", d.perSec), ratio(h.perSec, d.perSec))
		if callers == 1 {
			summary["p50 through host / direct, 1 caller"] = float64(h.p50) / float64(d.p50)
			summary["direct p50 us"] = float64(d.p50.Microseconds())
		}
		if callers == 32 {
			summary["calls/s through host / direct, 32 callers"] = h.perSec / d.perSec
		}
	}
	// CPU per call at 32 callers: where the time goes.
	{
		const n = 8000
		perCall := func(ticks int) float64 { return float64(ticks) * 10000 / n } // µs (100 Hz ticks)
		d0, c0 := cpuTicks(direct.cmd.Process.Pid), cpuTicks(os.Getpid())
		measure(b, n, 32, direct.echo("echo"))
		d1, c1 := cpuTicks(direct.cmd.Process.Pid), cpuTicks(os.Getpid())
		h0, p0 := cpuTicks(hostPID), cpuTicks(hostPlugins...)
		measure(b, n, 32, host.echo("fx__echo"))
		h1, p1 := cpuTicks(hostPID), cpuTicks(hostPlugins...)
		calls += n + 200
		add("CPU per call, 32 callers: host", fmt.Sprintf("%.0f µs", perCall(h1-h0)), fmt.Sprintf("%.0f µs (direct server)", perCall(d1-d0)), ratio(float64(h1-h0), float64(d1-d0)))
		add("CPU per call, 32 callers: plugin", fmt.Sprintf("%.0f µs", perCall(p1-p0)), "-", "-")
		add("CPU per call, 32 callers: MCP client", fmt.Sprintf("%.0f µs", perCall(c1-c0)), "-", "-")
	}
	hops := func() {
		// 2. The host's own hop against a bare gRPC unary round trip,
		// measured here with one scheduler slot as switchboard serve runs
		// (the baselines get the same).
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
		routed, carried := hostCall(b, bins.TestPlugin)
		// The bare gRPC server as shipped (Go's defaults), and the same
		// with one scheduler slot as an SDK plugin runs: the conservative
		// baseline, shown beside it.
		st := interleave(b, 6000, 1, 6, bareClient(b, bins.TestPlugin, "GOMAXPROCS=1"), routed, carried, socketPingPong(b), bareClient(b, bins.TestPlugin))
		bs, hs, cs, ps, bd := st[0], st[1], st[2], st[3], st[4]
		add("router -> plugin hop p50 (gRPC stream)", us(hs.p50), us(bd.p50)+" (bare gRPC unary)", ratio(float64(hs.p50), float64(bd.p50)))
		add("  vs a bare server tuned like a plugin", us(hs.p50), us(bs.p50)+" (same, GOMAXPROCS=1)", ratio(float64(hs.p50), float64(bs.p50)))
		add("  the carrier alone (no guards)", us(cs.p50), us(bs.p50)+" (same, GOMAXPROCS=1)", ratio(float64(cs.p50), float64(bs.p50)))
		summary["host hop / bare gRPC unary, p50"] = float64(hs.p50) / float64(bd.p50)
		summary["host hop / tuned bare gRPC unary, p50"] = float64(hs.p50) / float64(bs.p50)
		conn := bareConn(b, bins.TestPlugin, "GOMAXPROCS=1")
		st = interleave(b, 6000, 1, 6, rawStream(b, conn), protocolClient(conn))
		rs, pc := st[0], st[1]
		add("protocol client, no go-plugin/TLS, p50", us(pc.p50), us(rs.p50)+" (raw stream ping-pong)", ratio(float64(pc.p50), float64(rs.p50)))
		add("raw gRPC stream ping-pong p50", us(rs.p50), us(bs.p50)+" (same, GOMAXPROCS=1)", ratio(float64(rs.p50), float64(bs.p50)))
		add("raw socket-pair ping-pong p50 (floor)", us(ps.p50), us(bs.p50)+" (same, GOMAXPROCS=1)", ratio(float64(ps.p50), float64(bs.p50)))
		if d1, ok := summary["direct p50 us"]; ok {
			lb := (d1 + float64(ps.p50.Microseconds())) / d1
			add("lower bound for p50 via any plugin process", fmt.Sprintf("%.0f µs", d1+float64(ps.p50.Microseconds())), fmt.Sprintf("%.0f µs (direct)", d1), fmt.Sprintf("%.2fx", lb))
			summary["lower bound p50 / direct"] = lb
		}
	}
	if os.Getenv("BENCH_ONLY_ECHO") != "" {
		hops()
		fmt.Printf("\n%s\n", idleNote())
		for _, r := range rows {
			fmt.Printf("%-44s %18s %34s %8s\n", r.name, r.figure, r.baseline, r.ratio)
		}
		_ = host.c.Close()
		time.Sleep(500 * time.Millisecond)
		return
	}
	// The same over streamable HTTP.
	{
		dURL := startHTTP(b, bins.MCPServer, "--http", "127.0.0.1:0")
		hURL := startHTTP(b, bins.Switchboard, "serve", "--config", hostCfg, "--http", "127.0.0.1:0")
		dc, hc := httpClient(b, dURL), httpClient(b, hURL)
		for _, callers := range []int{1, 32} {
			n := map[int]int{1: 2000, 32: 6000}[callers]
			d := measure(b, n, callers, dc.echo("echo"))
			h := measure(b, n, callers, hc.echo("fx__echo"))
			add(fmt.Sprintf("MCP echo over HTTP p50, %d callers", callers), us(h.p50), us(d.p50), ratio(float64(h.p50), float64(d.p50)))
			add(fmt.Sprintf("MCP echo over HTTP calls/s, %d callers", callers), fmt.Sprintf("%.0f", h.perSec), fmt.Sprintf("%.0f", d.perSec), ratio(h.perSec, d.perSec))
		}
	}

	// Top up to 20,000 calls for the memory figures.
	for ; calls < 20000; calls++ {
		if err := host.echo("fx__echo")(ctx); err != nil {
			b.Fatal(err)
		}
	}

	hops()

	// 4. Memory after start-up and after 20,000 calls.
	endRSS := rssKB(hostPID)
	var pluginRSS []string
	for _, c := range descendants(hostPID) {
		pluginRSS = append(pluginRSS, fmt.Sprintf("%d", rssKB(c)))
	}
	directRSS := rssKB(direct.cmd.Process.Pid)
	add("host RSS after start-up", kb(startRSS), "-", "-")
	add(fmt.Sprintf("host RSS after %d calls", calls), kb(endRSS), kb(directRSS)+" (direct mcp-go server)", ratio(float64(endRSS), float64(directRSS)))
	add("RSS of the processes under the host", strings.Join(pluginRSS, ", ")+" kB", "-", "-")
	summary["host RSS after 20,000 calls, MB"] = float64(endRSS) / 1024
	// The same once the host has had no calls for a while: it gives
	// memory back then (tuning.Quiet).
	time.Sleep(tuning.QuietDelay + time.Second)
	quietRSS := rssKB(hostPID)
	add(fmt.Sprintf("host RSS %s after the calls", tuning.QuietDelay+time.Second), kb(quietRSS), kb(rssKB(direct.cmd.Process.Pid))+" (direct mcp-go server)", ratio(float64(quietRSS), float64(rssKB(direct.cmd.Process.Pid))))
	summary["quiet host RSS, MB"] = float64(quietRSS) / 1024

	// 3. Start-up: exec to tools listed.
	var four, oneDirect []time.Duration
	fourCfg := writeConfig(b, "builtin \"filesystem\" {}\nbuiltin \"bash\" {}\nbuiltin \"git\" {}\nbuiltin \"web\" {}\n")
	for i := 0; i < 7; i++ {
		p, d := startMCP(b, nil, bins.Switchboard, "serve", "--config", fourCfg)
		four = append(four, d)
		_ = p.c.Close()
		_, dd := startMCP(b, nil, bins.MCPServer)
		oneDirect = append(oneDirect, dd)
	}
	add("start-up, four built-ins (median)", ms(median(four)), ms(median(oneDirect))+" (one mcp-go server)", ratio(float64(median(four)), float64(median(oneDirect))))
	summary["start-up of the four built-ins, ms"] = float64(median(four).Microseconds()) / 1000
	var fifty strings.Builder
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&fifty, "plugin \"p%02d\" { path = %q }\n", i, bins.TestPlugin)
	}
	fiftyCfg := writeConfig(b, fifty.String())
	var fiftyD []time.Duration
	for i := 0; i < 3; i++ {
		p, d := startMCP(b, nil, bins.Switchboard, "serve", "--config", fiftyCfg)
		fiftyD = append(fiftyD, d)
		_ = p.c.Close()
	}
	add("start-up, 50 plugins (median)", ms(median(fiftyD)), ms(median(oneDirect))+" (one mcp-go server)", ratio(float64(median(fiftyD)), float64(median(oneDirect))))

	// 5. tools/list with 100 servers of 50 tools each.
	var hundred strings.Builder
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&hundred, "plugin \"s%03d\" {\n  path = %q\n  env = { FIXTURE_EXTRA_TOOLS = \"40\" }\n}\n", i, bins.TestPlugin)
	}
	big, _ := startMCP(b, nil, bins.Switchboard, "serve", "--config", writeConfig(b, hundred.String()))
	bigDirect, _ := startMCP(b, []string{"FIXTURE_TOOLS=4998"}, bins.MCPServer)
	res, err := big.c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		b.Fatal(err)
	}
	ls := measure(b, 50, 1, big.list())
	ld := measure(b, 50, 1, bigDirect.list())
	add(fmt.Sprintf("tools/list, 100 servers, %d tools, p50", len(res.Tools)), ms(ls.p50), ms(ld.p50)+" (one server, 5000 tools)", ratio(float64(ls.p50), float64(ld.p50)))

	fmt.Printf("\n%s\n", idleNote())
	fmt.Printf("%-44s %18s %34s %8s\n", "switchboard vs baseline (same run)", "figure", "baseline", "ratio")
	for _, r := range rows {
		fmt.Printf("%-44s %18s %34s %8s\n", r.name, r.figure, r.baseline, r.ratio)
	}
	fmt.Printf("\nsummary: p50 %.2fx direct (target <= 1.3x; %.2fx is the floor for any plugin process, %.2fx a minimal mcp-go server calling a plugin process); throughput %.2fx direct at 32 callers (target >= 0.8x); hop %.2fx bare gRPC (target <= 0.6x; %.2fx against a bare server tuned like a plugin); start-up %.0f ms (target < 150 ms); host RSS %.1f MB after 20,000 calls, %.1f MB once quiet (target <= 20 MB)\n",
		summary["p50 through host / direct, 1 caller"], summary["lower bound p50 / direct"], summary["minimal p50 / direct, 1 caller"], summary["calls/s through host / direct, 32 callers"], summary["host hop / bare gRPC unary, p50"], summary["host hop / tuned bare gRPC unary, p50"],
		summary["start-up of the four built-ins, ms"], summary["host RSS after 20,000 calls, MB"], summary["quiet host RSS, MB"])
}

// cpuTicks sums user and system CPU ticks (1/100 s) of processes.
func cpuTicks(pids ...int) int {
	total := 0
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+2:])
		if len(f) > 12 {
			u, _ := strconv.Atoi(f[11])
			k, _ := strconv.Atoi(f[12])
			total += u + k
		}
	}
	return total
}

func us(d time.Duration) string { return fmt.Sprintf("%d µs", d.Microseconds()) }
func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
func kb(k int) string           { return fmt.Sprintf("%d kB", k) }

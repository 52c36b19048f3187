package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/tuning"
)

// BenchmarkGateway measures Switchboard as a gateway (issue 19): an
// external mcp-go echo server over stdio behind the HTTP front end and
// behind the stdio front end, and a native plugin behind the HTTP front
// end, each beside the direct path measured in the same run (alternating
// rounds), with CPU per call in host, server and client, and the host's
// RSS after 20,000 calls on both fronts.
func BenchmarkGateway(b *testing.B) {
	if b.N < 100 {
		return
	}
	bins := fixtures.Build(b)
	var rows []row
	add := func(name, fig, base, ratio string) { rows = append(rows, row{name, fig, base, ratio}) }
	ratio := func(a, b float64) string { return fmt.Sprintf("%.2fx", a/b) }
	summary := map[string]float64{}
	extCfg := writeConfig(b, fmt.Sprintf("external \"ext\" { command = %q }\n", bins.MCPServer))
	plugCfg := writeConfig(b, fmt.Sprintf("plugin \"fx\" { path = %q }\n", bins.TestPlugin))

	// Direct paths: the mcp-go echo server over stdio and over HTTP.
	directStdio, _ := startMCP(b, nil, bins.MCPServer)
	dURL, dPID := startHTTPProc(b, bins.MCPServer, "--http", "127.0.0.1:0")
	directHTTP := httpClient(b, dURL)
	// Through the gateway.
	extStdio, _ := startMCP(b, nil, bins.Switchboard, "serve", "--config", extCfg)
	// BENCH_GATEWAY_CPUPROFILE=FILE profiles the host behind which the
	// external server runs over HTTP (where its CPU goes per call).
	if p := os.Getenv("BENCH_GATEWAY_CPUPROFILE"); p != "" {
		b.Setenv("SWITCHBOARD_CPUPROFILE", p)
	}
	extURL, hPID := startHTTPProc(b, bins.Switchboard, "serve", "--config", extCfg, "--http", "127.0.0.1:0")
	os.Unsetenv("SWITCHBOARD_CPUPROFILE")
	extHTTP := httpClient(b, extURL)
	plugURL := startHTTP(b, bins.Switchboard, "serve", "--config", plugCfg, "--http", "127.0.0.1:0")
	plugHTTP := httpClient(b, plugURL)

	type path struct {
		name   string
		call   func(context.Context) error
		base   func(context.Context) error
		baseIs string
	}
	paths := []path{
		{"HTTP front, external stdio server", extHTTP.echo("ext__echo"), directHTTP.echo("echo"), "direct HTTP"},
		{"HTTP front, native plugin", plugHTTP.echo("fx__echo"), directHTTP.echo("echo"), "direct HTTP"},
		{"stdio front, external stdio server", extStdio.echo("ext__echo"), directStdio.echo("echo"), "direct stdio"},
	}
	calls := map[string]int{}
	for _, p := range paths {
		for _, callers := range []int{1, 32} {
			n := map[int]int{1: 3000, 32: 8000}[callers]
			st := interleave(b, n, callers, 4, p.base, p.call)
			d, h := st[0], st[1]
			calls[p.name] += n + 200
			if callers == 1 {
				add(p.name+": p50, 1 caller", us(h.p50), us(d.p50)+" ("+p.baseIs+")", ratio(float64(h.p50), float64(d.p50)))
				summary[p.name+" p50"] = float64(h.p50) / float64(d.p50)
			} else {
				add(p.name+": calls/s, 32 callers", fmt.Sprintf("%.0f", h.perSec), fmt.Sprintf("%.0f (%s)", d.perSec, p.baseIs), ratio(h.perSec, d.perSec))
				summary[p.name+" calls/s"] = h.perSec / d.perSec
			}
		}
	}

	// CPU per call at 32 callers: host, the external server behind it and
	// the client (this process), against the direct server, and the floor:
	// the host does at least what the direct server does (mcp-go's handling
	// of the same request), and the external server's own work runs on the
	// same cores too. A host that cost no more than the direct server would
	// reach (client + server) / (client + server + server behind).
	cpu := func(front string, directPID int, direct func(context.Context) error, hostPID int, through func(context.Context) error) {
		const n = 6000
		perCall := func(ticks int) float64 { return float64(ticks) * 10000 / n } // µs (100 Hz ticks)
		servers := fixtures.Descendants(hostPID)
		d0, c0 := cpuTicks(directPID), cpuTicks(os.Getpid())
		measure(b, n, 32, direct)
		d1, c1 := cpuTicks(directPID), cpuTicks(os.Getpid())
		h0, s0, k0 := cpuTicks(hostPID), cpuTicks(servers...), cpuTicks(os.Getpid())
		measure(b, n, 32, through)
		h1, s1, k1 := cpuTicks(hostPID), cpuTicks(servers...), cpuTicks(os.Getpid())
		calls[front+" front, external stdio server"] += n + 200
		add(fmt.Sprintf("CPU per call, %s, 32 callers: host", front), fmt.Sprintf("%.0f µs", perCall(h1-h0)), fmt.Sprintf("%.0f µs (direct server)", perCall(d1-d0)), ratio(float64(h1-h0), float64(d1-d0)))
		add("  external server behind the host", fmt.Sprintf("%.0f µs", perCall(s1-s0)), "-", "-")
		add("  MCP client", fmt.Sprintf("%.0f µs", perCall(k1-k0)), fmt.Sprintf("%.0f µs (direct)", perCall(c1-c0)), ratio(float64(k1-k0), float64(c1-c0)))
		c, srv, ext := float64(c1-c0), float64(d1-d0), float64(s1-s0)
		add("  bound: a host costing what the direct server does", fmt.Sprintf("%.2fx", (c+srv)/(c+srv+ext)), "-", "-")
		summary[front+" calls/s bound"] = (c + srv) / (c + srv + ext)
	}
	cpu("HTTP", dPID, directHTTP.echo("echo"), hPID, extHTTP.echo("ext__echo"))
	cpu("stdio", directStdio.cmd.Process.Pid, directStdio.echo("echo"), extStdio.cmd.Process.Pid, extStdio.echo("ext__echo"))

	// Host RSS after 20,000 calls on each front: at once, and after the
	// host has had no calls for a while (it gives memory back then,
	// tuning.Quiet).
	ctx := context.Background()
	fronts := []struct {
		name string
		pid  int
		call func(context.Context) error
	}{
		{"HTTP front, external stdio server", hPID, extHTTP.echo("ext__echo")},
		{"stdio front, external stdio server", extStdio.cmd.Process.Pid, extStdio.echo("ext__echo")},
	}
	for _, f := range fronts {
		for ; calls[f.name] < 20000; calls[f.name]++ {
			if err := f.call(ctx); err != nil {
				b.Fatal(err)
			}
		}
		rss := rssKB(f.pid)
		add(f.name+": host RSS after 20,000 calls, at once", kb(rss), kb(rssKB(directStdio.cmd.Process.Pid))+" (direct server)", "-")
		summary[f.name+" busy RSS MB"] = float64(rss) / 1024
	}
	time.Sleep(tuning.QuietDelay + time.Second)
	for _, f := range fronts {
		rss := rssKB(f.pid)
		add(f.name+": the same, 11 s without calls", kb(rss), kb(rssKB(directStdio.cmd.Process.Pid))+" (direct server)", "-")
		summary[f.name+" RSS MB"] = float64(rss) / 1024
	}
	// An idle host still pings its servers (health_interval, 15 s): what
	// those pings and the collections they lead to map back.
	time.Sleep(30 * time.Second)
	for _, f := range fronts {
		rss := rssKB(f.pid)
		add(f.name+": the same, 41 s without calls", kb(rss), kb(rssKB(directStdio.cmd.Process.Pid))+" (direct server)", "-")
		summary[f.name+" idle RSS MB"] = float64(rss) / 1024
	}

	fmt.Printf("\n%-52s %14s %30s %8s\n", "gateway vs direct (same run)", "figure", "baseline", "ratio")
	for _, r := range rows {
		fmt.Printf("%-52s %14s %30s %8s\n", r.name, r.figure, r.baseline, r.ratio)
	}
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	var s strings.Builder
	fmt.Fprintf(&s, "\nsummary (issue 19 targets):\n")
	line := func(what string, got float64, cmp string, target float64, ok bool) {
		fmt.Fprintf(&s, "  %-58s %6.2f (target %s %.2f) %s\n", what, got, cmp, target, verdict(ok))
	}
	g := summary["HTTP front, external stdio server calls/s"]
	line("HTTP front, external server: calls/s vs direct HTTP", g, ">=", 0.9, g >= 0.9)
	fmt.Fprintf(&s, "  %-58s %6.2f (see README, PERFORMANCE: the gateway's floor)\n", "  bound for any host doing mcp-go's HTTP work", summary["HTTP calls/s bound"])
	g = summary["HTTP front, external stdio server p50"]
	line("HTTP front, external server: p50 vs direct HTTP", g, "<=", 1.5, g <= 1.5)
	g = summary["HTTP front, native plugin calls/s"]
	line("HTTP front, native plugin: calls/s vs direct HTTP", g, ">=", 0.9, g >= 0.9)
	g = summary["HTTP front, native plugin p50"]
	line("HTTP front, native plugin: p50 vs direct HTTP", g, "<=", 1.2, g <= 1.2)
	g = summary["stdio front, external stdio server calls/s"]
	line("stdio front, external server: calls/s vs direct stdio", g, ">=", 0.7, g >= 0.7)
	fmt.Fprintf(&s, "  %-58s %6.2f\n", "  bound for any host doing mcp-go's stdio work", summary["stdio calls/s bound"])
	g = summary["stdio front, external stdio server p50"]
	line("stdio front, external server: p50 vs direct stdio", g, "<=", 1.6, g <= 1.6)
	g = summary["HTTP front, external stdio server RSS MB"]
	line("host RSS after 20,000 calls and 11 s quiet, HTTP front (MB)", g, "<=", 15, g <= 15)
	g = summary["stdio front, external stdio server RSS MB"]
	line("host RSS after 20,000 calls and 11 s quiet, stdio front (MB)", g, "<=", 15, g <= 15)
	fmt.Fprintf(&s, "  %-58s %6.2f / %.2f (no target: what a busy host holds)\n", "  the same at once after the calls, HTTP / stdio (MB)",
		summary["HTTP front, external stdio server busy RSS MB"], summary["stdio front, external stdio server busy RSS MB"])
	// 41 s: past two health checks, whose pages an idle host gives back.
	g = summary["HTTP front, external stdio server idle RSS MB"]
	line("the same 41 s after the calls, HTTP front (MB)", g, "<=", 15, g <= 15)
	g = summary["stdio front, external stdio server idle RSS MB"]
	line("the same 41 s after the calls, stdio front (MB)", g, "<=", 15, g <= 15)
	fmt.Print(s.String())
}

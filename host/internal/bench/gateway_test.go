package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	// A config of its own: two hosts on one project see each other and
	// restart their servers (CoverOtherHosts), which is not what one user
	// with one host measures.
	extHTTPCfg := writeConfig(b, fmt.Sprintf("external \"ext\" { command = %q }\n", bins.MCPServer))
	extURL, hPID := startHTTPProc(b, bins.Switchboard, "serve", "--config", extHTTPCfg, "--http", "127.0.0.1:0")
	os.Unsetenv("SWITCHBOARD_CPUPROFILE")
	extHTTP := httpClient(b, extURL)
	plugURL := startHTTP(b, bins.Switchboard, "serve", "--config", plugCfg, "--http", "127.0.0.1:0")
	plugHTTP := httpClient(b, plugURL)

	// The floor of each path, measured in the same rounds: a minimal
	// gateway built on mcp-go, as TBXark/mcp-proxy is (the fixture's
	// gateway mode: one tool forwarded, no guards, audit, sandbox or
	// supervision), in front of the same server behind, or of the test
	// plugin in bare mode over gRPC (the host's protocol client without
	// go-plugin or TLS).
	minURL, minPID := startHTTPProc(b, bins.MCPServer, "--http", "127.0.0.1:0", "--gateway-stdio", bins.MCPServer)
	minHTTP := httpClient(b, minURL)
	minPlugURL := startHTTP(b, bins.MCPServer, "--http", "127.0.0.1:0", "--gateway-plugin", bareSocket(b, bins.TestPlugin))
	minPlugHTTP := httpClient(b, minPlugURL)
	minStdio, _ := startMCP(b, nil, bins.MCPServer, "--gateway-stdio", bins.MCPServer)

	type path struct {
		name    string
		call    func(context.Context) error
		base    func(context.Context) error
		baseIs  string
		minimal func(context.Context) error
	}
	paths := []path{
		{"HTTP front, external stdio server", extHTTP.echo("ext__echo"), directHTTP.echo("echo"), "direct HTTP", minHTTP.echo("echo")},
		{"HTTP front, native plugin", plugHTTP.echo("fx__echo"), directHTTP.echo("echo"), "direct HTTP", minPlugHTTP.echo("echo")},
		{"stdio front, external stdio server", extStdio.echo("ext__echo"), directStdio.echo("echo"), "direct stdio", minStdio.echo("echo")},
	}
	calls := map[string]int{}
	for _, p := range paths {
		for _, callers := range []int{1, 32} {
			n := map[int]int{1: 3000, 32: 8000}[callers]
			st := interleave(b, n, callers, 4, p.base, p.call, p.minimal)
			d, h, m := st[0], st[1], st[2]
			calls[p.name] += n + 200
			if callers == 1 {
				add(p.name+": p50, 1 caller", us(h.p50), us(d.p50)+" ("+p.baseIs+")", ratio(float64(h.p50), float64(d.p50)))
				add("  a minimal mcp-go gateway, same rounds", us(m.p50), us(d.p50)+" ("+p.baseIs+")", ratio(float64(m.p50), float64(d.p50)))
				summary[p.name+" p50"] = float64(h.p50) / float64(d.p50)
				summary[p.name+" p50 minimal"] = float64(m.p50) / float64(d.p50)
			} else {
				add(p.name+": calls/s, 32 callers", fmt.Sprintf("%.0f", h.perSec), fmt.Sprintf("%.0f (%s)", d.perSec, p.baseIs), ratio(h.perSec, d.perSec))
				add("  a minimal mcp-go gateway, same rounds", fmt.Sprintf("%.0f", m.perSec), fmt.Sprintf("%.0f (%s)", d.perSec, p.baseIs), ratio(m.perSec, d.perSec))
				summary[p.name+" calls/s"] = h.perSec / d.perSec
				summary[p.name+" calls/s minimal"] = m.perSec / d.perSec
			}
		}
	}

	// CPU per call at 32 callers: the host, the external server behind it
	// and the client (this process), beside the direct server and the
	// minimal mcp-go gateway (and the server behind it) in the same run.
	cpu := func(front string, directPID int, direct func(context.Context) error, hostPID int, through func(context.Context) error, minPID int, minimal func(context.Context) error) {
		const n = 6000
		perCall := func(ticks int) float64 { return float64(ticks) * 10000 / n } // µs (100 Hz ticks)
		servers, minServers := fixtures.Descendants(hostPID), fixtures.Descendants(minPID)
		d0, c0 := cpuTicks(directPID), cpuTicks(os.Getpid())
		measure(b, n, 32, direct)
		d1, c1 := cpuTicks(directPID), cpuTicks(os.Getpid())
		h0, s0, k0 := cpuTicks(hostPID), cpuTicks(servers...), cpuTicks(os.Getpid())
		measure(b, n, 32, through)
		h1, s1, k1 := cpuTicks(hostPID), cpuTicks(servers...), cpuTicks(os.Getpid())
		m0, ms0 := cpuTicks(minPID), cpuTicks(minServers...)
		measure(b, n, 32, minimal)
		m1, ms1 := cpuTicks(minPID), cpuTicks(minServers...)
		calls[front+" front, external stdio server"] += n + 200
		add(fmt.Sprintf("CPU per call, %s, 32 callers: host", front), fmt.Sprintf("%.0f µs", perCall(h1-h0)), fmt.Sprintf("%.0f µs (direct server)", perCall(d1-d0)), ratio(float64(h1-h0), float64(d1-d0)))
		add("  external server behind the host", fmt.Sprintf("%.0f µs", perCall(s1-s0)), "-", "-")
		add("  MCP client", fmt.Sprintf("%.0f µs", perCall(k1-k0)), fmt.Sprintf("%.0f µs (direct)", perCall(c1-c0)), ratio(float64(k1-k0), float64(c1-c0)))
		add("  minimal mcp-go gateway / the server behind it", fmt.Sprintf("%.0f / %.0f µs", perCall(m1-m0), perCall(ms1-ms0)), "-", ratio(float64(h1-h0), float64(m1-m0))+" (host)")
		summary[front+" host CPU"], summary[front+" minimal CPU"], summary[front+" direct CPU"] = perCall(h1-h0), perCall(m1-m0), perCall(d1-d0)
	}
	cpu("HTTP", dPID, directHTTP.echo("echo"), hPID, extHTTP.echo("ext__echo"), minPID, minHTTP.echo("echo"))
	cpu("stdio", directStdio.cmd.Process.Pid, directStdio.echo("echo"), extStdio.cmd.Process.Pid, extStdio.echo("ext__echo"), minStdio.cmd.Process.Pid, minStdio.echo("echo"))

	// Host RSS after 20,000 calls on each front: at once, and after the
	// host has had no calls for a while (it gives memory back then,
	// tuning.Quiet).
	ctx := context.Background()
	fronts := []struct {
		name   string
		pid    int
		call   func(context.Context) error
		minPID int
	}{
		{"HTTP front, external stdio server", hPID, extHTTP.echo("ext__echo"), minPID},
		{"stdio front, external stdio server", extStdio.cmd.Process.Pid, extStdio.echo("ext__echo"), minStdio.cmd.Process.Pid},
	}
	for _, f := range fronts {
		for ; calls[f.name] < 20000; calls[f.name]++ {
			if err := f.call(ctx); err != nil {
				b.Fatal(err)
			}
		}
		rss := rssKB(f.pid)
		add(f.name+": host RSS after 20,000 calls, at once", kb(rss), kb(rssKB(directStdio.cmd.Process.Pid))+" (direct server)", "-")
		add("  the minimal mcp-go gateway, at once", kb(rssKB(f.minPID)), "-", "-")
		summary[f.name+" busy RSS MB"] = float64(rss) / 1024
	}
	time.Sleep(tuning.QuietDelay + time.Second)
	for _, f := range fronts {
		rss := steadyRSSKB(f.pid)
		add(f.name+": the same, 11 s without calls", kb(rss)+rssParts(f.pid), kb(rssKB(directStdio.cmd.Process.Pid))+" (direct server)", "-")
		summary[f.name+" RSS MB"] = float64(rss) / 1024
	}
	// An idle host still pings its servers (health_interval, 15 s): what
	// those pings and the collections they lead to map back.
	time.Sleep(30 * time.Second)
	for _, f := range fronts {
		rss := steadyRSSKB(f.pid)
		add(f.name+": the same, 41 s without calls", kb(rss)+rssParts(f.pid), kb(rssKB(directStdio.cmd.Process.Pid))+" (direct server)", "-")
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
	// Each speed target beside its floor: what the minimal mcp-go gateway
	// reached in the same rounds.
	speed := func(path, what, cmp string, target float64, higher bool) {
		g, m := summary[path+" "+what], summary[path+" "+what+" minimal"]
		ok := g <= target
		if higher {
			ok = g >= target
		}
		line(path+": "+what+" vs direct", g, cmp, target, ok)
		rel := "the host does as well or better"
		if better := g >= m; !higher {
			if g > m {
				rel = fmt.Sprintf("the host is %.0f %% above it", 100*(g/m-1))
			}
		} else if !better {
			rel = fmt.Sprintf("the host is %.0f %% below it", 100*(1-g/m))
		}
		fmt.Fprintf(&s, "  %-58s %6.2f (the floor; %s)\n", "  a minimal mcp-go gateway, same rounds", m, rel)
	}
	speed("HTTP front, external stdio server", "calls/s", ">=", 0.9, true)
	speed("HTTP front, external stdio server", "p50", "<=", 1.5, false)
	speed("HTTP front, native plugin", "calls/s", ">=", 0.9, true)
	speed("HTTP front, native plugin", "p50", "<=", 1.2, false)
	speed("stdio front, external stdio server", "calls/s", ">=", 0.7, true)
	speed("stdio front, external stdio server", "p50", "<=", 1.6, false)
	for _, front := range []string{"HTTP", "stdio"} {
		fmt.Fprintf(&s, "  %-58s %.0f / %.0f / %.0f µs\n", "CPU per call, "+front+", external: host / minimal gateway / direct", summary[front+" host CPU"], summary[front+" minimal CPU"], summary[front+" direct CPU"])
	}
	g := summary["HTTP front, external stdio server RSS MB"]
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

// bareSocket starts the test plugin in bare mode (the tool protocol over
// gRPC on a Unix socket, without go-plugin or TLS) and returns its socket.
func bareSocket(b *testing.B, bin string) string {
	sock := filepath.Join(b.TempDir(), "bare.sock")
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "FIXTURE_BARE_SOCKET="+sock)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for i := 0; i < 200; i++ {
		if _, err := os.Stat(sock); err == nil {
			return sock
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatalf("the bare plugin made no socket at %s", sock)
	return ""
}

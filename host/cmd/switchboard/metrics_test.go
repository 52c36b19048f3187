package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape fetches and parses a Prometheus text exposition.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape %s: %s %s", url, resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape %s: not the Prometheus text format: %v", url, err)
	}
	return fams
}

// value returns the value of the sample of family name whose labels
// include want (-1 when there is none).
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return -1
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestMetricsScrape: calls of every outcome made through a real MCP client
// show up in a real scrape of the metrics block's listener, by server,
// tool and outcome, with latency, in-flight and server figures.
func TestMetricsScrape(t *testing.T) {
	addr := freeAddr(t)
	e := setup(t)
	e = setupWith(t, fmt.Sprintf(`
plugin "mem" {
  path = %q
  sandbox { memory = "96MiB" }
}
metrics { listen = %q }
permissions {
  default = "allow"
  deny    = ["hello.greet"]
}`, e.bins.TestPlugin, addr))
	if err := replaceInFile(e.config, `plugin "fx" {`, `plugin "fx" {
  tool "sleep" { call_timeout = "300ms" }`); err != nil {
		t.Fatal(err)
	}
	c, _ := mcpClient(t, e)
	initialize(t, c)
	ctx := t.Context()
	call := func(name string, args map[string]any) {
		t.Helper()
		_, _ = callTool(ctx, c, name, args, nil)
	}
	call("fx__echo", map[string]any{"text": "a"})
	call("fx__echo", map[string]any{"text": "b"})
	call("fx__attack", map[string]any{"op": "nope"})  // tool error
	call("hello__greet", map[string]any{"name": "x"}) // denied by rule
	call("fx__echo", map[string]any{"text": 5})       // refused by the schema
	call("fx__nope", map[string]any{})                // unknown
	call("fx__sleep", map[string]any{"ms": 60000})    // timeout (300ms)
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, _ = callTool(cctx, c, "fx__sleep", map[string]any{"ms": 5000}, nil) // cancelled
	cancel()
	call("mem__attack", map[string]any{"op": "alloc", "mb": 400}) // over its memory limit

	url := "http://" + addr + "/metrics"
	want := []struct {
		labels map[string]string
		n      float64
	}{
		{map[string]string{"server": "fx", "tool": "echo", "outcome": "ok"}, 2},
		{map[string]string{"server": "fx", "tool": "attack", "outcome": "tool_error"}, 1},
		{map[string]string{"server": "hello", "tool": "greet", "outcome": "refused_rule"}, 1},
		{map[string]string{"outcome": "refused_schema"}, 1},
		{map[string]string{"server": "", "tool": "", "outcome": "refused_unknown"}, 1},
		{map[string]string{"server": "fx", "tool": "sleep", "outcome": "timeout"}, 1},
		{map[string]string{"server": "fx", "tool": "sleep", "outcome": "cancelled"}, 1},
		{map[string]string{"server": "mem", "tool": "attack", "outcome": "error"}, 1},
	}
	var fams map[string]*dto.MetricFamily
	ok := eventually(15*time.Second, func() bool {
		fams = scrape(t, url)
		for _, w := range want {
			if value(fams, "switchboard_calls_total", w.labels) != w.n {
				return false
			}
		}
		return value(fams, "switchboard_sandbox_kills_total", map[string]string{"server": "mem"}) == 1
	})
	if !ok {
		for _, w := range want {
			if got := value(fams, "switchboard_calls_total", w.labels); got != w.n {
				t.Errorf("switchboard_calls_total%v = %v, want %v", w.labels, got, w.n)
			}
		}
	}
	if v := value(fams, "switchboard_sandbox_kills_total", map[string]string{"server": "mem"}); v != 1 {
		t.Errorf("mem sandbox kills = %v, want 1", v)
	}
	if n := value(fams, "switchboard_call_duration_seconds", map[string]string{"server": "fx"}); n < 5 {
		t.Errorf("fx latency histogram counts %v calls, want at least 5", n)
	}
	if v := value(fams, "switchboard_calls_in_flight", map[string]string{"server": "fx"}); v != 0 {
		t.Errorf("fx calls in flight = %v after every call ended, want 0", v)
	}
	if v := value(fams, "switchboard_server_state", map[string]string{"server": "fx", "state": "ready"}); v != 1 {
		t.Errorf("fx ready = %v, want 1", v)
	}
	if v := value(fams, "switchboard_server_resident_memory_bytes", map[string]string{"server": "filesystem"}); v < 1<<20 {
		t.Errorf("filesystem RSS = %v, want a real figure", v)
	}
	for _, name := range []string{"switchboard_server_restarts_total", "switchboard_sandbox_kills_total", "switchboard_audit_queue_depth", "go_goroutines", "process_resident_memory_bytes"} {
		if fams[name] == nil {
			t.Errorf("no %s in the scrape", name)
		}
	}
}

// TestMetricsOnTheHTTPFrontEnd: serve --http serves /metrics beside /mcp,
// counting its sessions; a page of another origin cannot read it.
func TestMetricsOnTheHTTPFrontEnd(t *testing.T) {
	e := setup(t)
	url := startServeHTTP(t, e)
	base := strings.TrimSuffix(url, "/mcp")
	c := newHTTPClient(t, url)
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = "2025-11-25" // an era with sessions
	req.Params.ClientInfo = mcp.Implementation{Name: "metrics", Version: "1"}
	if _, err := c.Initialize(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if _, err := callTool(t.Context(), c, "hello__greet", map[string]any{"name": "x"}, nil); err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, base+"/metrics")
	if v := value(fams, "switchboard_http_sessions", nil); v != 1 {
		t.Errorf("switchboard_http_sessions = %v, want 1", v)
	}
	if fams["switchboard_calls_total"] == nil {
		t.Error("no switchboard_calls_total on /metrics")
	}
	cross, _ := http.NewRequest("GET", base+"/metrics", nil)
	cross.Header.Set("Origin", "http://evil.example")
	resp, err := http.DefaultClient.Do(cross)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("/metrics from another origin = %s, want 403", resp.Status)
	}
}

func replaceInFile(path, old, new string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !strings.Contains(string(b), old) {
		return fmt.Errorf("%s has no %q", path, old)
	}
	return os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o600)
}

// startServeHTTP starts `switchboard serve --http 127.0.0.1:0` and returns
// its MCP URL.
func startServeHTTP(t *testing.T, e env) string {
	t.Helper()
	return serveHTTPOn(t, e.bins.Switchboard, e.config)
}

// serveHTTPOn starts `switchboard serve --http 127.0.0.1:0` on config and
// returns its MCP URL; the host is killed when the test ends.
func serveHTTPOn(t *testing.T, switchboard, config string) string {
	t.Helper()
	cmd := exec.Command(switchboard, "serve", "--config", config, "--http", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=warn")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	url := ""
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "switchboard: serving MCP at "); ok {
			url = u
			break
		}
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("no URL announced (got %q)", url)
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return url
}

func newHTTPClient(t *testing.T, url string) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestMetricsListenIsLoopback: the metrics block refuses an address beyond
// loopback (they name every server and tool, without authentication).
func TestMetricsListenIsLoopback(t *testing.T) {
	for listen, want := range map[string]string{
		"0.0.0.0:9464":   "is not a loopback address",
		"127.0.0.1":      "is not HOST:PORT",
		"127.0.0.1:9464": "",
	} {
		e := setupWith(t, fmt.Sprintf("metrics { listen = %q }", listen))
		_, errOut, code := run(t, e, "validate", "--config", e.config)
		if want == "" && code != 0 || want != "" && (code != 1 || !strings.Contains(errOut, want)) {
			t.Errorf("validate with listen = %q: %d %q, want %q", listen, code, errOut, want)
		}
	}
}

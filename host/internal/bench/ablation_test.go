package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/ablate"
)

// ablation is one host of the ablation table: everything on, or one
// optimisation of the stdio call route switched off (see sdk/protocol/ablate).
type ablation struct {
	name       string
	hostEnv    []string
	pluginEnv  map[string]string // set in the plugin's block
	config     string            // added to the host's config
	secondPath bool              // a second route (DESIGN, performance rule), not a setting
	// feature marks a row that turns something on (traces) rather than an
	// optimisation off: its figures are what the feature costs, and the
	// "everything on" row is the same host with it off.
	feature bool
}

// ablations lists the optimisations of the stdio call route, each switched
// off alone.
func ablations() []ablation {
	off := func(name string) []string { return []string{ablate.Env + "=" + name} }
	return []ablation{
		{name: "everything on"},
		{name: "stdio short path off", hostEnv: off(ablate.ShortPath), secondPath: true},
		{name: "reused goroutines off (host, plugin)", hostEnv: off(ablate.WorkPool), pluginEnv: map[string]string{ablate.Env: ablate.WorkPool}},
		{name: fmt.Sprintf("GOMAXPROCS=1 off (serve at %d)", runtime.NumCPU()), hostEnv: []string{"GOMAXPROCS=" + strconv.Itoa(runtime.NumCPU())}},
		{name: "stdin through the poller off", hostEnv: off(ablate.Poller)},
		{name: "audit writer linger off", hostEnv: off(ablate.AuditLinger)},
		{name: "fixed gRPC flow windows off (host, plugin)", hostEnv: off(ablate.FlowWindow), pluginEnv: map[string]string{ablate.Env: ablate.FlowWindow}},
		{name: "quiet reads and writes off (host, plugin)", hostEnv: off(ablate.QuietIO), pluginEnv: map[string]string{ablate.Env: ablate.QuietIO}},
		// Go's default collector: the host's GC headroom is off when the
		// user sets GOGC (tuning.GCHeadroom).
		{name: "GC headroom off (GOGC=100)", hostEnv: []string{"GOGC=100"}},
		// Not an optimisation but a guarantee's price: with it off, records
		// are written in the background and a killed host loses the last.
		{name: "durable audit records off", config: "audit_durable = false\n"},
	}
}

// tracesOn is the row of a host that exports a span per call to the OTLP
// receiver at addr (OpenTelemetry, configured as users do, by OTEL_*).
func tracesOn(addr string) ablation {
	return ablation{name: "traces exported (OTLP/gRPC, on)", feature: true, hostEnv: []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + addr, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_EXPORTER_OTLP_INSECURE=true",
	}}
}

// discardSpans is an OTLP trace receiver that counts and drops what it gets.
type discardSpans struct {
	collectortrace.UnimplementedTraceServiceServer
	spans atomic.Int64
}

func (d *discardSpans) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			d.spans.Add(int64(len(ss.GetSpans())))
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// startReceiver serves an OTLP trace receiver on 127.0.0.1 until the
// benchmark ends.
func startReceiver(b *testing.B) (string, *discardSpans) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	rcv := &discardSpans{}
	gs := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(gs, rcv)
	go func() { _ = gs.Serve(ln) }()
	b.Cleanup(gs.Stop)
	return ln.Addr().String(), rcv
}

// figures are the four end-to-end figures of the table.
type figures struct{ p50one, perSecOne, p50many, perSecMany float64 }

// BenchmarkAblation measures the stdio echo call through the host with
// everything on, and with each optimisation switched off alone, against the
// direct mcp-go server, all in one run: the hosts run side by side and are
// measured in alternating rounds, the whole repeated $BENCH_ABLATION_RUNS
// times (default 5), and the table shows the medians. DESIGN's performance
// rule: a second route stays only if switching it off costs at least 10 %
// on one of these figures.
func BenchmarkAblation(b *testing.B) {
	if b.N < 100 {
		return
	}
	runs := 5
	if n, err := strconv.Atoi(os.Getenv("BENCH_ABLATION_RUNS")); err == nil && n > 0 {
		runs = n
	}
	bins := fixtures.Build(b)
	direct, _ := startMCP(b, nil, bins.MCPServer)
	paths := []func(context.Context) error{direct.echo("echo")}
	recvAddr, recv := startReceiver(b)
	abl := append(ablations(), tracesOn(recvAddr))
	for _, a := range abl {
		block := fmt.Sprintf("plugin \"fx\" { path = %q }\n", bins.TestPlugin)
		if len(a.pluginEnv) > 0 {
			var vars []string
			for k, v := range a.pluginEnv {
				vars = append(vars, fmt.Sprintf("%s = %q", k, v))
			}
			slices.Sort(vars)
			block = fmt.Sprintf("plugin \"fx\" {\n  path = %q\n  env = { %s }\n}\n", bins.TestPlugin, strings.Join(vars, ", "))
		}
		h, _ := startMCP(b, a.hostEnv, bins.Switchboard, "serve", "--config", writeConfig(b, block+a.config))
		paths = append(paths, h.echo("fx__echo"))
	}
	// per[path][run]
	per := make([][]figures, len(paths))
	for r := 0; r < runs; r++ {
		one := interleave(b, 3000, 1, 6, paths...)
		many := interleave(b, 9600, 32, 6, paths...)
		for i := range paths {
			per[i] = append(per[i], figures{
				p50one: float64(one[i].p50.Microseconds()), perSecOne: one[i].perSec,
				p50many: float64(many[i].p50.Microseconds()), perSecMany: many[i].perSec,
			})
		}
	}
	med := make([]figures, len(paths))
	for i, fs := range per {
		pick := func(get func(figures) float64) float64 {
			v := make([]float64, len(fs))
			for j, f := range fs {
				v[j] = get(f)
			}
			slices.Sort(v)
			return v[len(v)/2]
		}
		med[i] = figures{
			p50one:     pick(func(f figures) float64 { return f.p50one }),
			perSecOne:  pick(func(f figures) float64 { return f.perSecOne }),
			p50many:    pick(func(f figures) float64 { return f.p50many }),
			perSecMany: pick(func(f figures) float64 { return f.perSecMany }),
		}
	}
	d, on := med[0], med[1]
	fmt.Printf("\nablation of the stdio call route: echo through the host, medians of %d runs (%s)\n", runs, time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Println(idleNote())
	fmt.Printf("%-48s %16s %18s %16s %18s  %s\n", "", "p50, 1 caller", "calls/s, 1 caller", "p50, 32 callers", "calls/s, 32 callers", "switching it off costs")
	row := func(name string, f figures, against figures, verdict string) {
		rel := func(v, base float64) string { return fmt.Sprintf("%.2fx", v/base) }
		fmt.Printf("%-48s %7.0f µs %6s %10.0f %6s %7.0f µs %6s %10.0f %6s  %s\n", name,
			f.p50one, rel(f.p50one, against.p50one), f.perSecOne, rel(f.perSecOne, against.perSecOne),
			f.p50many, rel(f.p50many, against.p50many), f.perSecMany, rel(f.perSecMany, against.perSecMany), verdict)
	}
	row("direct mcp-go server (vs itself)", d, d, "")
	row("host, everything on (vs direct)", on, d, "")
	for i, a := range abl[1:] {
		f := med[i+2]
		// What switching it off costs, on each figure: more latency or
		// fewer calls a second, relative to everything on.
		costs := map[string]float64{
			"p50, 1 caller":       f.p50one/on.p50one - 1,
			"calls/s, 1 caller":   on.perSecOne/f.perSecOne - 1,
			"p50, 32 callers":     f.p50many/on.p50many - 1,
			"calls/s, 32 callers": on.perSecMany/f.perSecMany - 1,
		}
		worst, at := -1.0, ""
		for _, k := range []string{"p50, 1 caller", "calls/s, 1 caller", "p50, 32 callers", "calls/s, 32 callers"} {
			if costs[k] > worst {
				worst, at = costs[k], k
			}
		}
		verdict := fmt.Sprintf("at most %+.0f %% (%s)", worst*100, at)
		if a.feature {
			row(a.name+" (vs off)", f, on, "turning it on costs "+verdict)
			continue
		}
		if a.secondPath {
			if worst >= 0.10 {
				verdict += ": a second route that earns its keep"
			} else {
				verdict += ": a second route under 10 %, delete it"
			}
		}
		row(a.name+" (vs on)", f, on, verdict)
	}
	fmt.Printf("traces: %d spans received while on; off (every other row) a call does no tracing work\n", recv.spans.Load())
	fmt.Printf("targets, everything on: p50 %.2fx direct (<= 1.3x), calls/s at 32 callers %.2fx direct (>= 0.8x)\n",
		on.p50one/d.p50one, on.perSecMany/d.perSecMany)
}

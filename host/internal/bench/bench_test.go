// Package bench measures the host's call path against a baseline taken in
// the same run. Run it with `make bench`; it is a figure, not a test.
package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/switchboard-mcp/switchboard/host/internal/fixtures"
	"github.com/switchboard-mcp/switchboard/host/internal/launcher"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
)

func TestMain(m *testing.M) { fixtures.Main(m) }

// bareClient starts the fixture in bare mode (gRPC health service only, on
// a Unix socket, in its own process) and returns a unary call to it.
func bareClient(b *testing.B, bin string) func(context.Context) error {
	sock := filepath.Join(b.TempDir(), "bare.sock")
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "FIXTURE_BARE_SOCKET="+sock)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for i := 0; i < 200; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	hc := healthpb.NewHealthClient(conn)
	return func(ctx context.Context) error {
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
}

// hostCall starts the fixture as a real plugin behind a registry and
// returns one routed call of its echo tool.
func hostCall(b *testing.B, bin string) func(context.Context) error {
	p, err := launcher.Launch(context.Background(), launcher.Spec{Name: "fx", Path: bin, ProjectDir: b.TempDir()}, hclog.NewNullLogger())
	if err != nil {
		b.Fatal(err)
	}
	reg := registry.New(nil)
	if err := reg.Register(p, registry.KindPlugin, "bench"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = reg.Shutdown(context.Background(), time.Second) })
	args := []byte(`{"text":"ping"}`)
	return func(ctx context.Context) error {
		_, err := reg.Call(ctx, "fx.echo", args, false, nil)
		return err
	}
}

type stats struct {
	p50, p99 time.Duration
	perSec   float64
}

// measure runs n calls spread over callers goroutines and returns latency
// percentiles and throughput.
func measure(b *testing.B, n, callers int, call func(context.Context) error) stats {
	ctx := context.Background()
	for i := 0; i < 200; i++ { // warm up
		if err := call(ctx); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	per := n / callers
	start := time.Now()
	for c := 0; c < callers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c * per; i < (c+1)*per; i++ {
				t0 := time.Now()
				if err := call(ctx); err != nil {
					b.Error(err)
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	total := time.Since(start)
	lat = lat[:per*callers]
	slices.Sort(lat)
	return stats{p50: lat[len(lat)/2], p99: lat[len(lat)*99/100], perSec: float64(len(lat)) / total.Seconds()}
}

// BenchmarkCallPath compares one tool call through the host's router to a
// real plugin subprocess (go-plugin, AutoMTLS, the multiplexed CallTool
// stream) with a bare gRPC unary round trip over a Unix socket to another
// process, measured in the same run, and prints both and their ratio.
func BenchmarkCallPath(b *testing.B) {
	if b.N < 100 {
		return // the framework's probing run; the table comes from the real one
	}
	bins := fixtures.Build(b)
	bare := bareClient(b, bins.TestPlugin)
	host := hostCall(b, bins.TestPlugin)
	n := b.N
	b.ResetTimer()
	fmt.Printf("\n%-34s %10s %10s %12s\n", "path", "p50", "p99", "calls/s")
	for _, callers := range []int{1, 8, 32} {
		// Alternate the two paths so drift affects both alike.
		bs := measure(b, n, callers, bare)
		hs := measure(b, n, callers, host)
		fmt.Printf("%-34s %10s %10s %12.0f\n", fmt.Sprintf("bare gRPC unary, %d callers", callers), bs.p50.Round(time.Microsecond), bs.p99.Round(time.Microsecond), bs.perSec)
		fmt.Printf("%-34s %10s %10s %12.0f\n", fmt.Sprintf("host router->plugin, %d callers", callers), hs.p50.Round(time.Microsecond), hs.p99.Round(time.Microsecond), hs.perSec)
		fmt.Printf("%-34s %9.2fx %9.2fx %11.2fx\n", "  ratio host/bare", float64(hs.p50)/float64(bs.p50), float64(hs.p99)/float64(bs.p99), hs.perSec/bs.perSec)
		if callers == 1 {
			b.ReportMetric(float64(bs.p50.Microseconds()), "bare-p50-us")
			b.ReportMetric(float64(hs.p50.Microseconds()), "host-p50-us")
			b.ReportMetric(float64(hs.p50)/float64(bs.p50), "p50-ratio")
		}
	}
}

// Package bench measures the host's call path against a baseline taken in
// the same run. Run it with `make bench`; it is a figure, not a test.
package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/internal/fixtures"
	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
)

func TestMain(m *testing.M) {
	if os.Getenv(pingPongChild) != "" {
		echoFrames()
		return
	}
	fixtures.Main(m)
}

// pingPongChild makes the test binary an echo process for socketPingPong.
const pingPongChild = "BENCH_PINGPONG_CHILD"

// echoFrames echoes length-prefixed frames on file descriptor 3.
func echoFrames() {
	f := os.NewFile(3, "pingpong")
	conn, err := net.FileConn(f)
	if err != nil {
		os.Exit(2)
	}
	r := bufio.NewReader(conn)
	buf := make([]byte, 64<<10)
	for {
		var hdr [4]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		out := append(buf[:0], hdr[:]...)
		out = out[:4+n]
		if _, err := io.ReadFull(r, out[4:]); err != nil {
			return
		}
		if _, err := conn.Write(out); err != nil {
			return
		}
	}
}

// socketPingPong starts a child process that echoes frames on a socket
// pair and returns one round trip of a frame the size of an echo call: the
// floor for any out-of-process plugin, with no protocol at all.
func socketPingPong(b *testing.B) func(context.Context) error {
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), pingPongChild+"=1", "GOMAXPROCS=1")
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	child := os.NewFile(uintptr(fds[1]), "pingpong")
	cmd.ExtraFiles = []*os.File{child}
	conn, err := net.FileConn(os.NewFile(uintptr(fds[0]), "pingpong"))
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	_ = child.Close()
	b.Cleanup(func() { _ = conn.Close(); _ = cmd.Wait() })
	msg := make([]byte, 4+40)
	binary.BigEndian.PutUint32(msg, 40)
	in := make([]byte, len(msg))
	r := bufio.NewReader(conn)
	return func(context.Context) error {
		if _, err := conn.Write(msg); err != nil {
			return err
		}
		_, err := io.ReadFull(r, in)
		return err
	}
}

// bareConn starts the fixture in bare mode (gRPC without go-plugin or
// TLS, in its own process) and returns a connection to it.
func bareConn(b *testing.B, bin string, env ...string) *grpc.ClientConn {
	sock := filepath.Join(b.TempDir(), "bare.sock")
	cmd := exec.Command(bin)
	cmd.Env = append(append(os.Environ(), "FIXTURE_BARE_SOCKET="+sock), env...)
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
	// The host's own dial options (flow windows, message sizes), so that
	// the bare figures differ from the host's hop only by go-plugin, TLS
	// and the launcher.
	conn, err := grpc.NewClient("unix://"+sock, append(protocol.GRPCDialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	return conn
}

// rawStream is a bare bidi-stream ping-pong on the tool protocol's
// CallTool stream: no go-plugin, no TLS, no multiplexing.
func rawStream(b *testing.B, conn *grpc.ClientConn) func(context.Context) error {
	stream, err := pluginv1.NewToolServerClient(conn).CallTool(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	var id uint64
	args := []byte(`{"text":"ping"}`)
	return func(context.Context) error {
		id++
		if err := stream.Send(&pluginv1.CallToolRequest{CallId: id, Kind: &pluginv1.CallToolRequest_Call{Call: &pluginv1.Call{Tool: "echo", Arguments: args}}}); err != nil {
			return err
		}
		_, err := stream.Recv()
		return err
	}
}

// protocolClient is the tool protocol's multiplexing client over the same
// bare connection.
func protocolClient(conn *grpc.ClientConn) func(context.Context) error {
	c := protocol.NewClient(pluginv1.NewToolServerClient(conn))
	args := []byte(`{"text":"ping"}`)
	return func(ctx context.Context) error {
		_, err := c.CallEvents(ctx, &pluginv1.Call{Tool: "echo", Arguments: args}, nil)
		return err
	}
}

// bareClient starts the fixture in bare mode (gRPC health service only, on
// a Unix socket, in its own process) and returns a unary call to it.
func bareClient(b *testing.B, bin string, env ...string) func(context.Context) error {
	hc := healthpb.NewHealthClient(bareConn(b, bin, env...))
	return func(ctx context.Context) error {
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
}

// hostCall starts the fixture as a real plugin behind a registry and
// returns one routed call of its echo tool (through the registry's guards:
// schema validation, policy, duplicate check) and the same call straight to
// the plugin's carrier.
func hostCall(b *testing.B, bin string) (routed, carried func(context.Context) error) {
	p, err := launcher.Launch(context.Background(), launcher.Spec{Name: "fx", Path: bin, ProjectDir: b.TempDir()}, hclog.NewNullLogger())
	if err != nil {
		b.Fatal(err)
	}
	reg := registry.New(nil, registry.WithDuplicateLimit(0))
	if err := reg.Register(p, registry.KindPlugin, "bench"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = reg.Shutdown(context.Background(), time.Second) })
	args := []byte(`{"text":"ping"}`)
	routed = func(ctx context.Context) error {
		_, err := reg.Call(ctx, "fx.echo", args, nil)
		return err
	}
	carried = func(ctx context.Context) error {
		_, err := p.Call(ctx, "echo", args, nil)
		return err
	}
	return routed, carried
}

type stats struct {
	p50, p99 time.Duration
	perSec   float64
}

// measure runs n calls spread over callers goroutines, after a warm-up,
// and returns latency percentiles and throughput.
func measure(b *testing.B, n, callers int, call func(context.Context) error) stats {
	return interleave(b, n, callers, 1, call)[0]
}

// interleave measures several paths in turns (rounds of n/rounds calls
// each, alternating), so that the machine's drift over a run, which can
// be tens of percent on a shared VM, falls on all of them alike.
func interleave(b *testing.B, n, callers, rounds int, calls ...func(context.Context) error) []stats {
	ctx := context.Background()
	for _, call := range calls {
		for i := 0; i < 200; i++ { // warm up
			if err := call(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	lats := make([][]time.Duration, len(calls))
	totals := make([]time.Duration, len(calls))
	for r := 0; r < rounds; r++ {
		for i, call := range calls {
			lat, total := run(b, n/rounds, callers, call)
			lats[i] = append(lats[i], lat...)
			totals[i] += total
		}
	}
	out := make([]stats, len(calls))
	for i, lat := range lats {
		slices.Sort(lat)
		out[i] = stats{p50: lat[len(lat)/2], p99: lat[len(lat)*99/100], perSec: float64(len(lat)) / totals[i].Seconds()}
	}
	return out
}

// run makes n calls from callers goroutines and returns each call's
// latency and the wall time of the whole.
func run(b *testing.B, n, callers int, call func(context.Context) error) ([]time.Duration, time.Duration) {
	ctx := context.Background()
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
	return lat[:per*callers], time.Since(start)
}

// idleNote says how this machine's idle processors wake, which moves every
// one-caller figure: a call through the host wakes processes four times
// where the direct server wakes twice, and on a virtual machine whose guest
// does not poll before it halts (cpuidle's haltpoll driver with
// guest_halt_poll_ns = 0) each wake of an idle vCPU leaves the guest. Even
// which settings help turns on it (README, PERFORMANCE: the fixed flow
// windows), so a figure is read beside this line.
func idleNote() string {
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			return "?"
		}
		return strings.TrimSpace(string(b))
	}
	driver := read("/sys/devices/system/cpu/cpuidle/current_driver")
	note := "machine: cpuidle driver " + driver
	if poll := read("/sys/module/haltpoll/parameters/guest_halt_poll_ns"); poll != "?" {
		note += ", guest_halt_poll_ns " + poll
		if poll == "0" {
			note += " (no polling before a halt: each wake of an idle vCPU leaves the guest)"
		}
	}
	return note
}

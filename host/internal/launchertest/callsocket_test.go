package launchertest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/mtls"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
)

// byHand is the test plugin started by hand with a socket folder of its
// own: a configured ToolServer client holding the host's certificate, the
// host's TLS settings, and the folder.
type byHand struct {
	rpc  pluginv1.ToolServerClient
	conf *tls.Config
	dir  string
}

func toolServer(t *testing.T) byHand {
	t.Helper()
	dir, err := os.MkdirTemp("", "sbcs") // short: a socket path has ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	hs := startByHand(t, fixtures.Build(t).TestPlugin, "PLUGIN_UNIX_SOCKET_DIR="+dir)
	roots := x509.NewCertPool()
	roots.AddCert(hs.pluginCert)
	conf := &tls.Config{Certificates: []tls.Certificate{hs.hostCert}, RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12}
	c, err := grpc.NewClient("passthrough:///plugin", grpc.WithTransportCredentials(credentials.NewTLS(conf)),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, hs.network, hs.addr)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	rpc := pluginv1.NewToolServerClient(c)
	if _, err := rpc.Configure(t.Context(), &pluginv1.ConfigureRequest{ServerName: "fixture", ProjectDir: t.TempDir()}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return byHand{rpc: rpc, conf: conf, dir: dir}
}

// offer asks for a call socket and returns it and its path.
func (h byHand) offer(t *testing.T) (*pluginv1.OpenCallSocketResponse, string) {
	t.Helper()
	offer, err := h.rpc.OpenCallSocket(t.Context(), &pluginv1.OpenCallSocketRequest{})
	if err != nil {
		t.Fatalf("OpenCallSocket: %v", err)
	}
	path := filepath.Join(h.dir, offer.GetName())
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("the offered socket %s: %v, %v", path, fi, err)
	}
	return offer, path
}

// counted asks the plugin, over its gRPC stream, how many count calls
// reached it.
func (h byHand) counted(t *testing.T) string {
	t.Helper()
	c := protocol.NewClient(h.rpc) // no DialCallSocket: the gRPC stream
	defer func() { _ = c.Close() }()
	res, err := c.Call(t.Context(), "calls", []byte(`{}`), nil)
	if err != nil {
		t.Fatalf("calls: %v", err)
	}
	return res.Text()
}

// frame is one message of the call socket: its length, then its bytes.
func frame(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...) //nolint:gosec // G115: test messages are small
}

func callFrame(t *testing.T, id uint64, tool, args string) []byte {
	t.Helper()
	b, err := proto.Marshal(&pluginv1.CallToolRequest{CallId: id, Kind: &pluginv1.CallToolRequest_Call{Call: &pluginv1.Call{Tool: tool, Arguments: []byte(args)}}})
	if err != nil {
		t.Fatal(err)
	}
	return frame(b)
}

// frames speaks the call socket on c as the host does.
type frames struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func newFrames(t *testing.T, c net.Conn) *frames { return &frames{t: t, c: c, r: bufio.NewReader(c)} }

func (f *frames) read() ([]byte, error) {
	_ = f.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var h [4]byte
	if _, err := io.ReadFull(f.r, h[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(h[:]))
	_, err := io.ReadFull(f.r, b)
	return b, err
}

// hello sends the token and checks the plugin's empty answer.
func (f *frames) hello(token []byte) {
	f.t.Helper()
	if _, err := f.c.Write(frame(token)); err != nil {
		f.t.Fatal(err)
	}
	if ack, err := f.read(); err != nil || len(ack) != 0 {
		f.t.Fatalf("the plugin's answer to the token = %q, %v; want an empty message", ack, err)
	}
}

// call makes one call and returns its text.
func (f *frames) call(id uint64, tool, args string) string {
	f.t.Helper()
	if _, err := f.c.Write(callFrame(f.t, id, tool, args)); err != nil {
		f.t.Fatal(err)
	}
	b, err := f.read()
	if err != nil {
		f.t.Fatalf("call %d (%s): %v", id, tool, err)
	}
	var ev pluginv1.CallToolEvent
	if err := proto.Unmarshal(b, &ev); err != nil {
		f.t.Fatal(err)
	}
	if ev.GetCallId() != id || ev.GetResult() == nil {
		f.t.Fatalf("call %d (%s): got %v", id, tool, &ev)
	}
	return ev.GetResult().GetContent()[0].GetText().GetText()
}

// readAll reads what a connection sends until it is closed (or 5 s pass).
func readAll(c net.Conn) []byte {
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, _ := io.ReadAll(c)
	return b
}

// A call socket serves only the host: mutual TLS with the certificates of
// the plugin's gRPC connection, then the token. Another process of the
// same user finds the socket in the plugin's folder and connects: in the
// clear with a call, in the clear with the right token (as if it had it),
// and over TLS with a certificate of its own and the right token. Each
// connection is closed unanswered and none of its calls runs; one that
// sends nothing, held open throughout, does not hold up the host's. Once
// the host has connected, the socket's name is gone.
func TestCallSocketServesOnlyTheHost(t *testing.T) {
	h := toolServer(t)
	offer, path := h.offer(t)

	silent, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = silent.Close() }()

	other, err := mtls.SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	for name, attack := range map[string]func() (net.Conn, error){
		"in the clear, a call": func() (net.Conn, error) {
			c, err := net.Dial("unix", path)
			if err == nil {
				_, _ = c.Write(callFrame(t, 1, "count", `{}`))
			}
			return c, err
		},
		"in the clear, the token and a call": func() (net.Conn, error) {
			c, err := net.Dial("unix", path)
			if err == nil {
				_, _ = c.Write(append(frame(offer.GetToken()), callFrame(t, 1, "count", `{}`)...))
			}
			return c, err
		},
		"TLS with another certificate, the token and a call": func() (net.Conn, error) {
			conf := h.conf.Clone()
			conf.Certificates = []tls.Certificate{other}
			c, err := tls.Dial("unix", path, conf)
			if err == nil {
				_, _ = c.Write(append(frame(offer.GetToken()), callFrame(t, 1, "count", `{}`)...))
			}
			return c, err
		},
	} {
		c, err := attack()
		if err != nil {
			continue // refused at the handshake: nothing ran
		}
		got := readAll(c)
		_ = c.Close()
		if len(got) >= 4 && bytes.Equal(got[:4], []byte{0, 0, 0, 0}) {
			t.Errorf("%s: the plugin answered as to the host: %q", name, got)
		}
	}

	// The host: the plugin serves.
	c, err := launcher.CallSocketDialer(h.dir, h.conf)(offer.GetName())
	if err != nil {
		t.Fatalf("the host's dial: %v", err)
	}
	defer func() { _ = c.Close() }()
	f := newFrames(t, c)
	f.hello(offer.GetToken())
	if got := f.call(10, "calls", `{}`); got != "0" {
		t.Errorf("count calls that reached the plugin from the attackers' connections = %s, want 0", got)
	}
	f.call(11, "count", `{}`)
	if got := f.call(12, "calls", `{}`); got != "1" {
		t.Errorf("after the host's own count call, calls = %s, want 1 (the counter works)", got)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("the socket's name %s is still there after the host connected: %v", path, err)
	}
	if c2, err := net.Dial("unix", path); err == nil {
		_ = c2.Close()
		t.Error("a second connection to the call socket succeeded")
	}
}

// relay is a process that put its own socket in the place of the plugin's
// call socket (renaming the plugin's aside, which any process of the same
// user can do in the plugin's socket folder: red team, 2026-12-07) and
// passes everything on, keeping a copy; inject, when sent bytes, writes
// them to the plugin as if the host had.
type relay struct {
	mu       sync.Mutex
	seen     bytes.Buffer
	inject   chan []byte
	accepted chan struct{}
}

func startRelay(t *testing.T, path string) *relay {
	t.Helper()
	aside := path + "-aside"
	if err := os.Rename(path, aside); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	r := &relay{inject: make(chan []byte, 1), accepted: make(chan struct{})}
	t.Cleanup(func() { close(r.inject) })
	go func() {
		host, err := ln.Accept()
		if err != nil {
			return
		}
		close(r.accepted)
		plugin, err := net.Dial("unix", aside)
		if err != nil {
			_ = host.Close()
			return
		}
		copyKeeping := func(dst, src net.Conn) {
			buf := make([]byte, 32<<10)
			for {
				n, err := src.Read(buf)
				if n > 0 {
					r.mu.Lock()
					r.seen.Write(buf[:n])
					r.mu.Unlock()
					if _, werr := dst.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			_ = dst.Close()
			_ = src.Close()
		}
		go copyKeeping(plugin, host)
		go func() {
			for b := range r.inject {
				_, _ = plugin.Write(b)
			}
		}()
		copyKeeping(host, plugin)
	}()
	return r
}

func (r *relay) saw(b []byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Contains(r.seen.Bytes(), b)
}

// The attack the red team made on the call socket before it spoke TLS: a
// process of the same user swaps its own socket in for the plugin's, the
// host connects to it, and it passes everything on to the plugin. Over
// mutual TLS it sees neither the token nor a call's arguments or result,
// and a call it slips in runs nothing: the plugin drops the connection.
func TestCallSocketRelayLearnsAndRunsNothing(t *testing.T) {
	h := toolServer(t)
	dial := launcher.CallSocketDialer(h.dir, h.conf)

	// A relay that only listens.
	offer, path := h.offer(t)
	r := startRelay(t, path)
	c, err := dial(offer.GetName())
	if err != nil {
		t.Fatalf("the host's dial through the relay: %v", err)
	}
	<-r.accepted
	f := newFrames(t, c)
	f.hello(offer.GetToken())
	const secret = "secret-argument-4711"
	if got := f.call(1, "echo", `{"text":"`+secret+`"}`); got != secret {
		t.Fatalf("echo through the relay = %q", got)
	}
	_ = c.Close()
	if r.saw(offer.GetToken()) {
		t.Error("the relay saw the token")
	}
	if r.saw([]byte(secret)) {
		t.Error("the relay saw a call's arguments or result")
	}

	// A relay that slips a call in once the host is in.
	offer, path = h.offer(t)
	r = startRelay(t, path)
	c, err = dial(offer.GetName())
	if err != nil {
		t.Fatalf("the host's dial through the relay: %v", err)
	}
	defer func() { _ = c.Close() }()
	f = newFrames(t, c)
	f.hello(offer.GetToken())
	r.inject <- callFrame(t, 99, "count", `{}`)
	if b, err := f.read(); err == nil {
		t.Errorf("the connection survived the relay's call: read %q", b)
	}
	if got := h.counted(t); got != "0" {
		t.Errorf("count calls that reached the plugin = %s, want 0: the relay's call ran", got)
	}
}

// A call socket nobody connects to with the token goes away on its own.
func TestCallSocketUnclaimedIsRemoved(t *testing.T) {
	t.Parallel() // it waits the plugin's 10 s
	h := toolServer(t)
	_, path := h.offer(t)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := os.Lstat(path); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the unclaimed call socket %s is still there after 15 s", path)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// within runs f and fails the test if it has not returned after limit
// (a hang, not a speed: limit is far above what f needs).
func within(t *testing.T, limit time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("%s did not return within %s", what, limit)
	}
}

// A plugin that stops reading (here stopped with SIGSTOP) holds nothing of
// the host's: a call whose argument fills the socket's buffer ends at its
// deadline, a call queued behind it gives up at its own, and closing the
// plugin returns (red team, 2026-12-07: a 1 MiB argument held its call
// past its timeout, every later call and the host's exit).
func TestPluginThatStopsReadingHoldsNothing(t *testing.T) {
	for _, route := range []string{protocol.RouteSocket, protocol.RouteStream} {
		t.Run(route, func(t *testing.T) {
			p := launch(t, launcher.Spec{})
			if route == protocol.RouteStream {
				p.Protocol().DialCallSocket = nil
			}
			if _, err := p.Call(t.Context(), "echo", []byte(`{"text":"hi"}`), nil); err != nil {
				t.Fatal(err)
			}
			if r := p.Protocol().CallRoute(); r != route {
				t.Fatalf("route %q, want %q", r, route)
			}
			if err := syscall.Kill(p.PID(), syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = syscall.Kill(p.PID(), syscall.SIGCONT) }()
			big := fmt.Appendf(nil, `{"text":%q}`, strings.Repeat("x", 16<<20)) // past any buffer and flow window
			errs := make(chan error, 2)
			within(t, 60*time.Second, "two calls to a plugin that reads nothing", func() {
				for range 2 {
					go func() {
						ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
						defer cancel()
						_, err := p.Call(ctx, "echo", big, nil)
						errs <- err
					}()
				}
				for range 2 {
					if err := <-errs; err == nil {
						t.Error("a call to a stopped plugin succeeded")
					}
				}
			})
			within(t, 60*time.Second, "closing the plugin", func() { _ = p.Close(context.Background()) })
		})
	}
}

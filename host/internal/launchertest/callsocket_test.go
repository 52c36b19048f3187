package launchertest

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
)

// toolServer starts the test plugin by hand with a socket folder of its
// own and returns a configured ToolServer client holding the host's
// certificate, and the folder.
func toolServer(t *testing.T) (pluginv1.ToolServerClient, string) {
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
	return rpc, dir
}

// frame is one message of the call socket: its length, then its bytes.
func frame(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...) //nolint:gosec // G115: test messages are small
}

func callFrame(t *testing.T, id uint64, tool string) []byte {
	t.Helper()
	b, err := proto.Marshal(&pluginv1.CallToolRequest{CallId: id, Kind: &pluginv1.CallToolRequest_Call{Call: &pluginv1.Call{Tool: tool, Arguments: []byte(`{}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	return frame(b)
}

// readAll reads what a connection sends until it is closed (or 5 s pass).
func readAll(c net.Conn) ([]byte, error) {
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	return io.ReadAll(c)
}

// A call socket runs calls only for the holder of its token, which only
// the host has (it came over the mutual-TLS connection): another process
// of the same user finds the socket in the plugin's folder and connects,
// with no token, with a wrong one, and with a call in place of one; each
// connection is closed unanswered and none of its calls runs, and one that
// sends nothing does not hold up the host's. Once the host has connected,
// the socket's name is gone.
func TestCallSocketServesOnlyTheTokenHolder(t *testing.T) {
	rpc, dir := toolServer(t)
	offer, err := rpc.OpenCallSocket(t.Context(), &pluginv1.OpenCallSocketRequest{})
	if err != nil {
		t.Fatalf("OpenCallSocket: %v", err)
	}
	path := filepath.Join(dir, offer.GetName())
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("the offered socket %s: %v, %v", path, fi, err)
	}

	// A connection that sends nothing, held open throughout, holds up
	// nobody.
	silent, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = silent.Close() }()

	wrong := make([]byte, len(offer.GetToken()))
	copy(wrong, offer.GetToken())
	wrong[0] ^= 1
	for name, first := range map[string][]byte{
		"a wrong token":       frame(wrong),
		"a call instead":      callFrame(t, 1, "count"),
		"a token cut short":   frame(offer.GetToken()[:16]),
		"the token, unframed": offer.GetToken(),
	} {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatalf("%s: dial: %v", name, err)
		}
		_, _ = c.Write(append(first, callFrame(t, 2, "count")...))
		got, _ := readAll(c)
		_ = c.Close()
		if len(got) != 0 {
			t.Errorf("%s: the plugin answered %q", name, got)
		}
	}

	// The host, with the token: the plugin takes it and serves.
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("the host's dial: %v", err)
	}
	defer func() { _ = c.Close() }()
	if _, err := c.Write(frame(offer.GetToken())); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	readFrame := func() []byte {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var h [4]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			t.Fatalf("reading an answer: %v", err)
		}
		b := make([]byte, binary.BigEndian.Uint32(h[:]))
		if _, err := io.ReadFull(r, b); err != nil {
			t.Fatalf("reading an answer: %v", err)
		}
		return b
	}
	if ack := readFrame(); len(ack) != 0 {
		t.Fatalf("the plugin's answer to the token = %q, want an empty message", ack)
	}
	call := func(id uint64, tool string) string {
		t.Helper()
		if _, err := c.Write(callFrame(t, id, tool)); err != nil {
			t.Fatal(err)
		}
		var ev pluginv1.CallToolEvent
		if err := proto.Unmarshal(readFrame(), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.GetCallId() != id || ev.GetResult() == nil {
			t.Fatalf("call %d (%s): got %v", id, tool, &ev)
		}
		return ev.GetResult().GetContent()[0].GetText().GetText()
	}
	if got := call(10, "calls"); got != "0" {
		t.Errorf("count calls that reached the plugin from the attacker's connections = %s, want 0", got)
	}
	call(11, "count")
	if got := call(12, "calls"); got != "1" {
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

// A call socket nobody connects to with the token goes away on its own.
func TestCallSocketUnclaimedIsRemoved(t *testing.T) {
	t.Parallel() // it waits the plugin's 10 s
	rpc, dir := toolServer(t)
	offer, err := rpc.OpenCallSocket(t.Context(), &pluginv1.OpenCallSocketRequest{})
	if err != nil {
		t.Fatalf("OpenCallSocket: %v", err)
	}
	path := filepath.Join(dir, offer.GetName())
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

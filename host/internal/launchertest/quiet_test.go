package launchertest

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/switchboard-mcp/switchboard/sdk"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/quietio"
	"github.com/switchboard-mcp/switchboard/sdk/sdktest"
)

func unixPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var conns [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = c
	}
	return conns[0], conns[1]
}

// pingPong makes n round trips of a short message from a to b and back.
func pingPong(t *testing.T, a, b io.ReadWriter, n int) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 16)
		for range n {
			if _, err := io.ReadFull(b, buf[:4]); err != nil {
				t.Error(err)
				return
			}
			if _, err := b.Write(buf[:4]); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	buf := make([]byte, 4)
	for range n {
		if _, err := a.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(a, buf); err != nil {
			t.Fatal(err)
		}
	}
	<-done
}

// TestQuietIOSkipsTheRuntimesSyscallPath checks what package quietio is
// for: its reads and writes do not go through the runtime's system call
// bookkeeping, which is what wakes the monitor thread of an idle process.
// The plain socket beside them shows the check sees such calls.
func TestQuietIOSkipsTheRuntimesSyscallPath(t *testing.T) {
	const n = 200
	a, b := unixPair(t)
	if plain := fixtures.SystemCalls(t, func() { pingPong(t, a, b, n) }); len(plain) < 2*n {
		t.Fatalf("%d round trips on a plain socket made %d ordinary system calls in the trace; want at least %d (is the trace check blind?)", n, len(plain), 2*n)
	}
	a, b = unixPair(t)
	fixtures.QuietCalls(t, "round trips on quiet sockets", n, func() { pingPong(t, quietio.Conn(a), quietio.Conn(b), n) })

	r1, w1, _ := os.Pipe()
	r2, w2, _ := os.Pipe()
	for _, f := range []*os.File{r1, w1, r2, w2} {
		defer f.Close()
	}
	end1 := struct {
		io.Reader
		io.Writer
	}{quietio.Stream(r2), quietio.Stream(w1)}
	end2 := struct {
		io.Reader
		io.Writer
	}{quietio.Stream(r1), quietio.Stream(w2)}
	fixtures.QuietCalls(t, "round trips on quiet pipes", n, func() { pingPong(t, end1, end2, n) })

	f, err := os.OpenFile(filepath.Join(t.TempDir(), "audit.jsonl"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := quietio.FileWriter(f)
	if w == io.Writer(f) {
		t.Skip("the temporary directory is not on a local disk file system")
	}
	fixtures.QuietCalls(t, "quiet writes to a file", n, func() {
		for range n {
			if _, err := w.Write([]byte(`{"tool":"fx__echo"}` + "\n")); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestPluginCallsMakeNoSystemCalls: the host's side of calls to a
// plugin, launched as the host launches it, makes no ordinary system call.
func TestPluginCallsMakeNoSystemCalls(t *testing.T) {
	p := launch(t, launcher.Spec{})
	echo := func() {
		if _, err := p.Call(t.Context(), "echo", []byte(`{"text":"ping"}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	echo() // connected
	const n = 200
	fixtures.QuietCalls(t, "calls to a plugin", n, func() {
		for range n {
			echo()
		}
	})
}

// TestInProcessPluginCallsMakeNoSystemCalls: sdktest's in-process plugin
// has the same quiet connection, both ends in this process.
func TestInProcessPluginCallsMakeNoSystemCalls(t *testing.T) {
	s := sdk.NewServer("quiet", "1.0.0")
	type in struct {
		Text string `json:"text" jsonschema:"what to echo"`
	}
	sdk.AddTool(s, sdk.Tool{Name: "echo", Description: "Echoes text."}, func(_ context.Context, _ *sdk.Request, a in) (*sdk.Result, error) {
		return sdk.Text(a.Text), nil
	})
	p := sdktest.StartInProcess(t, s)
	const n = 200
	p.Call("echo", map[string]any{"text": "warm"})
	fixtures.QuietCalls(t, "in-process calls", n, func() {
		for range n {
			p.Call("echo", map[string]any{"text": "ping"})
		}
	})
}

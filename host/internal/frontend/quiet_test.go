package frontend

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/internal/fixtures"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/quietio"
)

// TestStdioCallsMakeNoSystemCalls: a tools/call over real stdin and
// stdout pipes, through the registry (durable audit records) to a plugin
// and back, makes no system call through the runtime's bookkeeping (which
// wakes an idle process's monitor thread: sdk/protocol/quietio). The
// client's side of the pipes is this test's and is not counted.
func TestStdioCallsMakeNoSystemCalls(t *testing.T) {
	dir := t.TempDir()
	// Durable records are written quietly only on a local disk file
	// system; elsewhere they are written in the background, a few
	// batches during the calls.
	probe, err := os.Create(filepath.Join(dir, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	durable := quietio.FileWriter(probe) != io.Writer(probe)
	probe.Close()
	audit, err := registry.OpenAudit(filepath.Join(dir, "audit.jsonl"), 1<<30, 1, durable)
	if err != nil {
		t.Fatal(err)
	}
	p, err := launcher.Launch(t.Context(), launcher.Spec{Name: "fx", Path: fixtures.Build(t).TestPlugin, ProjectDir: dir}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New(nil, registry.WithDuplicateLimit(0), registry.WithAudit(audit))
	if err := reg.Register(p, registry.KindPlugin, "test"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Shutdown(context.Background(), 5*time.Second) })

	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	inR.Fd() // blocking, as a client's pipes are
	outW.Fd()
	done := make(chan error, 1)
	go func() { done <- New(reg, "test", hclog.NewNullLogger()).ServeStdio(context.Background(), inR, outW) }()
	t.Cleanup(func() {
		inW.Close()
		<-done
		outR.Close()
	})
	out := bufio.NewReader(outR)
	exchange := func(id int, msg string) {
		t.Helper()
		if _, err := fmt.Fprintln(inW, msg); err != nil {
			t.Fatal(err)
		}
		if id == 0 {
			return
		}
		for {
			line, err := out.ReadString('\n')
			if err != nil {
				t.Fatalf("reading the answer to %d: %v", id, err)
			}
			if strings.Contains(line, fmt.Sprintf(`"id":%d,`, id)) {
				if strings.Contains(line, `"isError":true`) || strings.Contains(line, `"error"`) {
					t.Fatalf("call %d failed: %s", id, line)
				}
				return
			}
		}
	}
	exchange(1, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	exchange(0, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	call := func(id int) {
		exchange(id, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"ping"}}}`, id))
	}
	call(2)
	const n = 200
	fixtures.QuietCalls(t, "tools/call requests over stdio", n, func() {
		defer fixtures.Uncounted()()
		for id := 3; id < 3+n; id++ {
			call(id)
		}
	})
	// The client's pipes are as it left them, in blocking mode: another
	// process holding them (sharing the client's stdout) would get EAGAIN
	// otherwise. The quiet calls do not need the non-blocking mode.
	for _, f := range []*os.File{inR, outW} {
		fl := 0
		rc, err := f.SyscallConn() // not f.Fd(), which puts it in blocking mode
		if err == nil {
			_ = rc.Control(func(fd uintptr) { fl, err = unix.FcntlInt(fd, unix.F_GETFL, 0) })
		}
		if err != nil || fl&unix.O_NONBLOCK != 0 {
			t.Errorf("%s in non-blocking mode while serving (flags %#x, %v); want it as the client left it", f.Name(), fl, err)
		}
	}
	// The records were written.
	if !durable {
		_ = audit.Close() // writes what is queued
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "audit.jsonl")); strings.Count(string(b), `"tool":"fx.echo"`) < n {
		t.Errorf("the audit log has %d records of fx.echo; want at least %d", strings.Count(string(b), `"tool":"fx.echo"`), n)
	}
}

// A client that closes its end of stdout (and leaves stdin open) ends the
// session: the first answer that cannot be written stops it, as SIGPIPE
// stopped the host before stdout was written quietly.
func TestStdioSessionEndsWhenStdoutIsClosed(t *testing.T) {
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inW.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	inR.Fd() // blocking, as a client's pipes are
	outW.Fd()
	reg, _ := fixtureRegistry(t, nil)
	done := make(chan error, 1)
	go func() { done <- New(reg, "test", hclog.NewNullLogger()).ServeStdio(context.Background(), inR, outW) }()
	if _, err := fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(outR).ReadString('\n'); err != nil || !strings.Contains(line, `"id":1`) {
		t.Fatalf("initialize answer: %q, %v", line, err)
	}
	outR.Close()
	for id := 2; ; id++ {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ServeStdio = %v; want nil (the client is gone, as at the end of its input)", err)
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
		if id > 100 {
			t.Fatal("ServeStdio still serving 10 s after the client closed stdout")
		}
		// Calls keep coming on stdin; their answers cannot be written.
		if _, err := fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"x"}}}`+"\n", id); err != nil {
			t.Fatal(err)
		}
	}
}

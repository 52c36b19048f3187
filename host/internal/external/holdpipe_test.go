package external

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

// envHoldPipeServer names the fixture server for the child process of
// TestServerHoldingItsPipeFreezesNothing.
const envHoldPipeServer = "EXTERNAL_HOLDPIPE_SERVER"

// A stdio server can hold its stdin pipe's lock for as long as it likes
// (splice into a full socket: the fixture's holdpipe fault), so a write
// of the host's to that pipe can wait without end. The host writes it the
// ordinary way, where the runtime hands the scheduler slot on; written
// with a raw system call (sdk/protocol/quietio) it froze the whole host
// (red team, 2026-12-07). The host here is a child process of the test
// with one scheduler slot, as serve runs: its timers must keep firing.
func TestServerHoldingItsPipeFreezesNothing(t *testing.T) {
	if os.Getenv(envHoldPipeServer) != "" {
		t.Skip("in the child")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHoldPipeChild$", "-test.v")
	cmd.Env = append(os.Environ(), envHoldPipeServer+"="+fixtures.Build(t).MCPServer)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil || !strings.Contains(out.String(), "host still running") {
			t.Fatalf("child: %v\n%s", err, &out)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the host froze once the server held its stdin pipe (its timers stopped):\n%s", &out)
	}
}

// TestHoldPipeChild is the child's side of the test above.
func TestHoldPipeChild(t *testing.T) {
	server := os.Getenv(envHoldPipeServer)
	if server == "" {
		t.Skip("only as TestServerHoldingItsPipeFreezesNothing's child")
	}
	runtime.GOMAXPROCS(1)
	s, err := Connect(context.Background(), Spec{Name: "ext", Command: server, Timeout: 30 * time.Second}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	if res, err := s.Call(context.Background(), "fault", []byte(`{"kind":"holdpipe"}`), nil); err != nil || res.IsError {
		t.Fatalf("fault holdpipe: %v, %v", res, err)
	}
	// Once a message is in the pipe, the server's splice takes it and
	// holds the lock; the next message, or a call's cancellation at its
	// deadline, waits for the lock for good.
	for range 10 {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, _ = s.Call(ctx, "echo", []byte(`{"text":"x"}`), nil)
		}()
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	runtime.Gosched()
	fmt.Println("host still running")
	os.Exit(0) // the server holds its pipe for good: no clean close
}

package launchertest

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
)

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
// the host's: a call whose argument fills the flow-control window and the
// socket's buffer ends at its deadline, a call queued behind it gives up
// at its own, and closing the plugin returns (red team, 2026-12-07: such an
// argument held its call past its timeout, every later call and the
// host's exit).
func TestPluginThatStopsReadingHoldsNothing(t *testing.T) {
	p := launch(t, launcher.Spec{})
	if _, err := p.Call(t.Context(), "echo", []byte(`{"text":"hi"}`), nil); err != nil {
		t.Fatal(err)
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
}

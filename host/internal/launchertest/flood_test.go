package launchertest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
)

// A plugin's log events are limited as its stderr is: rate and line length.
// How many are dropped depends on how fast the plugin sends them, so the
// test holds the total and each line (red team, 2026-12-07: 100 MiB
// messages in a loop wrote 2.7 GB to the host's stderr in 10 s, and held
// the host once nothing read its stderr).
func TestLogEventFloodIsLimited(t *testing.T) {
	var out fixtures.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Info})
	p, err := launcher.Launch(t.Context(), launcher.Spec{Path: fixtures.Build(t).TestPlugin, Name: "fixture", ProjectDir: t.TempDir()}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	// 32 MB of messages and as much in a field.
	if _, err := p.Call(t.Context(), "fault", []byte(`{"kind":"logs","mb":32}`), nil); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if n := strings.Count(got, "log flood"); n == 0 {
		t.Fatal("no log event reached the host's log")
	}
	if len(got) > 16<<20 {
		t.Errorf("the host logged %d MB of a plugin's 64 MB of log events; want them limited to a few MB", len(got)>>20)
	}
	for line := range strings.SplitSeq(got, "\n") {
		if len(line) > 32<<10 {
			t.Fatalf("a log line of %d bytes: want long messages and fields cut", len(line))
		}
	}
}

// A call whose plugin sends requests to the client without waiting for
// their answers ends once more than MaxClientRequests wait, rather than the
// host starting a goroutine for each until the call's timeout (red team,
// 2026-12-07: 5 GB in 40 s).
func TestClientRequestFloodEndsTheCall(t *testing.T) {
	p := launch(t, launcher.Spec{})
	var mu sync.Mutex
	n := 0
	ctx := protocol.WithClientRequester(t.Context(), func(ctx context.Context, method string, _ []byte) ([]byte, error) {
		mu.Lock()
		n++
		mu.Unlock()
		<-ctx.Done() // a client that takes its time
		return nil, ctx.Err()
	})
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var err error
	within(t, time.Minute, "a call flooding its client with requests", func() {
		_, err = p.Call(ctx, "fault", []byte(`{"kind":"ask"}`), nil)
	})
	if err == nil || !strings.Contains(err.Error(), "requests to the client") {
		t.Fatalf("Call: %v; want the call ended for its requests to the client", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n > protocol.MaxClientRequests {
		t.Errorf("the client was asked %d times at once; want at most %d", n, protocol.MaxClientRequests)
	}
	// The plugin still answers.
	if _, err := p.Call(t.Context(), "echo", []byte(`{"text":"hi"}`), nil); err != nil {
		t.Errorf("a call after the flood: %v", err)
	}
}

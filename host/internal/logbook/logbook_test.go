package logbook

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

func TestRoutesByLoggerName(t *testing.T) {
	b := New("switchboard")
	b.Accept("switchboard.plugin.fs", hclog.Warn, "from the plugin", "k", "v", "timestamp", "x")
	b.Accept("switchboard.fs", hclog.Debug, "host about fs")
	b.Accept("switchboard.plugin", hclog.Info, "plugin process exited", "plugin", "fs")
	b.Accept("switchboard.external.notes", hclog.Info, "connected")
	b.Accept("switchboard", hclog.Info, "the host itself")
	b.Accept("other.fs", hclog.Info, "not ours")
	b.Accept("switchboard.fs", hclog.Trace, "below the book's level")

	got := b.Lines("fs", time.Time{})
	want := []string{"from the plugin", "host about fs", "plugin process exited"}
	if len(got) != len(want) {
		t.Fatalf("fs lines = %v, want %v", got, want)
	}
	for i, l := range got {
		if l.Message != want[i] {
			t.Errorf("line %d = %q, want %q", i, l.Message, want[i])
		}
	}
	if got[0].Fields["k"] != "v" || got[0].Fields["timestamp"] != "" {
		t.Errorf("fields = %v, want k=v and no timestamp", got[0].Fields)
	}
	if n := len(b.Lines("notes", time.Time{})); n != 1 {
		t.Errorf("notes has %d lines, want 1", n)
	}
}

func TestBounded(t *testing.T) {
	b := New("switchboard")
	clock := time.Unix(0, 0)
	b.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	for i := range MaxLines + 10 {
		b.Accept("switchboard.fs", hclog.Info, fmt.Sprint(i))
	}
	got := b.Lines("fs", time.Time{})
	if len(got) != MaxLines || got[0].Message != "10" || got[len(got)-1].Message != fmt.Sprint(MaxLines+9) {
		t.Fatalf("ring holds %d lines from %q to %q, want the last %d in order", len(got), got[0].Message, got[len(got)-1].Message, MaxLines)
	}
	since := b.Lines("fs", got[len(got)-3].Time)
	if len(since) != 3 {
		t.Errorf("since the third-last line: %d lines, want 3", len(since))
	}

	_, _, stop := b.Follow("s0", time.Time{}) // followed: never dropped
	defer stop()
	for i := range MaxServers + 5 {
		b.Accept(fmt.Sprintf("switchboard.s%d", i), hclog.Info, "x")
	}
	if len(b.rings) > MaxServers {
		t.Errorf("%d rings, want at most %d", len(b.rings), MaxServers)
	}
	if _, ok := b.rings["s0"]; !ok {
		t.Error("the followed ring was dropped")
	}
	if _, ok := b.rings["s1"]; ok {
		t.Error("the ring written least recently (s1) was kept")
	}
}

func TestSlowFollowerNeverBlocks(t *testing.T) {
	b := New("switchboard")
	_, next, stop := b.Follow("fs", time.Time{})
	defer stop()
	done := make(chan struct{})
	go func() {
		for range 10 * followBuffer { // nobody reads next
			b.Accept("switchboard.fs", hclog.Info, "line")
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("logging blocked on a follower that does not read")
	}
	if n := len(next); n != followBuffer {
		t.Errorf("follower buffered %d lines, want %d", n, followBuffer)
	}
}

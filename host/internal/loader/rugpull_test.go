package loader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/host/internal/pluginstore"
	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

// startExternalChanger starts a host on a config with one external server
// (the fixture MCP server, whose add_tool tool adds a tool "surprise" and
// sends tools/list_changed) and returns the host.
func startExternalChanger(t *testing.T) *Host {
	t.Helper()
	bins := fixtures.Build(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "project"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Unconfined: in-process, an external server's sandbox helper would
	// be the running executable (this test binary), and the sandbox is
	// not what this test is about. The switchboard built-in is left out:
	// only ext matters here.
	src := fmt.Sprintf("project_dir = \"project\"\ndata_dir = \"state\"\nbuiltin \"switchboard\" { enabled = false }\nexternal \"ext\" {\n  command = %q\n  env = { FIXTURE_FEATURES = \"1\" }\n  sandbox { mode = \"off\" }\n}\n", bins.MCPServer)
	h, err := Start(t.Context(), writeConfig(t, dir, src), Options{Self: bins.Switchboard, Logger: hclog.NewNullLogger(), WaitAll: true})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := h.Registry().Shutdown(context.Background(), time.Second); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	if _, err := h.Registry().Lookup("ext.echo"); err != nil {
		t.Fatalf("ext is not serving: %v", err)
	}
	return h
}

// lister lists the host's tools and looks the added tool up, on several
// goroutines at once, until stopped; seen counts the listings and lookups
// that showed the added tool.
type lister struct {
	seen, rounds atomic.Int64
	stop         chan struct{}
	wg           sync.WaitGroup
}

func listConcurrently(h *Host, workers int) *lister {
	l := &lister{stop: make(chan struct{})}
	for range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				for _, tl := range h.Registry().Tools() {
					if tl.Name == "ext.surprise" {
						l.seen.Add(1)
					}
				}
				if _, err := h.Registry().Lookup("ext.surprise"); err == nil {
					l.seen.Add(1)
				}
				l.rounds.Add(1)
			}
		}()
	}
	return l
}

func (l *lister) end() {
	close(l.stop)
	l.wg.Wait()
}

// TestChangedSurfaceNeverListed: an external server that adds a tool while
// it runs (tools/list_changed) is quarantined without its new tool ever
// being listed or resolvable, while four goroutines list the tools the
// whole time: the host vets the new surface before the server adopts it.
// The control runs the same change with the vet hook removed: the new tool
// is listed then (nothing takes the server out), which shows the listers
// would have seen a surface adopted before its check.
func TestChangedSurfaceNeverListed(t *testing.T) {
	t.Run("vetted", func(t *testing.T) {
		h := startExternalChanger(t)
		l := listConcurrently(h, 4)
		if _, err := h.Registry().Call(t.Context(), "ext.add_tool", []byte(`{}`), nil); err != nil {
			l.end()
			t.Fatalf("add_tool: %v", err)
		}
		quarantined := func() bool {
			for _, f := range h.Registry().Failures() {
				if f.Name == "ext" && errors.Is(f.Err, pluginstore.ErrQuarantined) {
					return true
				}
			}
			return false
		}
		ok := eventuallyTrue(30*time.Second, func() bool { return quarantined() && h.Registry().Entry("ext") == nil })
		before := l.rounds.Load()
		// Go on listing a while after the quarantine, in case a late
		// adoption would show it.
		eventuallyTrue(30*time.Second, func() bool { return l.rounds.Load() > before+1000 })
		l.end()
		if !ok {
			t.Fatalf("ext was not quarantined after changing its tools: failures %v", h.Registry().Failures())
		}
		if n := l.seen.Load(); n > 0 {
			t.Errorf("the added tool was listed or resolvable %d times in %d rounds; a changed surface must not be listed before its check", n, l.rounds.Load())
		}
		if l.rounds.Load() == 0 {
			t.Error("the listers never listed")
		}
		for _, tl := range h.Registry().Tools() {
			if tl.Server == "ext" {
				t.Errorf("a quarantined server's tool is listed: %s", tl.Name)
			}
		}
	})
	t.Run("control without the vet hook", func(t *testing.T) {
		h := startExternalChanger(t)
		h.sup.SetVet(nil)
		l := listConcurrently(h, 4)
		if _, err := h.Registry().Call(t.Context(), "ext.add_tool", []byte(`{}`), nil); err != nil {
			l.end()
			t.Fatalf("add_tool: %v", err)
		}
		ok := eventuallyTrue(30*time.Second, func() bool { return l.seen.Load() > 0 })
		l.end()
		if !ok {
			t.Fatalf("without the vet hook the added tool was never listed in %d rounds: the test cannot tell the hook works", l.rounds.Load())
		}
	})
}

// eventuallyTrue polls cond until it holds or d has passed.
func eventuallyTrue(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cond()
}

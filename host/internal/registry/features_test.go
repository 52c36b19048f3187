package registry

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/feature"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// eventServer is a stubServer with features whose events are sent from
// its events channel.
type eventServer struct {
	stubServer
	events chan feature.Event
}

func (s *eventServer) ReadResource(context.Context, string) ([]toolcall.Content, error) {
	return nil, nil
}

func (s *eventServer) GetPrompt(context.Context, string, map[string]string) (*feature.PromptResult, error) {
	return &feature.PromptResult{}, nil
}

func (s *eventServer) Complete(context.Context, feature.CompleteRequest) (*feature.Completion, error) {
	return &feature.Completion{}, nil
}

func (s *eventServer) Subscribe(context.Context, string, bool) error { return nil }

func (s *eventServer) Watch(ctx context.Context, fn func(feature.Event)) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev := <-s.events:
			fn(ev)
		}
	}
}

// The registry watches a feature server while it is registered: a list
// change refreshes it (subscribers hear of it) and every event reaches the
// listeners; Remove and Shutdown end the watch (goleak checks).
func TestRegistryWatchesEvents(t *testing.T) {
	r := New(nil)
	a := &eventServer{stubServer: stubServer{name: "a"}, events: make(chan feature.Event)}
	b := &eventServer{stubServer: stubServer{name: "b"}, events: make(chan feature.Event)}
	for _, s := range []*eventServer{a, b} {
		if err := r.Register(s, KindPlugin, "test"); err != nil {
			t.Fatal(err)
		}
	}
	refreshed := make(chan struct{}, 4)
	r.Subscribe(func() { refreshed <- struct{}{} })
	type got struct {
		server string
		ev     feature.Event
	}
	events := make(chan got, 4)
	r.OnEvent(func(server string, ev feature.Event) { events <- got{server, ev} })
	if _, ok := r.Features("a"); !ok {
		t.Fatal("Features(a) = false, want a's features")
	}

	a.events <- feature.Event{Kind: feature.ListChanged}
	select {
	case <-refreshed:
	case <-time.After(5 * time.Second):
		t.Fatal("a list change did not refresh the registry")
	}
	b.events <- feature.Event{Kind: feature.ResourceUpdated, URI: "u://x"}
	for _, want := range []got{{"a", feature.Event{Kind: feature.ListChanged}}, {"b", feature.Event{Kind: feature.ResourceUpdated, URI: "u://x"}}} {
		select {
		case g := <-events:
			if g.server != want.server || g.ev.Kind != want.ev.Kind || g.ev.URI != want.ev.URI {
				t.Errorf("event = %+v, want %+v", g, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no event %+v", want)
		}
	}
	if err := r.Remove(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	if err := r.Shutdown(t.Context(), time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestPrefix(t *testing.T) {
	r := New(nil)
	r.SetPrefixes(map[string]string{"a": "", "b": "bee"})
	for server, want := range map[string]string{"a": "", "b": "bee", "c": "c"} {
		if got := r.Prefix(server); got != want {
			t.Errorf("Prefix(%q) = %q, want %q", server, got, want)
		}
	}
}

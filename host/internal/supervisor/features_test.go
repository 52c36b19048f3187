package supervisor

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/feature"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// featureInstance is a fakeInstance with features: it records
// subscriptions and sends the events put on its events channel.
type featureInstance struct {
	*fakeInstance
	subs   chan string
	events chan feature.Event
}

func newFeatureInstance(id string) *featureInstance {
	return &featureInstance{fakeInstance: newFakeInstance(id), subs: make(chan string, 8), events: make(chan feature.Event, 8)}
}

func (f *featureInstance) ReadResource(context.Context, string) ([]toolcall.Content, error) {
	return []toolcall.Content{{Type: toolcall.TypeResource, Text: f.id}}, nil
}

func (f *featureInstance) GetPrompt(context.Context, string, map[string]string) (*feature.PromptResult, error) {
	return &feature.PromptResult{}, nil
}

func (f *featureInstance) Complete(context.Context, feature.CompleteRequest) (*feature.Completion, error) {
	return &feature.Completion{}, nil
}

func (f *featureInstance) Subscribe(_ context.Context, uri string, on bool) error {
	if on {
		f.subs <- uri
	}
	return nil
}

func (f *featureInstance) Watch(ctx context.Context, fn func(feature.Event)) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-f.done:
			return nil
		case ev := <-f.events:
			fn(ev)
		}
	}
}

var _ feature.Server = (*featureInstance)(nil)

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("no %s", what)
		var zero T
		return zero
	}
}

// A supervised server forwards its features to the current instance,
// passes on the events of each instance in turn, and renews its
// subscriptions on a new instance.
func TestFeaturesFollowTheInstance(t *testing.T) {
	h := newHarness(t)
	first := newFeatureInstance("i0")
	var mu sync.Mutex
	var second *featureInstance
	start := func(context.Context) (Instance, error) {
		mu.Lock()
		defer mu.Unlock()
		second = newFeatureInstance("i1")
		return second, nil
	}
	srv := h.sup.Add("fake", first, start, noJitter)

	events := make(chan feature.Event, 8)
	ctx, cancel := context.WithCancel(t.Context())
	watched := make(chan error, 1)
	go func() { watched <- srv.Watch(ctx, func(ev feature.Event) { events <- ev }) }()

	if err := srv.Subscribe(t.Context(), "u://a", true); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, first.subs, "subscription"); got != "u://a" {
		t.Errorf("first instance subscribed to %q, want u://a", got)
	}
	first.events <- feature.Event{Kind: feature.ResourceUpdated, URI: "u://a"}
	if got := recv(t, events, "event of the first instance"); got.URI != "u://a" {
		t.Errorf("event = %+v", got)
	}

	first.exit()
	h.waitFor(t, srv, "reconnecting", inState(Reconnecting))
	h.clock.Advance(time.Second)
	h.waitFor(t, srv, "ready again", inState(Ready))
	mu.Lock()
	next := second
	mu.Unlock()
	if got := recv(t, next.subs, "renewed subscription"); got != "u://a" {
		t.Errorf("new instance subscribed to %q, want u://a", got)
	}
	next.events <- feature.Event{Kind: feature.ListChanged}
	if got := recv(t, events, "event of the new instance"); got.Kind != feature.ListChanged {
		t.Errorf("event = %+v", got)
	}
	if c, err := srv.ReadResource(t.Context(), "u://a"); err != nil || len(c) != 1 || c[0].Text != "i1" {
		t.Errorf("ReadResource = %+v, %v; want the new instance's", c, err)
	}

	cancel()
	if err := recv(t, watched, "end of Watch"); err == nil {
		t.Error("Watch returned nil after its context ended")
	}
	if err := srv.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// changingInstance is a featureInstance whose description can change
// while it runs, as an external server's after tools/list_changed.
type changingInstance struct {
	*featureInstance
	desc atomic.Pointer[toolcall.Description]
}

func (c *changingInstance) Describe() *toolcall.Description { return c.desc.Load() }

// The vet hook (SetVet) sees a list change before the server adopts it: a
// refused description is never the server's and its event is not passed
// on; an accepted one is adopted and passed on.
func TestVetHoldsAListChange(t *testing.T) {
	h := newHarness(t)
	inst := &changingInstance{featureInstance: newFeatureInstance("i0")}
	inst.desc.Store(&toolcall.Description{Name: "fake", Tools: []*toolcall.Tool{{Name: "echo"}}})
	vetted := make(chan []string, 4)
	var refuse atomic.Bool
	refuse.Store(true)
	h.sup.SetVet(func(name string, d *toolcall.Description) error {
		var names []string
		for _, tl := range d.Tools {
			names = append(names, tl.Name)
		}
		vetted <- names
		if refuse.Load() {
			return errors.New("surface changed")
		}
		return nil
	})
	srv := h.sup.Add("fake", inst, func(context.Context) (Instance, error) { return nil, errors.New("no restarts here") }, noJitter)
	events := make(chan feature.Event, 8)
	go func() { _ = srv.Watch(t.Context(), func(ev feature.Event) { events <- ev }) }()
	tools := func() []string {
		var out []string
		for _, tl := range srv.Describe().Tools {
			out = append(out, tl.Name)
		}
		return out
	}

	inst.desc.Store(&toolcall.Description{Name: "fake", Tools: []*toolcall.Tool{{Name: "echo"}, {Name: "surprise"}}})
	inst.events <- feature.Event{Kind: feature.ListChanged}
	if got := recv(t, vetted, "vet of the change"); !slices.Equal(got, []string{"echo", "surprise"}) {
		t.Errorf("vet saw %v, want the new tools", got)
	}
	if got := tools(); !slices.Equal(got, []string{"echo"}) {
		t.Errorf("after a refused change the server describes %v, want [echo]", got)
	}
	// The next event is the first passed on: the refused one was dropped.
	// Events are handled in order, so once it is passed on the refusal
	// has been recorded.
	inst.events <- feature.Event{Kind: feature.ResourceUpdated, URI: "u://after"}
	if got := recv(t, events, "event after the refused change"); got.Kind != feature.ResourceUpdated {
		t.Errorf("first event passed on = %+v, want the resource update (the refused list change dropped)", got)
	}
	// Nor does a call reach the changed instance under the old names.
	before := inst.calls.Load()
	if _, err := srv.Call(t.Context(), "echo", nil, nil); err == nil || !strings.Contains(err.Error(), "surface changed") {
		t.Errorf("call after a refused change = %v, want refused with the vet's reason", err)
	}
	if n := inst.calls.Load(); n != before {
		t.Errorf("a call reached the instance after its change was refused (%d calls)", n-before)
	}

	refuse.Store(false)
	inst.events <- feature.Event{Kind: feature.ListChanged}
	recv(t, vetted, "vet of the accepted change")
	if got := recv(t, events, "accepted list change"); got.Kind != feature.ListChanged {
		t.Errorf("event = %+v, want the list change", got)
	}
	if got := tools(); !slices.Equal(got, []string{"echo", "surprise"}) {
		t.Errorf("after an accepted change the server describes %v", got)
	}
	if _, err := srv.Call(t.Context(), "surprise", nil, nil); err != nil {
		t.Errorf("call after an accepted change = %v", err)
	}
	if err := srv.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

package launchertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
)

// outcome is everything a call returned at the level of the wire.
type outcome struct {
	events []*pluginv1.CallToolEvent // call ids cleared
	result *pluginv1.Result
	code   protocol.Code
	msg    string
}

func (o outcome) String() string {
	var b strings.Builder
	for _, ev := range o.events {
		fmt.Fprintf(&b, "event %s\n", prototext.Format(ev))
	}
	if o.result != nil {
		fmt.Fprintf(&b, "result %.300s\n", prototext.Format(o.result))
	}
	if o.code != 0 || o.msg != "" {
		fmt.Fprintf(&b, "error %s: %s\n", o.code, o.msg)
	}
	return b.String()
}

func (o outcome) equal(p outcome) bool {
	if len(o.events) != len(p.events) || !proto.Equal(o.result, p.result) || o.code != p.code || o.msg != p.msg {
		return false
	}
	for i := range o.events {
		if !proto.Equal(o.events[i], p.events[i]) {
			return false
		}
	}
	return true
}

// corpusCase is one call of the corpus, and the message kinds it sends
// (host → plugin, CallToolRequest) and gets (plugin → host,
// CallToolEvent): the test checks that the corpus covers every kind the
// protocol has.
type corpusCase struct {
	name  string
	call  *pluginv1.Call
	sends []string // CallToolRequest kinds besides "call"
	gets  []string // CallToolEvent kinds
	// cancelOn, if set, cancels the call when an event satisfies it;
	// timeout, if set, is the call's deadline.
	cancelOn func(*pluginv1.CallToolEvent) bool
	timeout  time.Duration
	// check says what is wrong with the outcome on its own ("" when
	// nothing), so that two routes that agree on nonsense still fail.
	check func(outcome) string
}

// answerClient answers a call's requests to its client as a client would:
// a model's completion, the roots, and a user who declines.
func answerClient(_ context.Context, method string, _ []byte) ([]byte, error) {
	switch method {
	case "sampling/createMessage":
		return []byte(`{"model":"m1","role":"assistant","content":{"type":"text","text":"hello there"}}`), nil
	case "roots/list":
		return []byte(`{"roots":[{"uri":"file:///work/a"},{"uri":"file:///work/b"}]}`), nil
	}
	return nil, protocol.Errorf(protocol.CodePermissionDenied, "the user declined %s", method)
}

func textOf(o outcome) string {
	var parts []string
	for _, c := range o.result.GetContent() {
		parts = append(parts, c.GetText().GetText())
	}
	return strings.Join(parts, "|")
}

func wants(want string) func(outcome) string {
	return func(o outcome) string {
		if got := textOf(o); !strings.Contains(got, want) {
			return fmt.Sprintf("text %.100q does not contain %q", got, want)
		}
		return ""
	}
}

func wantsCode(code protocol.Code) func(outcome) string {
	return func(o outcome) string {
		if o.code != code {
			return fmt.Sprintf("error code %s, want %s", o.code, code)
		}
		return ""
	}
}

func corpus() []corpusCase {
	args := func(s string) []byte { return []byte(s) }
	isProgress := func(ev *pluginv1.CallToolEvent) bool { return ev.GetProgress() != nil }
	bigText := strings.Repeat("ünïcode ☃ ", 200_000) // 2.4 MB of arguments
	return []corpusCase{
		{name: "echo", call: &pluginv1.Call{Tool: "echo", Arguments: args(`{"text":"ping"}`)}, gets: []string{"result"}, check: wants("ping")},
		{name: "echo of control characters and astral planes", call: &pluginv1.Call{Tool: "echo", Arguments: args(`{"text":"a\u0000b\u001f😀\ud83d\ude00"}`)}, gets: []string{"result"}, check: wants("😀")},
		{name: "echo of 2.4 MB", call: &pluginv1.Call{Tool: "echo", Arguments: fmt.Appendf(nil, `{"text":%q}`, bigText)}, gets: []string{"result"}, check: wants(bigText)},
		{name: "a 5 MB result", call: &pluginv1.Call{Tool: "big", Arguments: args(`{"chars":5000000}`)}, gets: []string{"result"}, check: func(o outcome) string {
			if n := len(textOf(o)); n != 5_000_000 {
				return fmt.Sprintf("%d characters, want 5000000", n)
			}
			return ""
		}},
		{name: "structured content", call: &pluginv1.Call{Tool: "big", Arguments: args(`{"chars":3,"json":true}`)}, gets: []string{"result"}, check: func(o outcome) string {
			if len(o.result.GetStructuredContent()) == 0 {
				return "want structured content"
			}
			return ""
		}},
		{name: "an image", call: &pluginv1.Call{Tool: "big", Arguments: args(`{"chars":3,"image_bytes":70000}`)}, gets: []string{"result"}, check: func(o outcome) string {
			if c := o.result.GetContent(); len(c) != 2 || len(c[1].GetImage().GetData()) != 70000 {
				return "want a text and a 70000-byte image"
			}
			return ""
		}},
		{name: "progress", call: &pluginv1.Call{Tool: "progress", Arguments: args(`{"steps":3}`), WantProgress: true}, gets: []string{"progress", "result"}, check: func(o outcome) string {
			if len(o.events) != 3 {
				return fmt.Sprintf("%d events, want 3 progress events", len(o.events))
			}
			return ""
		}},
		{name: "progress not asked for", call: &pluginv1.Call{Tool: "progress", Arguments: args(`{"steps":3}`)}, gets: []string{"result"}, check: func(o outcome) string {
			if len(o.events) != 0 {
				return fmt.Sprintf("%d events, want none", len(o.events))
			}
			return ""
		}},
		{name: "progress values back to back", call: &pluginv1.Call{Tool: "progress_values", Arguments: args(`{"values":[1,2,3,4,5,6,7,8],"total":8}`), WantProgress: true}, gets: []string{"progress", "result"}},
		{name: "log events", call: &pluginv1.Call{Tool: "chatty", Arguments: args(`{}`)}, gets: []string{"log", "result"}, check: func(o outcome) string {
			if len(o.events) < 2 {
				return fmt.Sprintf("%d events, want the log events", len(o.events))
			}
			return wants("said it")(o)
		}},
		{name: "trace context", call: &pluginv1.Call{Tool: "trace", Arguments: args(`{}`), Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, gets: []string{"result"}, check: wants("0af7651916cd43dd8448eb211c80319c")},
		{name: "owner and denied patterns", call: &pluginv1.Call{Tool: "echo", Arguments: args(`{"text":"owned"}`), Owner: "agent-7", DeniedPatterns: []string{"rm *"}}, gets: []string{"result"}, check: wants("owned")},
		{name: "a request to the client (sampling)", call: &pluginv1.Call{Tool: "ask_model", Arguments: args(`{"text":"hi"}`)}, sends: []string{"client_response"}, gets: []string{"client_request", "result"}, check: wants("model m1 said: hello there")},
		{name: "roots", call: &pluginv1.Call{Tool: "roots", Arguments: args(`{}`)}, sends: []string{"client_response"}, gets: []string{"client_request", "result"}, check: wants("file:///work/a file:///work/b")},
		{name: "a request the client refuses", call: &pluginv1.Call{Tool: "ask_user", Arguments: args(`{}`)}, sends: []string{"client_response"}, gets: []string{"client_request", "result"}, check: wants("declined")},
		{name: "an unknown tool", call: &pluginv1.Call{Tool: "nope", Arguments: args(`{}`)}, gets: []string{"error"}, check: wantsCode(protocol.CodeUnknownTool)},
		{name: "arguments that do not decode", call: &pluginv1.Call{Tool: "echo", Arguments: args(`{"text":`)}, gets: []string{"error"}, check: wantsCode(protocol.CodeInvalidArguments)},
		{name: "cancelled mid-call", call: &pluginv1.Call{Tool: "sleep", Arguments: args(`{"ms":30000}`), WantProgress: true}, sends: []string{"cancel"}, gets: []string{"progress", "error"}, cancelOn: isProgress, check: wantsCode(protocol.CodeCancelled)},
		{name: "past its deadline", call: &pluginv1.Call{Tool: "sleep", Arguments: args(`{"ms":30000}`)}, sends: []string{"cancel"}, gets: []string{"error"}, timeout: 300 * time.Millisecond},
	}
}

// run makes one call of the corpus on p.
func (c corpusCase) run(ctx context.Context, p *launcher.Plugin) outcome {
	ctx = protocol.WithClientRequester(ctx, answerClient)
	var cancel context.CancelFunc
	if c.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	var o outcome
	res, err := p.CallEvents(ctx, proto.Clone(c.call).(*pluginv1.Call), func(ev *pluginv1.CallToolEvent) {
		ev = proto.Clone(ev).(*pluginv1.CallToolEvent)
		ev.CallId = 0
		o.events = append(o.events, ev)
		if c.cancelOn != nil && c.cancelOn(ev) {
			cancel()
		}
	})
	o.result = res
	if err != nil {
		var perr *protocol.Error
		if !errors.As(err, &perr) {
			return outcome{code: -1, msg: err.Error()}
		}
		o.code, o.msg = perr.Code, perr.Message
	}
	return o
}

// The call socket is a second route for calls (README, PERFORMANCE, "The
// call socket"): it stays only while it answers every call exactly as the
// gRPC stream does. Two plugins, one called over each route, get the same
// corpus of calls (results small and large, progress asked for and not,
// log events, requests to the client answered and refused, errors,
// cancellation, deadlines, calls at once, a plugin that dies mid-call);
// every event and every answer must be the same. The corpus must cover
// every message kind of the CallTool stream, so a kind added to the
// protocol fails this test until a case sends it on both routes.
func TestCallSocketAndStreamAnswerAlike(t *testing.T) {
	env := map[string]string{"FIXTURE_BIG": "1", "FIXTURE_FEATURES": "1", "FIXTURE_LATIN1": "caf\xe9"}
	socket := launch(t, launcher.Spec{Env: env})
	stream := launch(t, launcher.Spec{Env: env})
	stream.Protocol().DialCallSocket = nil // before its first call: the gRPC stream

	sent, got := map[string]bool{"call": true}, map[string]bool{}
	for _, c := range corpus() {
		a, b := c.run(t.Context(), socket), c.run(t.Context(), stream)
		if !a.equal(b) {
			t.Errorf("%s: the routes answer differently:\ncall socket:\n%s\ngRPC stream:\n%s", c.name, a, b)
		}
		if c.check != nil {
			if why := c.check(a); why != "" {
				t.Errorf("%s: %s\n%s", c.name, why, a)
			}
		}
		for _, k := range c.sends {
			sent[k] = true
		}
		for _, k := range c.gets {
			got[k] = true
		}
	}
	if r := socket.Protocol().CallRoute(); r != protocol.RouteSocket {
		t.Errorf("the first plugin's calls took the %q, want the %q", r, protocol.RouteSocket)
	}
	if r := stream.Protocol().CallRoute(); r != protocol.RouteStream {
		t.Errorf("the second plugin's calls took the %q, want the %q", r, protocol.RouteStream)
	}

	// Calls at once: each gets its own answer on both routes.
	for _, p := range []*launcher.Plugin{socket, stream} {
		var wg sync.WaitGroup
		for i := range 32 {
			wg.Go(func() {
				want := fmt.Sprintf("call %d %s", i, strings.Repeat("x", i*3000))
				o := corpusCase{call: &pluginv1.Call{Tool: "echo", Arguments: fmt.Appendf(nil, `{"text":%q}`, want)}}.run(t.Context(), p)
				if textOf(o) != want {
					t.Errorf("%s: call %d of 32 at once got %.40q", p.Protocol().CallRoute(), i, textOf(o))
				}
			})
		}
		wg.Wait()
	}

	// A result that is not UTF-8 (a Latin-1 value in the environment):
	// protobuf refuses to encode it, and both routes send it made valid.
	for _, p := range []*launcher.Plugin{socket, stream} {
		o := corpusCase{call: &pluginv1.Call{Tool: "env", Arguments: []byte(`{}`)}}.run(t.Context(), p)
		if !strings.Contains(textOf(o), "FIXTURE_LATIN1=caf\uFFFD") {
			t.Errorf("%s: a result that is not UTF-8: %s", p.Protocol().CallRoute(), o)
		}
	}

	// A plugin that dies mid-call: the same error on both.
	crash := corpusCase{call: &pluginv1.Call{Tool: "crash", Arguments: []byte(`{}`)}}
	a, b := crash.run(t.Context(), socket), crash.run(t.Context(), stream)
	if !a.equal(b) || a.code != protocol.CodeUnavailable {
		t.Errorf("a plugin dying mid-call: call socket %s, gRPC stream %s; want the same CodeUnavailable", a, b)
	}

	for _, m := range []struct {
		msg  proto.Message
		seen map[string]bool
	}{{&pluginv1.CallToolRequest{}, sent}, {&pluginv1.CallToolEvent{}, got}} {
		fields := m.msg.ProtoReflect().Descriptor().Oneofs().ByName("kind").Fields()
		for i := range fields.Len() {
			if name := string(fields.Get(i).Name()); !m.seen[name] {
				t.Errorf("no case of the corpus covers the %s kind %q: add one, on both routes", m.msg.ProtoReflect().Descriptor().Name(), name)
			}
		}
	}
}

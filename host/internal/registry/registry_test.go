package registry

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/caller"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// stubServer answers every call with "ok"; down, when set, is why it takes
// no calls.
type stubServer struct {
	name string
	down error
}

func (s *stubServer) Name() string { return s.name }

func (s *stubServer) Describe() *toolcall.Description {
	if s.down != nil {
		return &toolcall.Description{Name: s.name}
	}
	return &toolcall.Description{Name: s.name, Tools: []*toolcall.Tool{{Name: "echo", InputSchema: []byte(`{"type":"object"}`), Access: toolcall.AccessRead}}}
}

func (s *stubServer) Call(context.Context, string, []byte, toolcall.ProgressFunc) (*toolcall.Result, error) {
	return &toolcall.Result{Content: []toolcall.Content{toolcall.TextContent("ok")}}, nil
}

func (s *stubServer) PermissionPatterns(_ context.Context, tool string, _ []byte) ([]string, error) {
	return []string{tool}, nil
}

func (s *stubServer) Close(context.Context) error { return nil }

func (s *stubServer) Unavailable() error { return s.down }

var (
	_ Server       = (*stubServer)(nil)
	_ Availability = (*stubServer)(nil)
)

// A host that is shutting down says so with its own code: callers can tell
// it from a server that is down for now.
func TestShuttingDownIsNotUnavailable(t *testing.T) {
	reg := New(nil, WithDuplicateLimit(0))
	down := protocol.Errorf(protocol.CodeUnavailable, "down is reconnecting")
	for _, s := range []*stubServer{{name: "up"}, {name: "down", down: down}} {
		if err := reg.Register(s, KindPlugin, "test"); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := reg.Call(t.Context(), "up.echo", []byte(`{}`), nil); err != nil || res.Text() != "ok" {
		t.Fatalf("up.echo = %v, %v; want ok", res, err)
	}
	_, err := reg.Call(t.Context(), "down.echo", []byte(`{}`), nil)
	if !errors.Is(err, protocol.ErrUnavailable) || errors.Is(err, protocol.ErrShuttingDown) {
		t.Errorf("call to a server that is down: err = %v, want ErrUnavailable and not ErrShuttingDown", err)
	}

	if err := reg.Shutdown(t.Context(), time.Second); err != nil {
		t.Fatal(err)
	}
	_, err = reg.Call(t.Context(), "up.echo", []byte(`{}`), nil)
	if !errors.Is(err, ErrShuttingDown) || !errors.Is(err, protocol.ErrShuttingDown) || errors.Is(err, protocol.ErrUnavailable) {
		t.Errorf("call during shutdown: err = %v, want ErrShuttingDown and not ErrUnavailable", err)
	}
	if err := reg.Register(&stubServer{name: "late"}, KindPlugin, "test"); !errors.Is(err, protocol.ErrShuttingDown) {
		t.Errorf("Register during shutdown: err = %v, want ErrShuttingDown", err)
	}
}

// sequenceServer answers the n-th call with results[n] (the last one
// repeated), counting the calls that reached it.
type sequenceServer struct {
	stubServer
	results []string
	calls   int
	schema  bool
}

func (s *sequenceServer) Describe() *toolcall.Description {
	d := s.stubServer.Describe()
	if s.schema {
		d.Tools[0].OutputSchema = []byte(`{"type":"object"}`)
	}
	return d
}

func (s *sequenceServer) Call(context.Context, string, []byte, toolcall.ProgressFunc) (*toolcall.Result, error) {
	r := s.results[min(s.calls, len(s.results)-1)]
	s.calls++
	return &toolcall.Result{Content: []toolcall.Content{toolcall.TextContent(r)}}, nil
}

// Repeating a call is never refused: every call runs, because a command's
// or a file's result may change. Only an identical result is shortened to a
// note, and the limit-th identical result in a row is the loop breaker's
// error. A different result, or different arguments, start over.
func TestRepeatedCallsRunAndIdenticalResultsAreNoted(t *testing.T) {
	srv := &sequenceServer{stubServer: stubServer{name: "s"}, results: []string{"a", "a", "a", "b", "b", "c"}}
	reg := New(nil, WithDuplicateLimit(3))
	if err := reg.Register(srv, KindPlugin, "test"); err != nil {
		t.Fatal(err)
	}
	call := func(args string) *toolcall.Result {
		t.Helper()
		res, err := reg.Call(t.Context(), "s.echo", []byte(args), nil)
		if err != nil {
			t.Fatalf("call refused: %v", err)
		}
		return res
	}
	steps := []struct {
		args, want string
		isError    bool
	}{
		{`{}`, "a", false},
		{`{}`, "Unchanged: s.echo returned exactly the same result", false},
		{`{}`, "3 times in a row", true}, // loop breaker
		{`{}`, "b", false},               // changed: out as it is
		{`{}`, "Unchanged", false},
		{`{}`, "c", false},
	}
	for i, st := range steps {
		res := call(st.args)
		if !strings.Contains(res.Text(), st.want) || res.IsError != st.isError {
			t.Errorf("call %d = %q (isError %v), want %q (isError %v)", i+1, res.Text(), res.IsError, st.want, st.isError)
		}
	}
	if srv.calls != len(steps) {
		t.Errorf("the server saw %d calls, want all %d", srv.calls, len(steps))
	}
	// Other arguments are another call.
	if res := call(`{"x":1}`); res.Text() != "c" {
		t.Errorf("other arguments = %q, want the full result", res.Text())
	}

	// A tool with an output schema keeps its result until the loop breaker.
	typed := &sequenceServer{stubServer: stubServer{name: "t"}, results: []string{"same"}, schema: true}
	if err := reg.Register(typed, KindPlugin, "test"); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"same", "same", "3 times in a row"} {
		res, err := reg.Call(t.Context(), "t.echo", []byte(`{}`), nil)
		if err != nil || !strings.Contains(res.Text(), want) {
			t.Errorf("typed call %d = %v, %v; want %q", i+1, res, err, want)
		}
	}
}

// slowServer's calls take delay, or until cancelled; maxMS is its tool's
// own limit.
type slowServer struct {
	stubServer
	delay time.Duration
	maxMS uint64
	saw   chan error
}

func (s *slowServer) Describe() *toolcall.Description {
	d := s.stubServer.Describe()
	d.Tools[0].MaxDuration = time.Duration(s.maxMS) * time.Millisecond
	return d
}

func (s *slowServer) Call(ctx context.Context, _ string, _ []byte, _ toolcall.ProgressFunc) (*toolcall.Result, error) {
	select {
	case <-time.After(s.delay):
		return &toolcall.Result{Content: []toolcall.Content{toolcall.TextContent("done")}}, nil
	case <-ctx.Done():
		s.saw <- ctx.Err()
		return nil, protocol.Errorf(protocol.CodeCancelled, "call cancelled")
	}
}

// A call that outlives its call_timeout is cancelled in its server and
// answered with an error naming the limit and where it was set; a server's
// and a tool's own settings win over the default, and a tool's own longer
// limit (bash's max_timeout) is kept.
func TestCallTimeout(t *testing.T) {
	reg := New(nil, WithDuplicateLimit(0))
	hung := &slowServer{stubServer: stubServer{name: "hung"}, delay: time.Hour, saw: make(chan error, 1)}
	long := &slowServer{stubServer: stubServer{name: "long"}, delay: 300 * time.Millisecond, maxMS: 2000, saw: make(chan error, 1)}
	for _, s := range []*slowServer{hung, long} {
		if err := reg.Register(s, KindPlugin, "test"); err != nil {
			t.Fatal(err)
		}
	}
	reg.SetCallTimeouts(time.Hour, map[string]Timeouts{
		"hung": {Call: time.Hour, Tools: map[string]time.Duration{"echo": 100 * time.Millisecond}},
		"long": {Call: 100 * time.Millisecond},
	})
	_, err := reg.Call(t.Context(), "hung.echo", []byte(`{}`), nil)
	if !errors.Is(err, protocol.ErrDeadline) || !strings.Contains(err.Error(), "did not finish within 100ms") || !strings.Contains(err.Error(), `tool "echo" { call_timeout }`) {
		t.Errorf("hung call err = %v, want a deadline error naming the tool's call_timeout", err)
	}
	select {
	case got := <-hung.saw:
		if !errors.Is(got, context.DeadlineExceeded) {
			t.Errorf("the server saw %v, want its context's deadline", got)
		}
	case <-time.After(5 * time.Second):
		t.Error("the server never saw the call cancelled")
	}
	if res, err := reg.Call(t.Context(), "long.echo", []byte(`{}`), nil); err != nil || res.Text() != "done" {
		t.Errorf("a tool within its own longer limit = %v, %v; want done", res, err)
	}
}

// slowCloser is a server whose Close waits until release is closed.
type slowCloser struct {
	stubServer
	closing chan struct{}
	release chan struct{}
}

func (s *slowCloser) Close(context.Context) error {
	close(s.closing)
	<-s.release
	return nil
}

// A retired server (its tools changed while it ran) is failed from the
// moment it leaves the registry, not once it has closed: found in CI, a
// status read while an external server shut down showed it nowhere.
func TestRetiredServerIsFailedWhileItCloses(t *testing.T) {
	reg := New(nil, WithDuplicateLimit(0))
	s := &slowCloser{stubServer: stubServer{name: "ext"}, closing: make(chan struct{}), release: make(chan struct{})}
	if err := reg.Register(s, KindExternal, "test"); err != nil {
		t.Fatal(err)
	}
	why := errors.New("its tools changed")
	done := make(chan bool)
	go func() { done <- reg.Retire(context.Background(), "ext", why) }()
	<-s.closing
	entries, failures := reg.Servers()
	if len(entries) != 0 || len(failures) != 1 || failures[0].Name != "ext" || !errors.Is(failures[0].Err, why) {
		t.Errorf("while ext closes: entries %d, failures %+v; want no entry and ext failed with %v", len(entries), failures, why)
	}
	close(s.release)
	if !<-done {
		t.Error("Retire of a registered server = false")
	}
	if reg.Retire(context.Background(), "ext", why) {
		t.Error("Retire of a server no longer registered = true")
	}
	if _, failures := reg.Servers(); len(failures) != 1 {
		t.Errorf("after retiring twice: %d failures, want 1", len(failures))
	}
}

// sizedServer returns a result of the given items.
type sizedServer struct {
	stubServer
	res *toolcall.Result
}

func (s *sizedServer) Call(context.Context, string, []byte, toolcall.ProgressFunc) (*toolcall.Result, error) {
	return s.res, nil
}

// A call's audit record says how large its result was as the server sent
// it: what the host relayed, and what tells the host a call was large.
func TestAuditRecordsTheResultSize(t *testing.T) {
	raw := `{"type":"text","text":"hi","annotations":{"audience":["user"]}}`
	tests := []struct {
		name string
		res  *toolcall.Result
		want int
	}{
		{"text", &toolcall.Result{Content: []toolcall.Content{toolcall.TextContent(strings.Repeat("x", 3000))}}, 3000},
		{"image and structured", &toolcall.Result{Content: []toolcall.Content{{Type: toolcall.TypeImage, Data: make([]byte, 500), MIMEType: "image/png"}}, StructuredContent: []byte(`{"a":1}`)}, 500 + len("image/png") + 7},
		{"an MCP server's item, counted as sent", &toolcall.Result{Content: []toolcall.Content{{Type: toolcall.TypeText, Text: "hi", Raw: []byte(raw)}}}, len(raw)},
		{"nothing", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := New(nil, WithDuplicateLimit(0))
			if err := reg.Register(&sizedServer{stubServer{name: "s"}, tt.res}, KindPlugin, "test"); err != nil {
				t.Fatal(err)
			}
			var got []AuditRecord
			reg.AddObserver(recordObserver(func(rec *AuditRecord) { got = append(got, *rec) }))
			if _, err := reg.Call(caller.With(t.Context(), "alice"), "s.echo", []byte(`{}`), nil); err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].ResultSize != tt.want {
				t.Fatalf("records %+v, want one with result_size %d", got, tt.want)
			}
			if line, _ := json.Marshal(got[0]); (tt.want == 0) == strings.Contains(string(line), `"result_size"`) {
				t.Errorf("audit line %s: result_size present = %v, want %v", line, !(tt.want == 0), tt.want != 0)
			}
		})
	}
}

// recordObserver hands each ended call's record to a function.
type recordObserver func(*AuditRecord)

func (recordObserver) CallStarted(string, string) {}
func (f recordObserver) CallEnded(_, _ string, rec *AuditRecord, _ time.Duration) {
	f(rec)
}

package frontend

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/loader"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/internal/fixtures"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
)

// stdioSession runs ServeStdio over pipes with the test plugin registered
// as "fx", and reads what it writes.
type stdioSession struct {
	t      *testing.T
	f      *Frontend
	in     *io.PipeWriter
	lines  chan map[string]any
	done   chan error
	marker string

	closeOnce sync.Once
}

func newStdioSession(t *testing.T, policy *registry.Policy) *stdioSession {
	return newSession(t, policy, false)
}

// newSession is newStdioSession; noShortPath sends everything to mcp-go.
func newSession(t *testing.T, policy *registry.Policy, noShortPath bool) *stdioSession {
	t.Helper()
	s := startSession(t, policy, noShortPath)
	s.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	s.response("init")
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return s
}

// startSession is newSession without the handshake.
func startSession(t *testing.T, policy *registry.Policy, noShortPath bool, configure ...func(*Frontend)) *stdioSession {
	t.Helper()
	return tapSession(t, policy, noShortPath, nil, configure...)
}

// tapSession is startSession that also copies every line the server
// writes to tap, when it is not nil.
func tapSession(t *testing.T, policy *registry.Policy, noShortPath bool, tap io.WriteCloser, configure ...func(*Frontend)) *stdioSession {
	t.Helper()
	reg, marker := fixtureRegistry(t, policy)
	s := serveSession(t, reg, noShortPath, tap, configure...)
	s.marker = marker
	return s
}

// fixtureRegistry is a registry with the test plugin registered as "fx",
// and the file its sleep tool writes when it sees a cancellation.
func fixtureRegistry(t *testing.T, policy *registry.Policy) (reg *registry.Registry, marker string) {
	t.Helper()
	marker = filepath.Join(t.TempDir(), "cancelled")
	p, err := launcher.Launch(t.Context(), launcher.Spec{
		Name: "fx", Path: fixtures.Build(t).TestPlugin, ProjectDir: t.TempDir(),
		Env: map[string]string{"FIXTURE_CANCEL_MARKER": marker},
	}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	reg = registry.New(policy, registry.WithDuplicateLimit(0))
	if err := reg.Register(p, registry.KindPlugin, "test"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Shutdown(context.Background(), 5*time.Second) })
	return reg, marker
}

// serveSession serves reg over stdio pipes; tap, when not nil, gets a copy
// of every line the server writes.
func serveSession(t *testing.T, reg *registry.Registry, noShortPath bool, tap io.WriteCloser, configure ...func(*Frontend)) *stdioSession {
	t.Helper()
	f := New(reg, "test", hclog.NewNullLogger())
	f.noShortPath = noShortPath
	for _, c := range configure { // before any session exists
		c(f)
	}

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &stdioSession{t: t, f: f, in: inW, lines: make(chan map[string]any, 1024), done: make(chan error, 1)}
	go func() {
		s.done <- f.ServeStdio(context.Background(), inR, outW)
		_ = outW.Close()
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			if tap != nil {
				_, _ = tap.Write(append(sc.Bytes(), '\n'))
			}
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("the server wrote a line that is not one JSON message: %v\n%.300s", err, sc.Text())
				continue
			}
			s.lines <- m
		}
		close(s.lines)
		if tap != nil {
			_ = tap.Close()
		}
	}()
	t.Cleanup(s.close)
	return s
}

// close ends the input and waits for ServeStdio to return; it may be
// called more than once.
func (s *stdioSession) close() {
	s.closeOnce.Do(func() {
		_ = s.in.Close()
		select {
		case err := <-s.done:
			if err != nil {
				s.t.Errorf("ServeStdio: %v", err)
			}
		case <-time.After(10 * time.Second):
			s.t.Error("ServeStdio did not return after its input ended")
		}
		for range s.lines { //nolint:revive // drain
		}
	})
}

func (s *stdioSession) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		s.t.Fatal(err)
	}
}

// response waits for the response to id, collecting the notifications that
// came before it.
func (s *stdioSession) response(id any) (resp map[string]any, notes []map[string]any) {
	s.t.Helper()
	want := fmt.Sprint(id)
	timeout := time.After(15 * time.Second)
	for {
		select {
		case m, ok := <-s.lines:
			if !ok {
				s.t.Fatalf("output ended before the response to %v", id)
			}
			if m["id"] == nil {
				notes = append(notes, m)
				continue
			}
			if fmt.Sprint(m["id"]) == want {
				return m, notes
			}
			s.t.Fatalf("unexpected message while waiting for %v: %v", id, m)
		case <-timeout:
			s.t.Fatalf("no response to %v", id)
		}
	}
}

// The short path answers exactly as mcp-go does: the same requests sent to
// a host whose every message goes to mcp-go get the same answers and
// notifications. (One session at a time: mcp-go's stdio session is a
// package-level singleton, so two stdio servers in one process would share
// their notifications.)
func TestShortPathAnswersLikeMCPGo(t *testing.T) {
	modernMeta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`
	cases := []struct {
		name, params string
		short        bool // answered on the short path
	}{
		{"echo", `{"name":"fx__echo","arguments":{"text":"hi \u00e9 \"quoted\""}}`, true},
		{"modern era", `{"name":"fx__echo","arguments":{"text":"modern"},` + modernMeta + `}`, true},
		{"progress", `{"name":"fx__progress","arguments":{"steps":2},"_meta":{"progressToken":"tok"}}`, true},
		{"modern era with progress", `{"name":"fx__progress","arguments":{"steps":2},"_meta":{"progressToken":7,` + modernMeta[len(`"_meta":{`):] + `}`, true},
		{"fields neither reads", `{"name":"fx__echo","arguments":{"text":"x"},"extra":[1,2]}`, true},
		{"invalid arguments", `{"name":"fx__echo","arguments":{"text":7}}`, true},
		{"no arguments", `{"name":"fx__calls"}`, true},
		{"tool error", `{"name":"fx__sleep","arguments":{"ms":"soon"}}`, true},
		{"unknown tool", `{"name":"fx__nope","arguments":{}}`, false},
		{"unsupported modern version", `{"name":"fx__echo","arguments":{"text":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}`, false},
		{"task-augmented", `{"name":"fx__echo","arguments":{"text":"x"},"task":{"ttl":1000}}`, false},
		{"retry with answers", `{"name":"fx__echo","arguments":{"text":"x"},"requestState":"s","inputResponses":{}}`, false},
	}
	corpus := []string{
		`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	}
	for i, c := range cases {
		corpus = append(corpus, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, i, c.params))
	}
	short, full := replay(t, corpus, false), replay(t, corpus, true)
	for i, c := range cases {
		if got := short.shortIDs[fmt.Sprint(i)]; got != c.short {
			t.Errorf("%s: taken by the short path: %v, want %v", c.name, got, c.short)
		}
	}
	compareReplays(t, short, full)
}

// waitProgress waits for a progress notification of token: the fixture's
// sleep tool sends one when it starts.
func (s *stdioSession) waitProgress(token string) {
	s.t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case m, ok := <-s.lines:
			if !ok {
				s.t.Fatal("output ended before the call started")
			}
			if params, _ := m["params"].(map[string]any); m["method"] == "notifications/progress" && fmt.Sprint(params["progressToken"]) == token {
				return
			}
			if m["id"] != nil {
				s.t.Fatalf("unexpected message while waiting for the call to start: %v", m)
			}
		case <-timeout:
			s.t.Fatal("the call did not start")
		}
	}
}

// Cancellation reaches a call, on the short path and on mcp-go's route,
// and the plugin's handler; the cancelled call gets no response (MCP: "the
// receiver SHOULD NOT send a response for the cancelled request").
func TestCancellation(t *testing.T) {
	for _, route := range []struct {
		name        string
		noShortPath bool
	}{{"short path", false}, {"mcp-go", true}} {
		t.Run(route.name, func(t *testing.T) {
			s := newSession(t, nil, route.noShortPath)
			s.send(`{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"fx__sleep","arguments":{"ms":30000},"_meta":{"progressToken":"slow"}}}`)
			s.waitProgress("slow")
			start := time.Now()
			s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow","reason":"changed my mind"}}`)
			s.send(`{"jsonrpc":"2.0","id":"next","method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"next"}}}`)
			if resp, _ := s.response("next"); resp["result"] == nil {
				t.Errorf("the call after the cancellation answered %v", resp)
			}
			waitFile(t, s.marker)
			if time.Since(start) > 10*time.Second {
				t.Errorf("the cancelled call took %v to end", time.Since(start))
			}
			if b, err := os.ReadFile(s.marker); err != nil || !strings.Contains(string(b), "canceled") {
				t.Errorf("the plugin's handler did not see the cancellation: %q, %v", b, err)
			}
			s.noResponse("slow")
		})
	}
}

// A cancellation may name a numeric request id in another spelling.
func TestShortPathCancellationByNumericID(t *testing.T) {
	s := newStdioSession(t, nil)
	s.send(`{"jsonrpc":"2.0","id":70,"method":"tools/call","params":{"name":"fx__sleep","arguments":{"ms":30000},"_meta":{"progressToken":"t70"}}}`)
	s.waitProgress("t70")
	s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7e1}}`)
	waitFile(t, s.marker)
	s.noResponse(70)
}

// waitFile waits for the file at path to have content.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// noResponse ends the session's input and reads the rest of its output,
// which comes after every call ended (ServeStdio waits for them): none of
// it may answer id.
func (s *stdioSession) noResponse(id any) {
	s.t.Helper()
	_ = s.in.Close()
	for m := range s.lines {
		if m["method"] == nil && fmt.Sprint(m["id"]) == fmt.Sprint(id) {
			s.t.Errorf("the cancelled request %v was answered: %v", id, m)
		}
	}
}

// Many calls at once, with ids of every JSON kind and arguments larger than
// the reader's buffer, each get one intact answer.
func TestShortPathConcurrentAndLarge(t *testing.T) {
	s := newStdioSession(t, nil)
	big := strings.Repeat("z", 300<<10)
	ids := []string{`"a"`, `-3`, `0`, `17`, `"with \"quotes\""`}
	want := map[string]string{}
	var mu sync.Mutex
	for i := 0; i < 40; i++ {
		id := ids[i%len(ids)]
		if i >= len(ids) {
			id = fmt.Sprint(1000 + i)
		}
		text := fmt.Sprintf("call %d", i)
		if i%10 == 3 {
			text += big
		}
		var parsed any
		_ = json.Unmarshal([]byte(id), &parsed)
		mu.Lock()
		want[fmt.Sprint(parsed)] = text
		mu.Unlock()
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":%q}}}`, id, text))
	}
	for len(want) > 0 {
		select {
		case m, ok := <-s.lines:
			if !ok {
				t.Fatal("output ended early")
			}
			key := fmt.Sprint(m["id"])
			text, ok := want[key]
			if !ok {
				t.Fatalf("answer to an unknown or already answered id %s", key)
			}
			delete(want, key)
			res, _ := m["result"].(map[string]any)
			content, _ := res["content"].([]any)
			if len(content) != 1 || content[0].(map[string]any)["text"] != text {
				t.Errorf("id %s: wrong answer (%.80v)", key, res)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%d calls unanswered", len(want))
		}
	}
}

// With "ask" as the default, calls take mcp-go's path (which asks the
// client, or refuses when it cannot be asked); the short path stays out.
func TestAskPolicyTakesTheFullPath(t *testing.T) {
	s := newStdioSession(t, &registry.Policy{Default: registry.Ask, Access: registry.AccessWrite})
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"x"}}}`)
	resp, _ := s.response(1)
	res, _ := resp["result"].(map[string]any)
	if res["isError"] != true || !strings.Contains(fmt.Sprint(res["content"]), "approval") {
		t.Errorf("call needing approval from a client that cannot be asked = %v", resp)
	}
	if n := s.f.short.Load(); n != 0 {
		t.Errorf("the short path took %d calls under an ask policy", n)
	}
}

// A host with a single tool whose server is down: the call gets the same
// answer on both routes (the short path runs mcp-go's tool filter, which
// hides the tools of a server that is not ready).
func TestShortPathSingleToolServerDown(t *testing.T) {
	bins := fixtures.Build(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.hcl")
	if err := os.Mkdir(filepath.Join(dir, "p"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`project_dir = "p"
data_dir = "state"
watch_config = false
builtin "switchboard" { enabled = false }   # one server with one tool
plugin "hi" {
  path = %q
  sandbox { mode = "off" }
  restart {
    base_delay = "1h"
    max_delay  = "1h"
  }
}
`, bins.Hello)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	res := config.Load(cfgPath)
	if res.Diags.HasErrors() {
		t.Fatal(res.Diags)
	}
	h, err := loader.Start(t.Context(), res.Config, loader.Options{Self: bins.Switchboard, Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	reg := h.Registry()
	t.Cleanup(func() { _ = reg.Shutdown(context.Background(), 5*time.Second) })
	if n := len(reg.AllTools()); n != 1 {
		t.Fatalf("the hello plugin serves %d tools, want 1", n)
	}
	// Take the server down: kill the plugin, and wait until the registry
	// no longer counts it ready.
	killed := 0
	for _, pid := range fixtures.Children(os.Getpid()) {
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); exe == bins.Hello {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			killed++
		}
	}
	if killed == 0 {
		t.Fatal("no hello plugin process to kill")
	}
	deadline := time.Now().Add(15 * time.Second)
	for len(reg.Tools()) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the hello plugin is still ready after its process was killed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	answer := func(noShortPath bool) map[string]any {
		s := serveSession(t, reg, noShortPath, nil)
		defer s.close()
		s.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		s.response("init")
		s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hi__greet","arguments":{"name":"x"}}}`)
		resp, _ := s.response(1)
		if n := s.f.short.Load(); n != 0 {
			t.Errorf("the short path answered a call of a tool its filter hides (%v)", resp)
		}
		return resp
	}
	short, full := answer(false), answer(true)
	if !reflect.DeepEqual(short, full) {
		t.Errorf("a call while the only server is down:\n  short path %v\n  mcp-go     %v", short, full)
	}
}

// next returns the next message the server writes.
func (s *stdioSession) next() map[string]any {
	s.t.Helper()
	select {
	case m, ok := <-s.lines:
		if !ok {
			s.t.Fatal("output ended")
		}
		return m
	case <-time.After(15 * time.Second):
		s.t.Fatal("no message within 15s")
	}
	return nil
}

// Requests JSON-RPC calls invalid get Invalid Request (-32600) with a null
// id, not an echo of what was sent: ids 7.5, true, objects, arrays and
// null, and batches. Before, they were accepted and echoed, and a batch got
// Parse error. The session goes on.
func TestInvalidRequestsOverStdio(t *testing.T) {
	s := newStdioSession(t, nil)
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":7.5,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":true,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":[1],"method":"ping"}`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":7.5,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"x"}}}`,
	} {
		s.send(line)
		m := s.next()
		e, _ := m["error"].(map[string]any)
		if m["id"] != nil || e == nil || e["code"] != float64(-32600) {
			t.Errorf("%s\n  answered %v, want error -32600 with a null id", line, m)
		}
	}
	s.send(`{"jsonrpc":"2.0","id":"after","method":"ping"}`)
	if resp, _ := s.response("after"); resp["result"] == nil {
		t.Errorf("ping after the invalid requests = %v", resp)
	}
}

// A message over the limit is refused while it is read (the rest of it is
// skipped, not kept), with its id when it comes early; the session goes on.
// Before, a 300 MB line took 26 s and left 2.4 GB behind.
func TestOversizeMessageRefusedWhileRead(t *testing.T) {
	s := newStdioSession(t, nil)
	go func() {
		w := bufio.NewWriterSize(s.in, 1<<20)
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"`)
		chunk := strings.Repeat("A", 1<<20)
		for i := 0; i < (MaxMessageBytes>>20)+8; i++ {
			_, _ = io.WriteString(w, chunk)
		}
		_, _ = io.WriteString(w, `"}}}`+"\n")
		_ = w.Flush()
	}()
	resp, _ := s.response(42)
	e, _ := resp["error"].(map[string]any)
	if e == nil || e["code"] != float64(-32600) || !strings.Contains(fmt.Sprint(e["message"]), "over") {
		t.Fatalf("oversize message answered %v, want -32600 saying it is over the limit", resp)
	}
	s.send(`{"jsonrpc":"2.0","id":"after","method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"fine"}}}`)
	if resp, _ := s.response("after"); resp["result"] == nil {
		t.Errorf("call after the oversize message = %v", resp)
	}
}

// A client that writes requests without reading the answers is not read
// past MaxInFlight unanswered requests (plus what the pipes hold): the host
// stops reading, as a pipe does, instead of queueing without end. Once the
// client reads, every request is answered. Before, 10,000 unread requests
// took the host from 28 to 124 MB.
func TestStdioBackpressure(t *testing.T) {
	reg, _ := fixtureRegistry(t, nil)
	f := New(reg, "test", hclog.NewNullLogger())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- f.ServeStdio(context.Background(), inR, outW)
		_ = outW.Close()
	}()
	var sent atomic.Int64
	const total = 5000
	go func() {
		_, _ = io.WriteString(inW, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
		for i := 0; i < total; i++ {
			method := `"tools/call","params":{"name":"fx__echo","arguments":{"text":"x"}}`
			if i%2 == 1 {
				method = `"ping"` // the mcp-go route too
			}
			if _, err := fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%d,"method":%s}`+"\n", i, method); err != nil {
				return
			}
			sent.Add(1)
		}
	}()
	// Nobody reads the output: the writer must stall well short of total.
	var last int64 = -1
	for stable := 0; stable < 5; {
		n := sent.Load()
		if n >= total {
			t.Fatalf("the host read all %d requests while nobody read an answer", total)
		}
		if n == last {
			stable++
		} else {
			stable, last = 0, n
		}
		time.Sleep(200 * time.Millisecond) // polling for the stall
	}
	if last > MaxInFlight+200 {
		t.Errorf("the host took %d unanswered requests, want at most about %d", last, MaxInFlight)
	}
	// Reading resumes everything: every request gets its answer.
	sc := bufio.NewScanner(outR)
	sc.Buffer(nil, 1<<20)
	answered := 0
	for answered < total+1 && sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["id"] != nil {
			answered++
		}
	}
	if answered != total+1 {
		t.Errorf("%d of %d requests answered", answered, total+1)
	}
	_ = inW.Close()
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	<-done
}

// A line longer than the reader's buffer is read in parts and joined once
// (one buffer grown by append allocated some five times its size); the
// line after it is read as usual; a line over MaxMessageBytes comes back
// as its start only, its rest skipped.
func TestReadLongJoinsOnce(t *testing.T) {
	long := `{"id":7,"x":"` + strings.Repeat("a", 3<<20) + `"}` + "\n"
	over := `{"id":8,"x":"` + strings.Repeat("b", MaxMessageBytes) + `"}` + "\n"
	r := bufio.NewReaderSize(strings.NewReader(long+over+"short\n"), 64<<10)

	first, err := r.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		t.Fatalf("first part: %v, want the buffer full", err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	line, isOver, err := readLong(r, first, MaxMessageBytes)
	runtime.ReadMemStats(&after)
	if err != nil || isOver || string(line) != long {
		t.Fatalf("long line: %d bytes, over %v, %v; want the %d bytes as sent", len(line), isOver, err, len(long))
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(5*len(long)/2) {
		t.Errorf("reading a %d-byte line allocated %d bytes, want at most 2.5 times the line", len(long), alloc)
	}

	first, err = r.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		t.Fatalf("over-long line's first part: %v", err)
	}
	line, isOver, err = readLong(r, first, MaxMessageBytes)
	if err != nil || !isOver || len(line) != 64<<10 || string(prefixID(line)) != "8" {
		t.Fatalf("over-long line: %d bytes, over %v, %v, id %s; want its first 64 KB, over, its id 8", len(line), isOver, err, prefixID(line))
	}
	if next, err := r.ReadSlice('\n'); err != nil || string(next) != "short\n" {
		t.Errorf("the line after: %q, %v", next, err)
	}
}

// FuzzReadLong holds the line reader to a plain one: for any input, buffer
// size and limit, the lines read with ReadSlice and readLong are the
// input's lines as bytes.SplitAfter gives them, a line over the limit
// coming back as its first buffer's worth and marked over, and the reader
// goes on with the next line.
func FuzzReadLong(f *testing.F) {
	f.Add([]byte("short\n"+strings.Repeat("x", 100)+"\nend"), 16, 50)
	f.Add([]byte(strings.Repeat("y", 40)+"\n\n"+strings.Repeat("z", 17)), 16, 40)
	f.Add([]byte{}, 16, 10)
	f.Fuzz(func(t *testing.T, in []byte, size, limit int) {
		size = 16 + int(uint(size)%64) // bufio's minimum is 16
		limit = size + int(uint(limit)%200)
		r := bufio.NewReaderSize(bytes.NewReader(in), size)
		var want [][]byte
		for _, l := range bytes.SplitAfter(in, []byte("\n")) {
			if len(l) > 0 {
				want = append(want, l)
			}
		}
		for i := 0; ; i++ {
			line, err := r.ReadSlice('\n')
			over := false
			if errors.Is(err, bufio.ErrBufferFull) {
				line, over, err = readLong(r, line, limit)
			}
			if len(line) == 0 && err != nil {
				if i != len(want) {
					t.Fatalf("%d lines read, want %d", i, len(want))
				}
				return
			}
			if i >= len(want) {
				t.Fatalf("line %d %q read past the input's %d lines", i, line, len(want))
			}
			w := want[i]
			switch {
			case len(w) > limit:
				if !over || !bytes.Equal(line, w[:size]) {
					t.Fatalf("line %d (%d bytes, limit %d): got %q over %v, want its first %d bytes, over", i, len(w), limit, line, over, size)
				}
			case over || !bytes.Equal(line, w):
				t.Fatalf("line %d: got %q over %v, want %q", i, line, over, w)
			}
			if err != nil {
				if i != len(want)-1 {
					t.Fatalf("ended (%v) at line %d of %d", err, i, len(want))
				}
				return
			}
		}
	})
}

package frontend

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

var update = flag.Bool("update", false, "record testdata/stdio-corpus again from a real mcp-go client")

// corpusEras are the protocol eras of the recorded corpus: the last with
// the initialize handshake, and the first without.
var corpusEras = []string{"2025-11-25", "2026-07-28"}

func corpusPath(era string) string { return filepath.Join("testdata", "stdio-corpus", era+".jsonl") }

// recordCorpus runs a real mcp-go client of protocol era against the host
// and returns every line it sent: the handshake (initialize or
// server/discover), a listing, calls that succeed, report progress, fail
// in the tool, fail validation, name no tool, and a call cancelled while it
// runs.
func recordCorpus(t *testing.T, era string) []string {
	cr, cw := io.Pipe()
	fromHost, toClient := io.Pipe()
	s := tapSession(t, nil, false, toClient)
	var sent []string
	teeDone := make(chan struct{})
	go func() {
		defer close(teeDone)
		sc := bufio.NewScanner(cr)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			sent = append(sent, sc.Text())
			if _, err := io.WriteString(s.in, sc.Text()+"\n"); err != nil {
				return
			}
		}
	}()
	go func() { // the session's parsed copy of the output is not needed here
		for range s.lines { //nolint:revive // drain
		}
	}()
	c := client.NewClient(transport.NewIO(fromHost, cw, io.NopCloser(strings.NewReader(""))), client.WithProtocolVersion(era))
	started := make(chan struct{}, 1)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationProgress) && fmt.Sprint(n.Params.AdditionalFields["progressToken"]) == "cancel-me" {
			select {
			case started <- struct{}{}:
			default:
			}
		}
	})
	ctx := t.Context()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "corpus-recorder", Version: "1"}
	init.Params.ProtocolVersion = era
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
		t.Fatal(err)
	}
	call := func(ctx context.Context, name string, args any, token any) {
		req := mcp.CallToolRequest{}
		req.Params.Name = name
		req.Params.Arguments = args
		if token != nil {
			req.Params.Meta = &mcp.Meta{ProgressToken: token}
		}
		_, _ = c.CallTool(ctx, req)
	}
	call(ctx, "fx__echo", map[string]any{"text": "hello \u00e9 \"quoted\""}, nil)
	call(ctx, "fx__progress", map[string]any{"steps": 3}, "p1")
	call(ctx, "fx__progress", map[string]any{"steps": 2}, 7)
	call(ctx, "fx__echo", map[string]any{"text": 7}, nil)        // fails validation
	call(ctx, "fx__sleep", map[string]any{"ms": "soon"}, nil)    // fails validation in the tool's own types
	call(ctx, "fx__nope", map[string]any{}, nil)                 // no such tool
	call(ctx, "fx__calls", nil, nil)                             // no arguments
	call(ctx, "fx__echo", map[string]any{"text": "last"}, "tok") // a token but no progress
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); call(cctx, "fx__sleep", map[string]any{"ms": 30000}, "cancel-me") }()
	<-started
	cancel()
	<-done
	call(ctx, "fx__echo", map[string]any{"text": "after the cancellation"}, nil)
	_ = c.Close()
	<-teeDone
	s.close()
	return sent
}

// replayed is what a host wrote while a corpus was replayed to it, grouped
// so that two hosts can be compared where their order may differ:
// responses by id, progress by token (in order), other messages in order.
type replayed struct {
	responses map[string]map[string]any
	progress  map[string][]map[string]any
	other     []map[string]any
	short     int64           // calls the short path answered
	shortIDs  map[string]bool // the requests it answered, by id
}

// replay sends a corpus to a new host, one request at a time (the next
// after the previous one's answer; a call that the corpus cancels later
// after its first progress notification, that is once it runs), then a
// ping, and collects everything the host writes until its output ends. A
// request the corpus cancels must get no response (MCP says so).
func replay(t *testing.T, corpus []string, noShortPath bool, configure ...func(*Frontend)) replayed {
	s := startSession(t, nil, noShortPath, configure...)
	out := replayed{responses: map[string]map[string]any{}, progress: map[string][]map[string]any{}, shortIDs: map[string]bool{}}
	collect := func(m map[string]any) {
		switch {
		case m["method"] == string(mcp.MethodNotificationProgress):
			params, _ := m["params"].(map[string]any)
			tok := fmt.Sprint(params["progressToken"])
			out.progress[tok] = append(out.progress[tok], m)
		case m["id"] != nil && m["method"] == nil:
			out.responses[fmt.Sprint(m["id"])] = m
		default:
			out.other = append(out.other, m)
		}
	}
	// waitFor reads output until done reports true.
	waitFor := func(what string, done func() bool) {
		t.Helper()
		for !done() {
			m, ok := <-s.lines
			if !ok {
				t.Fatalf("output ended while waiting for %s", what)
			}
			collect(m)
		}
	}
	cancelled := map[string]bool{} // the requests the corpus cancels, by idKey
	for _, line := range corpus {
		var n struct {
			Method string `json:"method"`
			Params struct {
				RequestID json.RawMessage `json:"requestId"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(line), &n) == nil && n.Method == string(mcp.MethodNotificationCancelled) {
			cancelled[idKey(n.Params.RequestID)] = true
		}
	}
	for _, line := range corpus {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				RequestID json.RawMessage `json:"requestId"`
				Meta      struct {
					ProgressToken any `json:"progressToken"`
				} `json:"_meta"`
			} `json:"params"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("corpus line %q: %v", line, err)
		}
		before := s.f.short.Load()
		s.send(line)
		switch {
		case len(m.ID) == 0 || m.Method == "":
			// A notification or a response: nothing to wait for.
		case cancelled[idKey(m.ID)]:
			tok := fmt.Sprint(m.Params.Meta.ProgressToken)
			waitFor("the start of "+string(m.ID), func() bool { return len(out.progress[tok]) > 0 })
		default:
			id := fmt.Sprint(jsonValue(m.ID))
			waitFor("the answer to "+id, func() bool { return out.responses[id] != nil })
			// The short path counts a call before it answers it.
			out.shortIDs[id] = s.f.short.Load() > before
		}
	}
	s.send(`{"jsonrpc":"2.0","id":"last","method":"ping"}`)
	waitFor("the last answer", func() bool { return out.responses["last"] != nil })
	out.short = s.f.short.Load()
	// End the input: the host waits for its calls, so whatever it writes
	// for the cancelled ones is in the output when it ends.
	_ = s.in.Close()
	for m := range s.lines {
		collect(m)
	}
	s.close()
	for _, line := range corpus {
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal([]byte(line), &m) == nil && len(m.ID) > 0 && cancelled[idKey(m.ID)] {
			if r := out.responses[fmt.Sprint(jsonValue(m.ID))]; r != nil {
				t.Errorf("cancelled request %s was answered (shortPath=%v): %v", m.ID, !noShortPath, r)
			}
		}
	}
	return out
}

func jsonValue(raw json.RawMessage) any {
	var v any
	_ = json.Unmarshal(raw, &v)
	return v
}

// The stdio short path is a second route beside mcp-go's dispatcher: the
// traffic of real clients of both protocol eras, replayed to a host with
// the short path and to one without, gets the same answers and
// notifications. Run with -update to record the corpus again.
func TestShortPathEquivalentOnRecordedTraffic(t *testing.T) {
	for _, era := range corpusEras {
		t.Run(era, func(t *testing.T) {
			if *update {
				lines := recordCorpus(t, era)
				if err := os.MkdirAll(filepath.Dir(corpusPath(era)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(corpusPath(era), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			b, err := os.ReadFile(corpusPath(era))
			if err != nil {
				t.Fatal(err)
			}
			corpus := strings.Split(strings.TrimSpace(string(b)), "\n")
			short, full := replay(t, corpus, false), replay(t, corpus, true)
			if short.short == 0 {
				t.Error("the short path answered none of the corpus's calls")
			}
			compareReplays(t, short, full)
		})
	}
}

// compareReplays reports every difference between what a host with the
// short path (short) and one without (full) wrote.
func compareReplays(t *testing.T, short, full replayed) {
	t.Helper()
	if full.short != 0 {
		t.Errorf("the host without the short path answered %d calls there", full.short)
	}
	if !reflect.DeepEqual(short.responses, full.responses) {
		for id, r := range full.responses {
			if !reflect.DeepEqual(short.responses[id], r) {
				t.Errorf("answer to %s:\n  short path %v\n  mcp-go     %v", id, short.responses[id], r)
			}
		}
		if len(short.responses) != len(full.responses) {
			t.Errorf("%d answers with the short path, %d without", len(short.responses), len(full.responses))
		}
	}
	if !reflect.DeepEqual(short.progress, full.progress) {
		t.Errorf("progress notifications differ:\n  short path %v\n  mcp-go     %v", short.progress, full.progress)
	}
	if !reflect.DeepEqual(short.other, full.other) {
		t.Errorf("other messages differ:\n  short path %v\n  mcp-go     %v", short.other, full.other)
	}
}

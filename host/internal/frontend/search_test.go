package frontend

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
)

func searchSettings(mode string, budget int, pinned ...string) func(*Frontend) {
	return func(f *Frontend) {
		s := DefaultSettings()
		s.Expose = config.Expose{Mode: mode, BudgetTokens: budget, AlwaysList: pinned}
		f.Configure(s)
	}
}

// searchCorpus is a session in search mode: a listing, a search, the
// listing again, a direct call of the tool found, the same through
// switchboard__call_tool, an unknown name through it, a direct call with
// bad arguments, and a call of a tool no search found.
var searchCorpus = []string{
	`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"switchboard__search_tools","arguments":{"query":"echo the text back","k":2}}}`,
	`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"direct"}}}`,
	`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"switchboard__call_tool","arguments":{"name":"fx__echo","arguments":{"text":"via"}}}}`,
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"switchboard__call_tool","arguments":{"name":"fx__nope"}}}`,
	`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":5}}}`,
	`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"fx__clock","arguments":{}}}`,
}

// Search mode changes listings and adds two tools, on both stdio routes
// alike: the same session replayed with the short path and without gets
// the same answers and notifications (TestShortPathEquivalentOnRecordedTraffic
// covers the mode "all").
func TestSearchModeEquivalentOnBothRoutes(t *testing.T) {
	corpus := searchCorpus[:len(searchCorpus)-1] // fx__clock answers differ by design
	short := replay(t, corpus, false, searchSettings(config.ExposeSearch, 1))
	full := replay(t, corpus, true, searchSettings(config.ExposeSearch, 1))
	if short.short == 0 {
		t.Error("the short path answered none of the calls")
	}
	compareReplays(t, short, full)
	// The session was configured before it began: its one
	// tools/list_changed is the search's.
	changed := 0
	for _, m := range short.other {
		if m["method"] == "notifications/tools/list_changed" {
			changed++
		}
	}
	if changed != 1 {
		t.Errorf("%d tools/list_changed notifications, want 1 (the search's)", changed)
	}

	names := func(r replayed, id string) []string {
		res, _ := r.responses[id]["result"].(map[string]any)
		tools, _ := res["tools"].([]any)
		var out []string
		for _, tl := range tools {
			m, _ := tl.(map[string]any)
			out = append(out, fmt.Sprint(m["name"]))
		}
		return out
	}
	if got := strings.Join(names(short, "2"), " "); got != "switchboard__call_tool switchboard__search_tools" {
		t.Errorf("first listing = %s, want the two search tools", got)
	}
	if got := strings.Join(names(short, "4"), " "); !strings.Contains(got, "fx__echo") {
		t.Errorf("listing after the search = %s, want fx__echo added", got)
	}
}

func TestExposeAuto(t *testing.T) {
	s := newStdioSession(t, nil)
	defer s.close()
	searchSettings(config.ExposeAuto, 1)(s.f)
	if !s.f.Searching() {
		t.Errorf("auto with a budget of 1 token: not searching (listing ≈ %d tokens)", s.f.tokens)
	}
	searchSettings(config.ExposeAuto, 1_000_000)(s.f)
	if s.f.Searching() {
		t.Errorf("auto with a budget of 1,000,000 tokens: searching (listing ≈ %d tokens)", s.f.tokens)
	}
	searchSettings(config.ExposeAll, 1)(s.f)
	if s.f.Searching() {
		t.Error("all: searching")
	}
}

func TestSearchPinned(t *testing.T) {
	s := newStdioSession(t, nil)
	defer s.close()
	searchSettings(config.ExposeSearch, 1, "fx.echo")(s.f)
	s.send(`{"jsonrpc":"2.0","id":"l","method":"tools/list"}`)
	resp, _ := s.response("l")
	res, _ := resp["result"].(map[string]any)
	tools, _ := res["tools"].([]any)
	var got []string
	for _, tl := range tools {
		got = append(got, fmt.Sprint(tl.(map[string]any)["name"]))
	}
	if strings.Join(got, " ") != "fx__echo switchboard__call_tool switchboard__search_tools" {
		t.Errorf("listing = %v, want the pinned tool and the search tools", got)
	}
}

// A caller whose access level is read finds only the read tools, as its
// tools/list shows only those: the search offered a read-only caller the
// write tools with their schemas (red team round 4). The control: a
// caller with write access finds the write tool with the same words.
func TestSearchHonoursTheCallersAccess(t *testing.T) {
	s := newStdioSession(t, nil)
	defer s.close()
	searchSettings(config.ExposeSearch, 1)(s.f)
	find := func(c *registry.Caller) []string {
		t.Helper()
		ctx := registry.WithCaller(t.Context(), c)
		req := mcp.CallToolRequest{}
		req.Params.Name = SearchToolName
		req.Params.Arguments = map[string]any{"query": "starts a long-lived child process", "k": 3}
		res, err := s.f.searchTools(ctx, req)
		if err != nil || res.IsError {
			t.Fatalf("search: %v, %v", res, err)
		}
		var body struct {
			Tools []struct{ Name string } `json:"tools"`
		}
		if err := json.Unmarshal([]byte(res.Content[0].(mcp.TextContent).Text), &body); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range body.Tools {
			names = append(names, tl.Name)
		}
		return names
	}
	if got := find(&registry.Caller{Name: "dev", Access: registry.AccessWrite}); !slices.Contains(got, "fx__child") {
		t.Fatalf("control: a caller with write access did not find fx__child: %v", got)
	}
	got := find(&registry.Caller{Name: "ro", Access: registry.AccessRead})
	if slices.Contains(got, "fx__child") {
		t.Errorf("a read-only caller found the write tool fx__child: %v", got)
	}
	if len(got) == 0 {
		t.Errorf("a read-only caller found nothing: the read tools should fill its answer")
	}
}

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

func listNames(t *testing.T, c *client.Client) []string {
	t.Helper()
	var names []string
	req := mcp.ListToolsRequest{}
	for {
		res, err := c.ListTools(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		if res.NextCursor == "" {
			break
		}
		req.Params.Cursor = res.NextCursor
	}
	slices.Sort(names)
	return names
}

// TestSearchModeAmongFiveThousand: a real MCP client of `switchboard serve`
// in search mode, with 5,000 more tools than the fixture's own, sees only
// the search tools and the pinned one; a search finds the tool for a
// request, adds it to the client's list with tools/list_changed, and the
// next call goes to it directly. switchboard__call_tool passes the same
// checks as a direct call (permissions, argument schema, audit).
func TestSearchModeAmongFiveThousand(t *testing.T) {
	bins := fixtures.Build(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "project"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`
start_wait  = "2m"
project_dir = "project"
data_dir    = "state"
expose      = "search"
always_list = ["fx.echo"]
plugin "fx" {
  path = %q
  env  = { FIXTURE_EXTRA_TOOLS = "5000" }
}
permissions {
  deny = ["fx.count"]
}
`, bins.TestPlugin)
	path := filepath.Join(dir, "config.hcl")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	notes := make(chan mcp.JSONRPCNotification, 64)
	c, _ := featureMCPClientWith(t, bins, path, notes, false)

	if got, want := listNames(t, c), []string{"fx__echo", "switchboard__call_tool", "switchboard__search_tools"}; !slices.Equal(got, want) {
		t.Fatalf("tools/list in search mode = %v, want %v", got, want)
	}

	res := fitCall(t, c, "switchboard__search_tools", map[string]any{"query": "what is the plugin's process id", "k": 3})
	if res.IsError {
		t.Fatalf("search: %v", resultTexts(res))
	}
	var found struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal([]byte(resultTexts(res)[0]), &found); err != nil {
		t.Fatalf("search answer: %v", err)
	}
	if len(found.Tools) == 0 || found.Tools[0].Name != "fx__pid" || len(found.Tools[0].InputSchema) == 0 {
		t.Fatalf("search found %+v, want fx__pid first with its schema", found.Tools)
	}
	waitNote(t, notes, string(mcp.MethodNotificationToolsListChanged), func(map[string]any) bool { return true })
	if got := listNames(t, c); !slices.Contains(got, "fx__pid") || len(got) > 3+3 {
		t.Fatalf("tools/list after the search = %v, want fx__pid added (and at most the 3 found)", got)
	}
	if got := resultTexts(fitCall(t, c, "fx__pid", nil)); len(got) != 1 || strings.Trim(got[0], "0123456789") != "" {
		t.Errorf("fx__pid called directly = %q, want a process id", got)
	}

	// Through switchboard__call_tool: the same answers as a direct call.
	if got := resultTexts(fitCall(t, c, "switchboard__call_tool", map[string]any{"name": "fx__echo", "arguments": map[string]any{"text": "hi"}})); len(got) != 1 || got[0] != "hi" {
		t.Errorf("call_tool echo = %q", got)
	}
	if got := resultTexts(fitCall(t, c, "switchboard__call_tool", map[string]any{"name": "fx.extra_4999", "arguments": map[string]any{"text": "deep"}})); len(got) != 1 || got[0] != "deep" {
		t.Errorf("call_tool by canonical name = %q", got)
	}
	for _, tc := range []struct {
		name, tool string
		args       map[string]any
		want       string
	}{
		{"denied", "fx__count", map[string]any{"n": 1}, "denied"},
		{"bad arguments", "fx__echo", map[string]any{"text": 5}, "text"},
	} {
		direct := fitCall(t, c, tc.tool, tc.args)
		via := fitCall(t, c, "switchboard__call_tool", map[string]any{"name": tc.tool, "arguments": tc.args})
		if !direct.IsError || !via.IsError {
			t.Errorf("%s: direct error %v, through call_tool %v; want both refused", tc.name, direct.IsError, via.IsError)
		}
		if d, v := resultTexts(direct), resultTexts(via); !slices.Equal(d, v) || !strings.Contains(strings.Join(d, " "), tc.want) {
			t.Errorf("%s: direct %q, through call_tool %q; want the same refusal", tc.name, d, v)
		}
	}
	if res := fitCall(t, c, "switchboard__call_tool", map[string]any{"name": "fx__nope"}); !res.IsError {
		t.Error("call_tool of an unknown tool did not fail")
	}
	_ = c.Close()

	// Every refusal is audited, through call_tool as directly.
	audit := filepath.Join(dir, "state", "audit.jsonl")
	f, err := os.Open(audit)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	denied, unknown := 0, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec struct {
			Tool, Decision, Outcome string
		}
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue
		}
		if rec.Tool == "fx.count" && rec.Outcome == "refused" {
			denied++
		}
		if rec.Tool == "fx__nope" && rec.Decision == "unknown" {
			unknown++
		}
	}
	if denied != 2 || unknown != 1 {
		t.Errorf("audit: %d refusals of fx.count (want 2: direct and through call_tool), %d of fx__nope (want 1)", denied, unknown)
	}
}

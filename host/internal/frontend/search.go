package frontend

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/host/internal/toolsearch"
)

// Tool search mode.
//
// With expose = "search" (or "auto" when listing every tool would take
// more than tool_budget_tokens, estimated as the listing's JSON bytes / 4),
// tools/list holds the host's own two tools, SearchToolName and
// CallToolName, the pinned tools (always_list), and the tools a search
// found for that session. Every tool stays registered with mcp-go: the
// listing is narrowed by the tool filter (listReady → exposeFilter), which
// mcp-go also runs at call time for the one tool called, where it lets
// every tool through. So a tool a client knows by name can still be called
// directly, on both stdio routes alike, and what a search finds is added
// to the session's list (a notifications/tools/list_changed is sent to it
// before the search's answer), so the next turn calls it directly.
//
// CallToolName runs the named tool through Frontend.call, the one path of
// every direct call: the registry's checks (existence, access level,
// argument schema, permissions, approval), audit, progress, the result
// limits.

// The host's own tools in search mode. The server name "switchboard" is
// reserved (DESIGN.md, Names), so no server's tools can take these names;
// a tool that still would (a prefix of "switchboard") is refused.
const (
	SearchToolName = "switchboard__search_tools"
	CallToolName   = "switchboard__call_tool"
)

// maxSearchK bounds the tools one search returns.
const maxSearchK = 20

// exposeState is the state of search mode.
type exposeState struct {
	exMu      sync.Mutex
	searching bool                       // the mode in force
	pinned    map[string]bool            // MCP names listed in search mode too
	revealed  map[string]map[string]bool // session -> MCP names a search found
	listed    map[string]mcp.Tool        // MCP name -> the tool, as set
	index     *toolsearch.Index          // nil until a search needs it
	indexGen  int                        // counts the tool sets, so a stale index is not kept
	exposeKey string                     // the Expose the mode was chosen under
	tokens    int                        // the full listing's estimated tokens
}

// ownTool reports whether name is one of the host's own search tools.
func ownTool(name string) bool { return name == SearchToolName || name == CallToolName }

// EstimateTokens estimates the tokens a tool listing takes in a model's
// context: its JSON size in bytes / 4.
func EstimateTokens(tools []mcp.Tool) int {
	b, err := json.Marshal(tools)
	if err != nil {
		return 0
	}
	return len(b) / 4
}

// exposeTools decides the mode for the tools about to be set and returns
// the tools to give mcp-go: in search mode, the host's own first, and any
// server tool whose name is one of theirs refused.
func (f *Frontend) exposeTools(tools []server.ServerTool, refusals []Refusal) ([]server.ServerTool, []Refusal) {
	e := f.currentSettings().Expose
	tokens := 0
	searching := e.Mode == config.ExposeSearch
	if e.Mode == config.ExposeAuto || e.Mode == config.ExposeSearch {
		plain := make([]mcp.Tool, 0, len(tools))
		for _, t := range tools {
			plain = append(plain, t.Tool)
		}
		tokens = EstimateTokens(plain)
		searching = searching || tokens > e.BudgetTokens
	}
	var listed map[string]mcp.Tool // what search_tools finds, in search mode
	if searching {
		listed = make(map[string]mcp.Tool, len(tools))
		for _, t := range tools {
			listed[t.Tool.Name] = t.Tool
		}
	}
	pinned := map[string]bool{}
	for _, name := range e.AlwaysList {
		srv, tool, _ := cutCanonical(name)
		pinned[MCPName(f.reg.Prefix(srv), tool, DefaultNameBudget)] = true
	}
	f.exMu.Lock()
	f.searching, f.pinned, f.listed, f.index, f.tokens = searching, pinned, listed, nil, tokens
	f.indexGen++
	if f.revealed == nil {
		f.revealed = map[string]map[string]bool{}
	}
	f.exMu.Unlock()
	if !searching {
		return tools, refusals
	}
	out := make([]server.ServerTool, 0, len(tools)+2)
	out = append(out, f.searchTool(), f.callTool())
	for _, t := range tools {
		if ownTool(t.Tool.Name) {
			refusals = append(refusals, Refusal{Tool: t.Tool.Name, Reason: "the name is the host's own search-mode tool"})
			continue
		}
		out = append(out, t)
	}
	return out, refusals
}

// Searching reports whether tools are listed in search mode now.
func (f *Frontend) Searching() bool {
	f.exMu.Lock()
	defer f.exMu.Unlock()
	return f.searching
}

// applyExpose re-lists the tools when the expose settings changed.
func (f *Frontend) applyExpose() {
	e := f.currentSettings().Expose
	key := fmt.Sprintf("%s|%d|%s", e.Mode, e.BudgetTokens, strings.Join(e.AlwaysList, ","))
	f.exMu.Lock()
	prev := f.exposeKey
	if prev == "" { // New listed every tool
		prev = fmt.Sprintf("%s|%d|", config.ExposeAll, e.BudgetTokens)
	}
	same := prev == key
	f.exposeKey = key
	f.exMu.Unlock()
	if !same {
		f.refreshMu.Lock()
		f.listing = nil // the same tools, exposed otherwise
		f.refreshMu.Unlock()
		f.Refresh()
	}
}

// exposeFilter narrows a listing in search mode to the host's own tools,
// the pinned ones and those a search found for the session.
func (f *Frontend) exposeFilter(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	f.exMu.Lock()
	defer f.exMu.Unlock()
	if !f.searching {
		return tools
	}
	found := f.revealed[sessionID(ctx)]
	out := tools[:0:0]
	for _, t := range tools {
		if ownTool(t.Name) || f.pinned[t.Name] || found[t.Name] {
			out = append(out, t)
		}
	}
	return out
}

// forgetSession drops what searches revealed to a session that ended.
func (f *Frontend) forgetSession(session string) {
	f.exMu.Lock()
	delete(f.revealed, session)
	f.exMu.Unlock()
}

// searchIndex returns the index of the tools served now (built at the
// first search after the tools changed).
func (f *Frontend) searchIndex() *toolsearch.Index {
	f.exMu.Lock()
	ix, gen := f.index, f.indexGen
	f.exMu.Unlock()
	if ix != nil {
		return ix
	}
	names := f.names.Load()
	var docs []toolsearch.Doc
	for _, t := range f.reg.Tools() { // ready, and visible under the access level
		mcpName := MCPName(f.reg.Prefix(t.Server), t.Tool.Name, DefaultNameBudget)
		if names == nil || (*names)[mcpName] != t.Name {
			continue // refused: not served
		}
		docs = append(docs, toolsearch.Doc{
			Name: t.Name, Title: t.Tool.Title, Description: t.Tool.Description,
			Params: toolsearch.ParamsFromSchema(t.Tool.InputSchema),
		})
	}
	ix = toolsearch.New(docs)
	f.exMu.Lock()
	if f.indexGen == gen { // the tools did not change meanwhile
		f.index = ix
	}
	f.exMu.Unlock()
	return ix
}

func (f *Frontend) searchTool() server.ServerTool {
	t := mcp.NewToolWithRawSchema(SearchToolName,
		"Find the tools for a task among every tool this host serves (they are not all listed, to save your context). "+
			"Describe the task in words; you get the best matches with their full input schemas, and they are added to your tool list, "+
			"so you can call them directly (or through "+CallToolName+").",
		json.RawMessage(`{"type":"object","properties":{`+
			`"query":{"type":"string","description":"What you want to do, in words, e.g. \"open a pull request\" or \"read a file\""},`+
			`"k":{"type":"integer","minimum":1,"maximum":20,"description":"How many tools to return (default 5)"}},`+
			`"required":["query"],"additionalProperties":false}`))
	t.Title = "Search tools"
	readOnly, closed := true, false
	t.Annotations = mcp.ToolAnnotation{Title: "Search tools", ReadOnlyHint: &readOnly, OpenWorldHint: &closed}
	return server.ServerTool{Tool: t, Handler: f.searchTools}
}

func (f *Frontend) callTool() server.ServerTool {
	t := mcp.NewToolWithRawSchema(CallToolName,
		"Call a tool by the name "+SearchToolName+" returned, with its arguments. It is checked exactly as a direct call is "+
			"(permissions, access level, argument schema, approval).",
		json.RawMessage(`{"type":"object","properties":{`+
			`"name":{"type":"string","description":"The tool's name as `+SearchToolName+` returned it, e.g. github__create_issue"},`+
			`"arguments":{"type":"object","description":"The tool's arguments, as its input schema says"}},`+
			`"required":["name"],"additionalProperties":false}`))
	t.Title = "Call a tool"
	return server.ServerTool{Tool: t, Handler: f.callNamed}
}

// foundTool is one tool in a search's answer.
type foundTool struct {
	mcp.Tool
	Server string  `json:"server"`
	Score  float64 `json:"score"`
}

// searchTools answers SearchToolName.
func (f *Frontend) searchTools(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Query string `json:"query"`
		K     int    `json:"k"`
	}
	if err := decodeArgs(req, &in); err != nil {
		return mcp.NewToolResultError(SearchToolName + ": " + err.Error()), nil
	}
	if strings.TrimSpace(in.Query) == "" {
		return mcp.NewToolResultError(SearchToolName + ": query is empty: describe the task in words, e.g. \"create an issue\""), nil
	}
	k := in.K
	if k <= 0 {
		k = 5
	}
	k = min(k, maxSearchK)
	// The index holds every tool served; a caller finds only those its
	// access level lets it see, as tools/list shows it (listReady): a
	// read-only caller was offered the write tools with their schemas
	// (red team round 4).
	who := registry.CallerFrom(ctx)
	hidden := map[string]bool{}
	for _, t := range f.reg.Tools() {
		if !who.Visible(t.Access()) {
			hidden[t.Name] = true
		}
	}
	hits := f.searchIndex().Search(in.Query, k+len(hidden))
	found := make([]foundTool, 0, k)
	f.exMu.Lock()
	for _, h := range hits {
		if hidden[h.Doc.Name] || len(found) == k {
			continue
		}
		srv, tool, _ := cutCanonical(h.Doc.Name)
		name := MCPName(f.reg.Prefix(srv), tool, DefaultNameBudget)
		if t, ok := f.listed[name]; ok {
			found = append(found, foundTool{Tool: t, Server: srv, Score: h.Score})
		}
	}
	session := sessionID(ctx)
	added := 0
	if session != "" && f.searching {
		seen := f.revealed[session]
		if seen == nil {
			seen = map[string]bool{}
			f.revealed[session] = seen
		}
		for _, t := range found {
			if !seen[t.Name] && !f.pinned[t.Name] {
				seen[t.Name] = true
				added++
			}
		}
	}
	f.exMu.Unlock()
	if added > 0 {
		// Before the answer, so the client lists again knowing them.
		if err := f.notifyCall(ctx, string(mcp.MethodNotificationToolsListChanged), nil); err != nil {
			f.log.Debug("tools/list_changed not delivered", "error", err)
		}
	}
	body := struct {
		Tools []foundTool `json:"tools"`
		Note  string      `json:"note"`
	}{Tools: found}
	switch {
	case len(found) == 0:
		body.Note = "No tool matches these words; try others (what the tool does, or the service's name)."
	case added > 0:
		body.Note = fmt.Sprintf("These tools are now in your tool list (%d new): call them by name, or through %s.", added, CallToolName)
	default:
		body.Note = fmt.Sprintf("Call them by name, or through %s.", CallToolName)
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return mcp.NewToolResultError(SearchToolName + ": " + err.Error()), nil
	}
	res := mcp.NewToolResultText(string(raw))
	res.StructuredContent = json.RawMessage(raw)
	return res, nil
}

// callNamed answers CallToolName: the named tool goes through f.call, as
// a direct call does.
func (f *Frontend) callNamed(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := decodeArgs(req, &in); err != nil {
		return mcp.NewToolResultError(CallToolName + ": " + err.Error()), nil
	}
	mcpName, canonical := f.resolveName(in.Name)
	if canonical == "" {
		err := fmt.Errorf("there is no tool named %q: use a name %s returned (e.g. github__create_issue)", in.Name, SearchToolName)
		f.reg.AuditRefusal(registry.WithClient(ctx, clientID(ctx)), in.Name, in.Arguments, "unknown", err)
		return mcp.NewToolResultError(CallToolName + ": " + err.Error()), nil
	}
	inner := req
	inner.Params.Name = mcpName
	inner.Params.Arguments = nil
	inner.Params.RawArguments = in.Arguments
	return f.call(ctx, canonical, inner)
}

// resolveName finds a served tool by its MCP name or its canonical name.
func (f *Frontend) resolveName(name string) (mcpName, canonical string) {
	names := f.names.Load()
	if names == nil || ownTool(name) {
		return "", ""
	}
	if c, ok := (*names)[name]; ok {
		return name, c
	}
	for m, c := range *names {
		if c == name {
			return m, c
		}
	}
	return "", ""
}

// decodeArgs decodes a call's arguments into v.
func decodeArgs(req mcp.CallToolRequest, v any) error {
	raw := []byte(req.Params.RawArguments)
	if len(raw) == 0 {
		if req.Params.Arguments == nil {
			return nil
		}
		var err error
		if raw, err = json.Marshal(req.Params.Arguments); err != nil {
			return err
		}
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("arguments do not fit the input schema: %v", err)
	}
	return nil
}

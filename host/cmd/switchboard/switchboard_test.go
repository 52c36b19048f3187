package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// The built-in switchboard server, through a real host and a real MCP
// client: its tools go through the guards like every other tool.

type sbServer struct {
	Name     string `json:"name"`
	Kind     string `json:"kind"`
	Status   string `json:"status"`
	Protocol int    `json:"protocol"`
	Version  string `json:"version"`
	PID      int    `json:"pid"`
	Tools    int    `json:"tools"`
	Restarts int    `json:"restarts"`
	Sandbox  string `json:"sandbox"`
}

type sbCall struct {
	CallID   string `json:"call_id"`
	Client   string `json:"client"`
	Tool     string `json:"tool"`
	Decision string `json:"decision"`
	Outcome  string `json:"outcome"`
}

type sbRefusal struct {
	CallID   string   `json:"call_id"`
	Tool     string   `json:"tool"`
	By       string   `json:"by"`
	Rule     string   `json:"rule"`
	Patterns []string `json:"patterns"`
	Allow    []string `json:"allow"`
}

// sbJSON calls a switchboard tool and decodes its structured result.
func sbJSON(t *testing.T, c *client.Client, tool string, args map[string]any, v any) {
	t.Helper()
	res, err := callTool(t.Context(), c, tool, args, nil)
	if err != nil || res.IsError {
		t.Fatalf("%s: %v %s", tool, err, resultText(res))
	}
	if err := json.Unmarshal([]byte(resultText(res)), v); err != nil {
		t.Fatalf("%s: %v in %s", tool, err, resultText(res))
	}
}

func sbServers(t *testing.T, c *client.Client) map[string]sbServer {
	t.Helper()
	var out struct{ Servers []sbServer }
	sbJSON(t, c, "switchboard__servers", map[string]any{}, &out)
	m := map[string]sbServer{}
	for _, s := range out.Servers {
		m[s.Name] = s
	}
	return m
}

func sbRecent(t *testing.T, c *client.Client) []sbCall {
	t.Helper()
	var out struct{ Calls []sbCall }
	sbJSON(t, c, "switchboard__recent_calls", map[string]any{"limit": 50}, &out)
	return out.Calls
}

// serveHTTP starts `switchboard serve --http` and returns its URL.
func serveHTTP(t *testing.T, e env) string {
	t.Helper()
	cmd := exec.Command(e.bins.Switchboard, "serve", "--config", e.config, "--http", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=warn")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	url := ""
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "switchboard: serving MCP at "); ok {
			url = u
			break
		}
	}
	if url == "" {
		t.Fatal("serve announced no URL")
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return url
}

// httpClient is a client of the 2025-11-25 era, which has HTTP sessions:
// each is its own caller (on 2026-07-28, sessionless, the HTTP clients of
// a host without authentication are one caller, "mcp").
func httpClient(t *testing.T, url string) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient(url)
	if err != nil {
		t.Fatal(err)
	}
	client.WithLegacyProtocolOnly()(c) //nolint:staticcheck // SA1019: the era with HTTP sessions, on purpose
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	initialize(t, c)
	return c
}

// TestSwitchboardServer: servers, why_refused and recent_calls for two
// sessions of one host under the default policy (allow, plus a deny
// rule), and restart_server refused there without approval.
func TestSwitchboardServer(t *testing.T) {
	e := setupWith(t, "permissions {\n  deny = [\"fx.count\"]\n}\n")
	url := serveHTTP(t, e)
	a, b := httpClient(t, url), httpClient(t, url)

	tools, err := a.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	perServer := map[string]int{}
	for _, tl := range tools.Tools {
		server, _, _ := strings.Cut(tl.Name, "__")
		perServer[server]++
	}
	for _, name := range []string{"servers", "restart_server", "why_refused", "recent_calls"} {
		if perServer["switchboard"] == 0 || !strings.Contains(toolNames(tools), "switchboard__"+name) {
			t.Errorf("tools/list has no switchboard__%s", name)
		}
	}

	// servers: what status --json shows, for every server.
	got := sbServers(t, a)
	for _, name := range []string{"filesystem", "bash", "git", "web", "switchboard", "hello", "fx"} {
		s, ok := got[name]
		switch {
		case !ok:
			t.Errorf("servers has no %s: %v", name, got)
		case s.Status != "ready" || s.Protocol == 0 || s.Version == "" || s.PID == 0 || s.Sandbox == "":
			t.Errorf("servers[%s] = %+v, want it ready with protocol, version, pid and sandbox", name, s)
		case s.Tools < perServer[name] || s.Tools == 0 || (name == "switchboard" || name == "hello") && s.Tools != perServer[name]:
			// A server may describe tools tools/list leaves out (fx has
			// one no client is shown); the built-ins show all of theirs.
			t.Errorf("servers[%s].tools = %d, tools/list has %d", name, s.Tools, perServer[name])
		}
	}
	if got["switchboard"].Kind != "builtin" || got["fx"].Kind != "plugin" {
		t.Errorf("kinds: switchboard %q, fx %q", got["switchboard"].Kind, got["fx"].Kind)
	}
	if sb := got["switchboard"].Sandbox; !strings.HasPrefix(sb, "confined") {
		t.Errorf("the switchboard server is not confined: %q", sb)
	}

	// restart_server is WRITE and asks first: refused without approval
	// (this client cannot be asked), and the server keeps its process.
	text, isErr := mustCall(t, a, "switchboard__restart_server", map[string]any{"name": "hello"})
	if !isErr || !strings.Contains(text, "needs approval") {
		t.Fatalf("restart_server without approval = %q (error %v), want a refusal", text, isErr)
	}
	if after := sbServers(t, a)["hello"]; after.PID != got["hello"].PID || after.Restarts != got["hello"].Restarts {
		t.Errorf("hello restarted although the call was refused: %+v → %+v", got["hello"], after)
	}
	var why sbRefusal
	sbJSON(t, a, "switchboard__why_refused", map[string]any{}, &why)
	if why.Tool != "switchboard.restart_server" || why.By != "approval" || !strings.Contains(strings.Join(why.Allow, "\n"), `permissions { allow = ["switchboard.restart_server"] }`) {
		t.Errorf("why_refused after restart_server = %+v", why)
	}
	restartID := why.CallID

	// A deny rule: the rule, and what would allow the call.
	if text, isErr := mustCall(t, a, "fx__count", map[string]any{"n": 1}); !isErr || !strings.Contains(text, "denied") {
		t.Fatalf("fx__count = %q (error %v), want a refusal by rule", text, isErr)
	}
	sbJSON(t, a, "switchboard__why_refused", map[string]any{}, &why)
	if why.Tool != "fx.count" || why.By != "rule" || why.Rule != "fx.count" || !strings.Contains(strings.Join(why.Allow, "\n"), `deny rule "fx.count"`) {
		t.Errorf("why_refused after fx__count = %+v", why)
	}
	// By call id, as recent_calls shows it.
	sbJSON(t, a, "switchboard__why_refused", map[string]any{"call_id": restartID}, &why)
	if why.Tool != "switchboard.restart_server" || why.CallID != restartID {
		t.Errorf("why_refused(%s) = %+v", restartID, why)
	}

	// B's calls are B's own.
	if text, isErr := mustCall(t, b, "hello__greet", map[string]any{"name": "Bea"}); isErr {
		t.Fatalf("hello__greet: %s", text)
	}
	recentA, recentB := sbRecent(t, a), sbRecent(t, b)
	byTool := func(calls []sbCall) map[string][]sbCall {
		m := map[string][]sbCall{}
		for _, c := range calls {
			m[c.Tool] = append(m[c.Tool], c)
		}
		return m
	}
	ta, tb := byTool(recentA), byTool(recentB)
	if len(ta["fx.count"]) != 1 || ta["fx.count"][0].Outcome != "refused" || ta["fx.count"][0].Decision != "deny" {
		t.Errorf("a's recent fx.count = %+v, want one refused call", ta["fx.count"])
	}
	if len(ta["switchboard.restart_server"]) != 1 || ta["switchboard.restart_server"][0].CallID != restartID {
		t.Errorf("a's recent restart_server = %+v, want call %s", ta["switchboard.restart_server"], restartID)
	}
	if len(ta["hello.greet"]) != 0 {
		t.Errorf("a sees b's call: %+v", ta["hello.greet"])
	}
	if len(tb["hello.greet"]) != 1 || tb["hello.greet"][0].Outcome != "ok" || len(tb["fx.count"]) != 0 || len(tb["switchboard.restart_server"]) != 0 {
		t.Errorf("b's recent calls = %+v, want its one greet and none of a's", recentB)
	}
	clientA := recentA[0].Client
	for _, c := range recentA {
		if c.Client != clientA {
			t.Errorf("a's recent calls hold another client's call: %+v", c)
		}
	}
	if recentB[0].Client == clientA {
		t.Errorf("a and b share the client id %q", clientA)
	}
	// B cannot read A's refusal.
	if text, isErr := mustCall(t, b, "switchboard__why_refused", map[string]any{"call_id": restartID}); !isErr || !strings.Contains(text, "of yours") {
		t.Errorf("b's why_refused(%s) = %q (error %v), want not found", restartID, text, isErr)
	}

	// Every request of the plugin to the host is audited.
	recs, ok := auditRecords(t, e, func(r map[string]any) bool {
		return r["action"] == "host.recent_calls" && r["client"] == "plugin:switchboard"
	})
	if !ok {
		t.Errorf("no audit record of the plugin's host requests; audit.jsonl has %d records", len(recs))
	}
}

func toolNames(l *mcp.ListToolsResult) string {
	var names []string
	for _, t := range l.Tools {
		names = append(names, t.Name)
	}
	return strings.Join(names, " ")
}

// TestSwitchboardRestartApproved: a person's yes (elicitation) lets
// restart_server run under the default policy: the target gets a new
// process and its restart count goes up. It never restarts itself.
func TestSwitchboardRestartApproved(t *testing.T) {
	e := setup(t)
	el := &elicitor{}
	c := guardedClient(t, e, el)
	t.Cleanup(func() { _ = c.Close() })
	before := sbServers(t, c)["hello"]
	el.will("allow_once")
	if text, isErr := mustCall(t, c, "switchboard__restart_server", map[string]any{"name": "hello"}); isErr || !strings.Contains(text, "restarting hello") {
		t.Fatalf("restart_server hello (approved) = %q (error %v)", text, isErr)
	}
	if el.count() != 1 {
		t.Errorf("the person was asked %d times, want 1", el.count())
	}
	var after sbServer
	if !eventually(30*time.Second, func() bool {
		after = sbServers(t, c)["hello"]
		return after.Status == "ready" && after.PID != 0 && after.PID != before.PID && after.Restarts > before.Restarts
	}) {
		t.Fatalf("hello after restart_server = %+v, before %+v: want a new pid and one more restart", after, before)
	}
	if text, isErr := mustCall(t, c, "hello__greet", map[string]any{"name": "Again"}); isErr || !strings.Contains(text, "Again") {
		t.Errorf("hello__greet after its restart = %q", text)
	}
	el.will("allow_once")
	self := sbServers(t, c)["switchboard"]
	if text, isErr := mustCall(t, c, "switchboard__restart_server", map[string]any{"name": "switchboard"}); !isErr || !strings.Contains(text, "cannot restart itself") {
		t.Errorf("restart_server switchboard = %q (error %v), want a refusal", text, isErr)
	}
	if now := sbServers(t, c)["switchboard"]; now.PID != self.PID {
		t.Errorf("the switchboard server restarted itself: pid %d → %d", self.PID, now.PID)
	}
	// An allow rule lets it run without asking.
	e2 := setupWith(t, "permissions {\n  allow = [\"switchboard.restart_server\"]\n}\n")
	c2 := guardedClient(t, e2, nil)
	t.Cleanup(func() { _ = c2.Close() })
	if text, isErr := mustCall(t, c2, "switchboard__restart_server", map[string]any{"name": "fx"}); isErr {
		t.Errorf("restart_server with an allow rule = %q", text)
	}
}

// TestSwitchboardOff: enabled = false removes the server; its name stays
// reserved, for plugin blocks (validate says so) and discovered plugins.
func TestSwitchboardOff(t *testing.T) {
	e := setupWith(t, "builtin \"switchboard\" { enabled = false }\n")
	out, _, code := run(t, e, "tools", "--config", e.config)
	if code != 0 || strings.Contains(out, "switchboard.") {
		t.Errorf("tools with the switchboard server off (exit %d):\n%s", code, out)
	}
	out, _, _ = run(t, e, "inspect", "--config", e.config)
	if !strings.Contains(out, "switchboard") || !strings.Contains(out, "disabled") {
		t.Errorf("inspect does not show the switchboard server disabled:\n%s", out)
	}

	bad := setupWith(t, "builtin \"switchboard\" { enabled = false }\nplugin \"switchboard\" { path = \"x\" }\n")
	out, errOut, code := run(t, bad, "validate", "--config", bad.config)
	if code == 0 || !strings.Contains(out+errOut, "reserved for the built-in introspection server") {
		t.Errorf("validate with a plugin named switchboard = %d:\n%s%s", code, out, errOut)
	}

	// A binary named switchboard-plugin-switchboard in plugin_dirs does not
	// take the name.
	dir := t.TempDir()
	b, err := os.ReadFile(e.bins.Hello)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "switchboard-plugin-switchboard"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	found := setupWith(t, "builtin \"switchboard\" { enabled = false }\nplugin_dirs = ["+strconvQuote(dir)+"]\nallow_unlocked_plugins = true\n")
	out, errOut, _ = run(t, found, "inspect", "--json", "--config", found.config)
	if !strings.Contains(out+errOut, "reserved for the built-in introspection server") {
		t.Errorf("inspect with a discovered switchboard plugin:\n%s%s", out, errOut)
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

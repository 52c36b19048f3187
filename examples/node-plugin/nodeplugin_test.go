// Package nodeplugin_test loads the Node.js example plugin into a real
// `switchboard serve` (confined by the default sandbox) and calls its tools
// through a real MCP client and through `switchboard call`.
package nodeplugin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

func TestMain(m *testing.M) { fixtures.Main(m) }

// minNode is the oldest Node.js the example supports (package.json's
// engines: @peculiar/x509 needs 20).
const minNode = 20

var (
	depsOnce sync.Once
	errDeps  error
)

// exampleDir is this folder.
func exampleDir() string { return filepath.Join(fixtures.RepoRoot(), "examples", "node-plugin") }

// node finds a node binary of at least minNode and makes sure the
// example's dependencies are installed (npm ci, from package-lock.json,
// when node_modules is missing). Without node the test is skipped, saying
// why; under CI (which installs node first, see .ci/run) it fails instead.
func node(t *testing.T) string {
	t.Helper()
	absent := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") != "" {
			t.Fatalf("%s; .ci/run installs it before make test", msg)
		}
		t.Skipf("%s; install Node.js %d or later (or run .ci/run) to run this test", msg, minNode)
	}
	path, err := exec.LookPath("node")
	if err != nil {
		absent("node is not on PATH")
	}
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		absent("%s --version failed: %v", path, err)
	}
	m := regexp.MustCompile(`^v(\d+)\.`).FindStringSubmatch(strings.TrimSpace(string(out)))
	if m == nil {
		t.Fatalf("%s --version = %q, want vN.N.N", path, out)
	}
	if major, _ := strconv.Atoi(m[1]); major < minNode {
		absent("%s is Node.js %s, older than %d", path, strings.TrimSpace(string(out)), minNode)
	}
	depsOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(exampleDir(), "node_modules", "@grpc", "grpc-js")); err == nil {
			return
		}
		npm, err := exec.LookPath("npm")
		if err != nil {
			errDeps = fmt.Errorf("examples/node-plugin/node_modules is missing and npm is not on PATH to install it (npm ci in that folder)")
			return
		}
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = exampleDir()
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(path)+string(os.PathListSeparator)+os.Getenv("PATH"))
		if b, err := cmd.CombinedOutput(); err != nil {
			errDeps = fmt.Errorf("npm ci in examples/node-plugin: %v\n%s", err, b)
		}
	})
	if errDeps != nil {
		t.Fatal(errDeps)
	}
	return path
}

// writeConfig writes a config with the Node plugin as "node", started
// through its launcher script, its sandbox granting what it reads: its
// own folder (plugin.js, node_modules), the .proto, and the node binary.
func writeConfig(t *testing.T, nodePath string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "project"), 0o755); err != nil {
		t.Fatal(err)
	}
	realNode, err := filepath.EvalSymlinks(nodePath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`
project_dir = "project"
data_dir    = "state"
start       = "eager" # inspect looks at the running plugin (its sandbox), not its cached manifest
permissions { default = "allow" }
plugin "node" {
  path = %q
  env  = { NODE = %q, GREETING = "Hi" }
  sandbox {
    read = [%q, %q, %q]
  }
}
`, filepath.Join(exampleDir(), "switchboard-plugin-node-hello"), nodePath,
		exampleDir(), filepath.Join(fixtures.RepoRoot(), "sdk", "proto"), filepath.Dir(realNode))
	path := filepath.Join(dir, "config.hcl")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestNodePluginOverMCP(t *testing.T) {
	nodePath := node(t)
	bins := fixtures.Build(t)
	config := writeConfig(t, nodePath)

	var stderr bytes.Buffer
	c, err := client.NewStdioMCPClientWithOptions(bins.Switchboard, nil, []string{"serve", "--config", config},
		transport.WithCommandFunc(func(ctx context.Context, command string, _ []string, args []string) (*exec.Cmd, error) {
			cmd := exec.CommandContext(ctx, command, args...)
			cmd.Env = append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=warn")
			cmd.Stderr = &stderr
			return cmd, nil
		}))
	if err != nil {
		t.Fatalf("starting switchboard serve: %v", err)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatalf("client Start: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })

	var mu sync.Mutex
	var progress []float64
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationProgress) {
			if p, ok := n.Params.AdditionalFields["progress"].(float64); ok {
				mu.Lock()
				progress = append(progress, p)
				mu.Unlock()
			}
		}
	})

	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "nodeplugin-test", Version: "1"}
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatalf("Initialize: %v", err)
	}

	// Plugins start in the background; wait for the node plugin's tools.
	var names []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		tl, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatalf("ListTools: %v", err)
		}
		names = names[:0]
		for _, tool := range tl.Tools {
			names = append(names, tool.Name)
		}
		if slices.Contains(names, "node__greet") || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, want := range []string{"node__greet", "node__add", "node__count"} {
		if !slices.Contains(names, want) {
			t.Fatalf("tools/list = %v, want %s among them; host stderr:\n%s", names, want, stderr.String())
		}
	}

	call := func(name string, args map[string]any, token any) *mcp.CallToolResult {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name = name
		req.Params.Arguments = args
		if token != nil {
			req.Params.Meta = &mcp.Meta{ProgressToken: token}
		}
		res, err := c.CallTool(t.Context(), req)
		if err != nil {
			t.Fatalf("tools/call %s: %v", name, err)
		}
		return res
	}

	if got := text(call("node__greet", map[string]any{"name": "Ada"}, nil)); !strings.HasPrefix(got, "Hi, Ada! (from Node.js v") {
		t.Errorf("greet(Ada) = %q, want \"Hi, Ada! (from Node.js v…)\" (GREETING from the plugin block's env)", got)
	}
	if res := call("node__greet", map[string]any{"name": "  "}, nil); !res.IsError || !strings.Contains(text(res), "name is empty") {
		t.Errorf("greet(blank) = %q (isError %v), want an error result saying the name is empty", text(res), res.IsError)
	}

	res := call("node__add", map[string]any{"a": 2, "b": 3.5}, nil)
	if got := text(res); got != "5.5" || res.IsError {
		t.Errorf("add(2, 3.5) = %q (isError %v), want 5.5", got, res.IsError)
	}
	if b, _ := json.Marshal(res.StructuredContent); string(b) != `{"sum":5.5}` {
		t.Errorf("add(2, 3.5) structured content = %s, want {\"sum\":5.5}", b)
	}

	// The host checks arguments against the plugin's input schema before
	// the call reaches Node.
	if res := call("node__add", map[string]any{"a": "two", "b": 3}, nil); !res.IsError || !strings.Contains(text(res), "a") {
		t.Errorf("add(\"two\", 3) = %q (isError %v), want an error naming the bad argument", text(res), res.IsError)
	}

	res = call("node__count", map[string]any{"n": 3}, "tok")
	if got := text(res); got != "counted to 3" {
		t.Errorf("count(3) = %q, want \"counted to 3\"", got)
	}
	mu.Lock()
	got := slices.Clone(progress)
	mu.Unlock()
	if !slices.Equal(got, []float64{1, 2, 3}) {
		t.Errorf("count(3) progress = %v, want [1 2 3]", got)
	}

	// Cancellation: the client gives up on a long count; the plugin is
	// told (a Cancel on the stream), stops, and keeps serving.
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	req := mcp.CallToolRequest{}
	req.Params.Name = "node__count"
	req.Params.Arguments = map[string]any{"n": 1000, "delay_ms": 1000}
	_, err = c.CallTool(ctx, req)
	cancel()
	if err == nil {
		t.Errorf("count(1000) with a 500 ms deadline succeeded, want the call cut short")
	}
	if got := text(call("node__add", map[string]any{"a": 1, "b": 1}, nil)); got != "2" {
		t.Errorf("add(1, 1) after a cancelled call = %q, want 2", got)
	}
}

func TestNodePluginFromTheCLI(t *testing.T) {
	nodePath := node(t)
	bins := fixtures.Build(t)
	config := writeConfig(t, nodePath)
	state := t.TempDir() // data_dir of the configs that set none

	run := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bins.Switchboard, args...)
		cmd.Env = append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=warn", "XDG_STATE_HOME="+state)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("switchboard %v: %v", args, err)
		}
		if code != 0 {
			t.Logf("switchboard %v: exit %d, stderr:\n%s", args, code, stderr.String())
		}
		return strings.TrimSpace(string(out)), code
	}

	if out, code := run("call", "--config", config, "node.add", `{"a":40,"b":2}`); code != 0 || out != "42" {
		t.Errorf("switchboard call node.add {40,2} = %q, exit %d; want 42, exit 0", out, code)
	}
	if out, code := run("call", "--config", config, "node.greet", `{"name":""}`); code != 1 || !strings.Contains(out, "name is empty") {
		t.Errorf("switchboard call node.greet {\"\"} = %q, exit %d; want the tool's error, exit 1", out, code)
	}

	// inspect shows what the plugin reported and what confines it: version
	// 2 negotiated (the highest both offer), its own version, and the
	// kernel sandbox it ran in.
	out, code := run("inspect", "--config", config, "--json")
	if code != 0 {
		t.Fatalf("switchboard inspect: exit %d", code)
	}
	type server struct {
		Name, Status, Version, Sandbox string
		SDKVersion                     string `json:"sdk_version"`
		Protocol, Tools                int
	}
	var servers []server
	if err := json.Unmarshal([]byte(out), &servers); err != nil {
		t.Fatalf("switchboard inspect --json = %s (%v)", out, err)
	}
	// The node plugin, beside the switchboard built-in (on by default).
	i := slices.IndexFunc(servers, func(s server) bool { return s.Name == "node" })
	if i < 0 || len(servers) != 2 {
		t.Fatalf("switchboard inspect --json = %s, want the node plugin and the switchboard built-in", out)
	}
	s := servers[i]
	if s.Name != "node" || s.Status != "ready" || s.Protocol != 2 || s.Version != "1.0.0" || s.Tools != 3 ||
		!strings.Contains(s.SDKVersion, "@grpc/grpc-js") {
		t.Errorf("inspect = %+v, want node ready on protocol 2, version 1.0.0, 3 tools, sdk @grpc/grpc-js", s)
	}
	if !strings.HasPrefix(s.Sandbox, "confined") && !strings.HasPrefix(s.Sandbox, "partly confined") {
		t.Logf("the plugin ran unconfined here: %s", s.Sandbox)
	}

	// The sandbox is what decides: without the read grants the plugin
	// cannot load plugin.js (or, with a node outside /usr, run node), and
	// the call never runs.
	bare := filepath.Join(t.TempDir(), "bare.hcl")
	if err := os.WriteFile(bare, []byte(fmt.Sprintf("permissions { default = \"allow\" }\nplugin \"node\" {\n  path = %q\n  env  = { NODE = %q }\n}\n",
		filepath.Join(exampleDir(), "switchboard-plugin-node-hello"), nodePath)), 0o600); err != nil {
		t.Fatal(err)
	}
	if s.Sandbox != "" && strings.HasPrefix(s.Sandbox, "confined") {
		cmd := exec.Command(bins.Switchboard, "call", "--config", bare, "node.add", `{"a":1,"b":2}`)
		cmd.Env = append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=error", "XDG_STATE_HOME="+state)
		b, err := cmd.CombinedOutput()
		// Denied (Landlock) or not there at all (a hidden folder such as
		// /tmp, where a checkout may live): either way node cannot read it.
		low := strings.ToLower(string(b))
		denied := strings.Contains(low, "permission denied") || strings.Contains(low, "cannot find module")
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !denied {
			t.Errorf("switchboard call without the sandbox's read grants: %v, output:\n%s\nwant exit 2 and the plugin unable to read its files", err, b)
		}
	}

	// The example's own config (for people trying it by hand) is valid.
	if _, code := run("validate", "--config", filepath.Join(exampleDir(), "config.hcl")); code != 0 {
		t.Errorf("switchboard validate examples/node-plugin/config.hcl: exit %d", code)
	}
}

// text joins a result's text content.
func text(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

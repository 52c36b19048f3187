package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

func TestMain(m *testing.M) { fixtures.Main(m) }

type env struct {
	bins    fixtures.Binaries
	config  string
	project string
	marker  string
}

// setup writes a config with the four built-ins, the hello example and the
// test plugin (as "fx") in a fresh project directory.
func setup(t *testing.T) env { return setupWith(t, "") }

// setupWith is setup with extra config appended.
func setupWith(t *testing.T, extra string) env {
	t.Helper()
	bins := fixtures.Build(t)
	dir := t.TempDir()
	project := filepath.Join(dir, "project")
	if err := os.Mkdir(project, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "notes.txt"), []byte("line one\nline two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	markerDir := t.TempDir()
	marker := filepath.Join(markerDir, "cancelled")
	// Every server answers before serve does (however loaded the machine
	// running the tests), unless a test is about the ones that join later.
	if !strings.Contains(extra, "start_wait") {
		extra = "start_wait = \"2m\"\n" + extra
	}
	cfg := fmt.Sprintf(`
project_dir = "project"
data_dir    = "state"
builtin "filesystem" {}
builtin "bash" {}
builtin "git" {}
builtin "web" {}
plugin "hello" { path = %q }
plugin "fx" {
  path = %q
  env  = { FIXTURE_CANCEL_MARKER = %q }
  sandbox { write = [%q] }   # where the fixture leaves its cancellation marker
}
%s
`, bins.Hello, bins.TestPlugin, marker, markerDir, extra)
	path := filepath.Join(dir, "config.hcl")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return env{bins: bins, config: path, project: project, marker: marker}
}

const servers = 6 // built-ins + hello + fx

// mcpClient starts `switchboard serve` under a real mcp-go stdio client;
// each tweak, if any, changes its command before it starts.
func mcpClient(t *testing.T, e env, tweaks ...func(*exec.Cmd)) (*client.Client, *exec.Cmd) {
	t.Helper()
	var cmd *exec.Cmd
	c, err := client.NewStdioMCPClientWithOptions(e.bins.Switchboard, nil, []string{"serve", "--config", e.config},
		transport.WithCommandFunc(func(ctx context.Context, command string, _ []string, args []string) (*exec.Cmd, error) {
			cmd = exec.CommandContext(ctx, command, args...)
			cmd.Env = append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=warn")
			for _, tweak := range tweaks {
				tweak(cmd)
			}
			return cmd, nil
		}))
	if err != nil {
		t.Fatalf("starting switchboard serve: %v", err)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatalf("client Start: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, cmd
}

func initialize(t *testing.T, c *client.Client) *mcp.InitializeResult {
	t.Helper()
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "e2e", Version: "1"}
	res, err := c.Initialize(t.Context(), req)
	if err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	return res
}

func callTool(ctx context.Context, c *client.Client, name string, args map[string]any, token any) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	if token != nil {
		req.Params.Meta = &mcp.Meta{ProgressToken: token}
	}
	return c.CallTool(ctx, req)
}

func resultText(r *mcp.CallToolResult) string {
	if r == nil { // the call failed: the caller reports its error
		return ""
	}
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func TestMCPClientOverStdio(t *testing.T) {
	e := setup(t)
	c, _ := mcpClient(t, e)

	var mu sync.Mutex
	var progress []mcp.JSONRPCNotification
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationProgress) {
			mu.Lock()
			progress = append(progress, n)
			mu.Unlock()
		}
	})
	started := watchProgress(c)
	init := initialize(t, c)
	if !strings.Contains(init.Instructions, "hello: ready") || !strings.Contains(init.Instructions, "filesystem: ready") {
		t.Errorf("instructions lack per-server status lines:\n%s", init.Instructions)
	}

	tools, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	byName := map[string]mcp.Tool{}
	for _, tl := range tools.Tools {
		byName[tl.Name] = tl
	}
	for _, want := range []string{"filesystem__read_text_file", "bash__run", "git__git_status", "web__fetch", "hello__greet", "fx__echo", "fx__progress"} {
		if _, ok := byName[want]; !ok {
			t.Errorf("tools/list lacks %s (has %d tools)", want, len(byName))
		}
	}
	// "dup.name" and "dup_name" both sanitise to fx__dup_name: the first
	// keeps it, the second is refused and reported, never shadowed.
	if dup, ok := byName["fx__dup_name"]; !ok || !strings.Contains(init.Instructions, "fx.dup_name is not available") {
		t.Errorf("sanitising collision: fx__dup_name listed %v (%q); instructions:\n%s", ok, dup.Description, init.Instructions)
	}
	res, err := callTool(t.Context(), c, "fx__dup_name", nil, nil)
	if err != nil || resultText(res) != "dup.name" {
		t.Errorf("fx__dup_name routed to %q, %v; want the first claimant dup.name", resultText(res), err)
	}
	greet := byName["hello__greet"]
	if greet.Annotations.ReadOnlyHint == nil || !*greet.Annotations.ReadOnlyHint {
		t.Errorf("hello__greet readOnlyHint = %v, want true", greet.Annotations.ReadOnlyHint)
	}
	schema, _ := json.Marshal(greet.InputSchema)
	if len(greet.RawInputSchema) > 0 {
		schema = greet.RawInputSchema
	}
	if !bytes.Contains(schema, []byte(`"required":["name"]`)) || !bytes.Contains(schema, []byte("Who to greet")) {
		t.Errorf("hello__greet schema lost parts: %s", schema)
	}

	t.Run("call", func(t *testing.T) {
		res, err := callTool(t.Context(), c, "hello__greet", map[string]any{"name": "Ada"}, nil)
		if err != nil || res.IsError || !strings.Contains(resultText(res), "Ada") {
			t.Fatalf("hello__greet = %v, %v", res, err)
		}
		res, err = callTool(t.Context(), c, "filesystem__read_text_file", map[string]any{"path": "notes.txt", "head": 1}, nil)
		if err != nil || !strings.HasPrefix(resultText(res), "line one\nsha256: ") {
			t.Errorf("read_text_file head=1 = %q, %v", resultText(res), err)
		}
		res, err = callTool(t.Context(), c, "filesystem__read_text_file", map[string]any{"path": "/etc/hostname"}, nil)
		if err != nil || !res.IsError || !strings.Contains(resultText(res), "outside") {
			t.Errorf("read_text_file outside the project = %q, %v; want an error result", resultText(res), err)
		}
	})

	t.Run("progress", func(t *testing.T) {
		res, err := callTool(t.Context(), c, "fx__progress", map[string]any{"steps": 3}, "tok-1")
		if err != nil || resultText(res) != "done 3 steps" {
			t.Fatalf("fx__progress = %v, %v", res, err)
		}
		eventually(5*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(progress) >= 3
		})
		mu.Lock()
		defer mu.Unlock()
		if len(progress) != 3 {
			t.Fatalf("got %d progress notifications, want 3", len(progress))
		}
		for i, n := range progress {
			if tok := n.Params.AdditionalFields["progressToken"]; tok != "tok-1" {
				t.Errorf("progress %d token = %v, want tok-1", i, tok)
			}
			if msg := n.Params.AdditionalFields["message"]; msg != fmt.Sprintf("step %d", i+1) {
				t.Errorf("progress %d message = %v", i, msg)
			}
		}
	})

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := callTool(ctx, c, "fx__sleep", map[string]any{"ms": 60000}, "cancel-me")
			done <- err
		}()
		started.waitStarted(t, "cancel-me")
		cancel()
		if err := <-done; err == nil {
			t.Fatal("fx__sleep returned before its cancellation")
		}
		if !eventually(5*time.Second, func() bool { _, err := os.Stat(e.marker); return err == nil }) {
			t.Error("the plugin's handler never saw the client's notifications/cancelled")
		}
	})

	t.Run("slow calls do not hold up others", func(t *testing.T) {
		// More slow calls than mcp-go's default of 5 workers.
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Distinct arguments: identical ones would have their identical results shortened.
				_, _ = callTool(ctx, c, "fx__sleep", map[string]any{"ms": 60000 + i}, fmt.Sprintf("slow-%d", i))
			}()
		}
		// Every slow call is running in the plugin.
		for i := 0; i < 8; i++ {
			started.waitStarted(t, fmt.Sprintf("slow-%d", i))
		}
		qctx, qcancel := context.WithTimeout(t.Context(), 20*time.Second)
		res, err := callTool(qctx, c, "hello__greet", map[string]any{"name": "Quick"}, nil)
		qcancel()
		cancel()
		wg.Wait()
		if err != nil || !strings.Contains(resultText(res), "Quick") {
			t.Fatalf("hello__greet behind 8 slow calls = %v, %v", res, err)
		}
	})

	t.Run("plugin dies mid-call", func(t *testing.T) {
		res, err := callTool(t.Context(), c, "fx__crash", nil, nil)
		if err != nil {
			t.Fatalf("fx__crash: protocol error %v, want an error result", err)
		}
		if !res.IsError || !strings.Contains(resultText(res), "exited") {
			t.Errorf("fx__crash = %q (isError %v), want an error result saying the plugin exited", resultText(res), res.IsError)
		}
		res, err = callTool(t.Context(), c, "hello__greet", map[string]any{"name": "Survivor"}, nil)
		if err != nil || !strings.Contains(resultText(res), "Survivor") {
			t.Errorf("host stopped serving after a plugin crash: %v, %v", res, err)
		}
	})
}

// serve starts `switchboard serve` with a stdin pipe and waits until every
// plugin process has started; it returns the command and the plugin pids.
func serve(t *testing.T, e env) (*exec.Cmd, *os.File, []int) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(e.bins.Switchboard, "serve", "--config", e.config)
	cmd.Stdin = r
	cmd.Env = append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=info")
	var stderr fixtures.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	// serve logs this once every server has started (handshakes done).
	ready := eventually(30*time.Second, func() bool { return strings.Contains(stderr.String(), "serving MCP over stdio") })
	// Every process under the host: plugins, and for confined ones the
	// sandbox spawner and helpers above them.
	pids := fixtures.Descendants(cmd.Process.Pid)
	if !ready || len(pids) < servers {
		_ = cmd.Process.Kill()
		t.Fatalf("serve started %d plugin processes, want %d (ready: %v); stderr:\n%s", len(pids), servers, ready, stderr.String())
	}
	t.Cleanup(func() {
		fixtures.Kill(pids)
		_ = cmd.Process.Kill()
		_ = w.Close()
	})
	return cmd, w, pids
}

func waitExit(t *testing.T, cmd *exec.Cmd) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("serve did not exit")
		return nil
	}
}

func TestTeardownLeavesNoProcess(t *testing.T) {
	tests := []struct {
		name string
		stop func(cmd *exec.Cmd, stdin *os.File)
	}{
		{"stdin closed", func(_ *exec.Cmd, stdin *os.File) { _ = stdin.Close() }},
		{"SIGTERM", func(cmd *exec.Cmd, _ *os.File) { _ = cmd.Process.Signal(syscall.SIGTERM) }},
		{"SIGKILL of the host", func(cmd *exec.Cmd, _ *os.File) { _ = cmd.Process.Kill() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t)
			cmd, stdin, pids := serve(t, e)
			tt.stop(cmd, stdin)
			err := waitExit(t, cmd)
			if tt.name != "SIGKILL of the host" && err != nil {
				t.Errorf("serve exited with %v, want 0", err)
			}
			if alive := fixtures.WaitGone(pids, 15*time.Second); len(alive) > 0 {
				t.Errorf("plugin processes still alive after %s: %v (of %v)", tt.name, alive, pids)
			}
		})
	}
}

// run runs the switchboard binary and returns stdout, stderr and the exit
// code.
func run(t *testing.T, e env, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(e.bins.Switchboard, args...)
	cmd.Env = append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=off")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func TestCLI(t *testing.T) {
	e := setup(t)
	cfg := "--config=" + e.config
	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     string // substring
		stderr     string // substring
		stderrLine bool   // stderr is exactly one line
	}{
		{"call ok", []string{"call", cfg, "hello.greet", `{"name":"Ada"}`}, 0, "Hello, Ada!", "", false},
		{"call tool error", []string{"call", cfg, "hello.greet", `{"name":""}`}, 1, "name is empty", "", false},
		{"call unknown tool", []string{"call", cfg, "hello.nope"}, 2, "", "has no tool", true},
		{"call unknown server", []string{"call", cfg, "nope.x"}, 2, "", "no server named", true},
		{"call bad json", []string{"call", cfg, "hello.greet", `{name}`}, 2, "", "must be a JSON object", true},
		{"call bad arguments", []string{"call", cfg, "hello.greet", `{"name": 5}`}, 2, "", `argument /name: got number, want string`, true},
		{"call json", []string{"call", "--json", cfg, "hello.greet", `{"name":"Bo"}`}, 0, `"text": "Hello, Bo!"`, "", false},
		{"tools", []string{"tools", cfg}, 0, "hello.greet", "", false},
		{"tools json", []string{"tools", "--json", cfg}, 0, `"mcp_name": "hello__greet"`, "", false},
		{"inspect", []string{"inspect", cfg}, 0, "PROTOCOL", "", false},
		{"validate", []string{"validate", cfg}, 0, "is valid", "", false},
		{"version", []string{"version"}, 0, "switchboard", "", false},
		{"usage", []string{"call", cfg}, 2, "", "usage", true},
		{"filesystem write", []string{"call", cfg, "filesystem.write_file", `{"path":"cli.txt","content":"via the CLI\n"}`}, 0, "Wrote 12 bytes to cli.txt", "", false},
		{"filesystem read", []string{"call", cfg, "filesystem.read_text_file", `{"path":"cli.txt"}`}, 0, "via the CLI", "", false},
		{"filesystem outside", []string{"call", cfg, "filesystem.read_text_file", `{"path":"/etc/hostname"}`}, 1, "outside the allowed directories", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := run(t, e, tt.args...)
			if code != tt.code {
				t.Errorf("switchboard %v exited %d, want %d\nstdout: %s\nstderr: %s", tt.args, code, tt.code, out, errOut)
			}
			if !strings.Contains(out, tt.stdout) {
				t.Errorf("stdout %q lacks %q", out, tt.stdout)
			}
			if !strings.Contains(errOut, tt.stderr) {
				t.Errorf("stderr %q lacks %q", errOut, tt.stderr)
			}
			if tt.stderrLine && strings.Count(strings.TrimRight(errOut, "\n"), "\n") != 0 {
				t.Errorf("stderr is not one line: %q", errOut)
			}
		})
	}

	t.Run("inspect json", func(t *testing.T) {
		out, _, code := run(t, e, "inspect", "--json", cfg)
		var rows []struct {
			Name, Kind, Status string
			Protocol, PID      int
		}
		if code != 0 || json.Unmarshal([]byte(out), &rows) != nil {
			t.Fatalf("inspect --json = %d %q", code, out)
		}
		var names []string
		for _, r := range rows {
			names = append(names, r.Name)
			// The commands above cached every server's manifest, so
			// inspect lists them without starting them (lazy servers).
			if r.Status != "configured" || r.Protocol != 2 || r.PID != 0 {
				t.Errorf("inspect row %+v, want configured (from its manifest), protocol 2, no pid", r)
			}
		}
		if !slices.Equal(names, []string{"filesystem", "bash", "git", "web", "switchboard", "hello", "fx"}) {
			t.Errorf("inspect servers = %v", names)
		}
	})

	t.Run("bad config", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad.hcl")
		if err := os.WriteFile(bad, []byte("builtin \"bash\" {\n  timout = \"1m\"\n}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := run(t, e, "validate", "--config", bad)
		if code == 0 || !strings.Contains(errOut, "bad.hcl:2:3: error: Unsupported argument") {
			t.Errorf("validate(bad) = %d, stderr %q; want non-zero and file:line:col", code, errOut)
		}
		_, errOut, code = run(t, e, "call", "--config", bad, "bash.run", `{"command":"true"}`)
		if code != 2 || !strings.Contains(errOut, "invalid config") {
			t.Errorf("call with bad config = %d, %q; want 2 and a reason", code, errOut)
		}
	})

	t.Run("config from environment", func(t *testing.T) {
		cmd := exec.Command(e.bins.Switchboard, "call", "hello.greet", `{"name":"Env"}`)
		cmd.Env = append(os.Environ(), "SWITCHBOARD_CONFIG="+e.config, "SWITCHBOARD_LOG_LEVEL=off")
		cmd.Dir = t.TempDir()
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), "Env") {
			t.Errorf("call with $SWITCHBOARD_CONFIG = %q, %v", out, err)
		}
	})
}

func TestBashThroughHost(t *testing.T) {
	e := setupWith(t, `
permissions {
  default = "deny"
  allow   = ["bash.run:ls", "bash.run:echo", "bash.run:sleep", "bash.run:wait", "hello.*", "fx.*"]
  deny    = ["bash.run:rm"]
}`)
	c, _ := mcpClient(t, e)
	pids := make(chan int, 4)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if msg, ok := n.Params.AdditionalFields["message"].(string); ok {
			if pid, err := strconv.Atoi(strings.TrimSpace(msg)); err == nil {
				pids <- pid
			}
		}
	})
	initialize(t, c)

	tests := []struct {
		command string
		denied  string // substring of the refusal, "" = runs
	}{
		{"ls", ""},
		{"echo hi", ""},
		{"ls && rm -rf data", `rule "bash.run:rm"`},
		{"echo $(rm -rf data)", `rule "bash.run:rm"`},
		{"bash -c 'rm -rf data'", `rule "bash.run:rm"`},
		{"/bin/rm -rf data", `rule "bash.run:rm"`},
		{"ls; curl example.com", "no allow rule matches"},
		{"ls && $CMD", "could not read"},
		{"ls &&", "could not read"},
	}
	if err := os.WriteFile(filepath.Join(e.project, "data"), []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		res, err := callTool(t.Context(), c, "bash__run", map[string]any{"command": tt.command}, nil)
		if err != nil {
			t.Fatalf("bash__run(%q): %v", tt.command, err)
		}
		got := resultText(res)
		if tt.denied == "" {
			if res.IsError || !strings.Contains(got, "Exit code: 0") {
				t.Errorf("bash__run(%q) = %q, want it to run", tt.command, got)
			}
			continue
		}
		if !res.IsError || !strings.Contains(got, tt.denied) {
			t.Errorf("bash__run(%q) = %q, want refused with %q", tt.command, got, tt.denied)
		}
	}
	if b, err := os.ReadFile(filepath.Join(e.project, "data")); err != nil || string(b) != "keep me" {
		t.Errorf("a denied command touched the project: %q, %v", b, err)
	}

	// notifications/cancelled from the client kills the command's tree.
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		_, _ = callTool(ctx, c, "bash__run", map[string]any{"command": "sleep 100.4321 & echo $!; wait"}, "bash-1")
	}()
	var pid int
	select {
	case pid = <-pids:
	case <-time.After(15 * time.Second):
		t.Fatal("the background pid never arrived as progress")
	}
	// The pid the command printed is its pid inside bash's sandbox (a PID
	// namespace of its own); the host sees the process by its command line.
	_ = pid
	sleepers := fixtures.ProcessesMatching("sleep 100.4321")
	if len(sleepers) == 0 {
		t.Fatal("the background sleep is not running")
	}
	t.Cleanup(func() { fixtures.Kill(sleepers) })
	cancel()
	if alive := fixtures.WaitGone(sleepers, 10*time.Second); len(alive) > 0 {
		t.Errorf("sleep %v survived the client's cancellation", alive)
	}
}

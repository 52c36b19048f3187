package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// elicitor answers elicitation requests from a queue and counts them.
type elicitor struct {
	mu      sync.Mutex
	answers []string
	asked   []string
}

func (e *elicitor) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.asked = append(e.asked, req.Params.Message)
	if len(e.answers) == 0 {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}, nil
	}
	a := e.answers[0]
	e.answers = e.answers[1:]
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"decision": a},
	}}, nil
}

func (e *elicitor) will(a string) {
	e.mu.Lock()
	e.answers = append(e.answers, a)
	e.mu.Unlock()
}

func (e *elicitor) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.asked)
}

// guardedClient starts `switchboard serve` under a real mcp-go client,
// with elicitation support when el is not nil.
func guardedClient(t *testing.T, e env, el *elicitor, opts ...client.ClientOption) *client.Client {
	t.Helper()
	if el != nil {
		opts = append(opts, client.WithElicitationHandler(el))
	}
	c, err := client.NewStdioMCPClientWithOptions(e.bins.Switchboard, nil, []string{"serve", "--config", e.config},
		transport.WithCommandFunc(func(ctx context.Context, command string, _ []string, args []string) (*exec.Cmd, error) {
			cmd := exec.CommandContext(ctx, command, args...)
			cmd.Env = append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=warn")
			return cmd, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range opts {
		o(c)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	initialize(t, c)
	return c
}

func mustCall(t *testing.T, c *client.Client, tool string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := callTool(t.Context(), c, tool, args, nil)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return resultText(res), res.IsError
}

const guardConfig = `
permissions {
  default = "ask"
  allow   = ["hello.*", "fx.calls", "fx.clock", "filesystem.read_*"]
  deny    = ["fx.count"]
}`

func TestApprovalByElicitation(t *testing.T) {
	for _, era := range []struct {
		name string
		opts []client.ClientOption
	}{
		{"2026-07-28", nil},
		{"legacy 2025-11-25", []client.ClientOption{client.WithLegacyProtocolOnly()}}, //nolint:staticcheck // SA1019: testing the older era on purpose
	} {
		t.Run(era.name, func(t *testing.T) {
			e := setupWith(t, guardConfig)
			el := &elicitor{}
			c := guardedClient(t, e, el, era.opts...)

			// Allow once: runs, and the next call asks again.
			el.will("allow_once")
			if got, isErr := mustCall(t, c, "fx__echo", map[string]any{"text": "one"}); isErr || got != "one" {
				t.Fatalf("allow once: %q (isError %v)", got, isErr)
			}
			// Deny: refused; the plugin never sees it.
			el.will("deny")
			if got, isErr := mustCall(t, c, "fx__echo", map[string]any{"text": "two"}); !isErr || !strings.Contains(got, "denied by the user") {
				t.Errorf("deny: %q", got)
			}
			// Always allow: runs now and later without asking.
			el.will("always_allow")
			if got, _ := mustCall(t, c, "fx__echo", map[string]any{"text": "three"}); got != "three" {
				t.Errorf("always allow: %q", got)
			}
			asked := el.count()
			if got, _ := mustCall(t, c, "fx__echo", map[string]any{"text": "four"}); got != "four" {
				t.Errorf("after always allow: %q", got)
			}
			// Always deny: refused now and later without asking.
			el.will("always_deny")
			if got, isErr := mustCall(t, c, "fx__env", nil); !isErr || !strings.Contains(got, "from now on") {
				t.Errorf("always deny: %q", got)
			}
			if got, isErr := mustCall(t, c, "fx__env", nil); !isErr || !strings.Contains(got, `"fx.env"`) {
				t.Errorf("after always deny: %q", got)
			}
			if n := el.count(); n != asked+1 {
				t.Errorf("asked %d times, want %d: \"always\" answers must not ask again", n, asked+1)
			}
			if !strings.Contains(el.asked[0], "fx.echo") {
				t.Errorf("the question does not name the tool: %q", el.asked[0])
			}
			_ = c.Close()

			// The "always" answers survive a restart.
			b, err := os.ReadFile(filepath.Join(filepath.Dir(e.config), "state", "permissions.json"))
			if err != nil {
				t.Fatal(err)
			}
			var saved struct{ Allow, Deny []string }
			if json.Unmarshal(b, &saved) != nil || strings.Join(saved.Allow, ",") != "fx.echo" || strings.Join(saved.Deny, ",") != "fx.env" {
				t.Errorf("permissions.json = %s", b)
			}
			el2 := &elicitor{}
			c2 := guardedClient(t, e, el2, era.opts...)
			defer c2.Close()
			if got, _ := mustCall(t, c2, "fx__echo", map[string]any{"text": "five"}); got != "five" {
				t.Errorf("after restart, always-allowed call = %q", got)
			}
			if _, isErr := mustCall(t, c2, "fx__env", nil); !isErr {
				t.Error("after restart, always-denied call ran")
			}
			if el2.count() != 0 {
				t.Errorf("asked %d times after restart, want 0", el2.count())
			}
		})
	}
}

func TestGuards(t *testing.T) {
	e := setupWith(t, guardConfig+"\nduplicate_call_limit = 3\n")
	c := guardedClient(t, e, nil) // cannot elicit
	defer c.Close()

	t.Run("client that cannot elicit gets the config line", func(t *testing.T) {
		got, isErr := mustCall(t, c, "fx__progress", map[string]any{"steps": 1})
		if !isErr || !strings.Contains(got, `add "fx.progress" to permissions.allow in config.hcl`) {
			t.Errorf("ask without elicitation = %q", got)
		}
	})
	t.Run("deny before routing", func(t *testing.T) {
		got, isErr := mustCall(t, c, "fx__count", map[string]any{"n": 1})
		if !isErr || !strings.Contains(got, `rule "fx.count"`) {
			t.Errorf("denied call = %q", got)
		}
		if got, _ := mustCall(t, c, "fx__calls", nil); got != "0" {
			t.Errorf("the plugin saw %s calls of a denied tool, want 0", got)
		}
	})
	t.Run("schema errors name the field", func(t *testing.T) {
		got, isErr := mustCall(t, c, "hello__greet", map[string]any{"name": 42})
		if !isErr || !strings.Contains(got, "argument /name") || !strings.Contains(got, "want string") {
			t.Errorf("bad argument = %q", got)
		}
		got, isErr = mustCall(t, c, "filesystem__read_text_file", map[string]any{"path": "notes.txt", "head": "two"})
		if !isErr || !strings.Contains(got, "argument /head") {
			t.Errorf("bad head = %q", got)
		}
	})
	t.Run("repeated calls", func(t *testing.T) {
		// Identical results: the second is a short note, the third the
		// loop breaker's error; each call ran.
		for i, want := range []string{"Hello, Rep!", "Unchanged: hello.greet returned exactly the same result", "3 times in a row"} {
			got, isErr := mustCall(t, c, "hello__greet", map[string]any{"name": "Rep"})
			if !strings.Contains(got, want) || isErr != (i == 2) {
				t.Errorf("identical call %d = %q (isError %v), want %q", i+1, got, isErr, want)
			}
		}
		if got, isErr := mustCall(t, c, "hello__greet", map[string]any{"name": "Other"}); isErr || !strings.Contains(got, "Other") {
			t.Errorf("a different call after the repeats = %q", got)
		}
		// A tool whose result changes is never refused or shortened,
		// however often it is called with the same arguments.
		seen := map[string]bool{}
		for i := 0; i < 4; i++ {
			got, isErr := mustCall(t, c, "fx__clock", nil)
			if isErr || seen[got] || strings.Contains(got, "Unchanged") {
				t.Errorf("clock call %d = %q (isError %v), want a new time", i+1, got, isErr)
			}
			seen[got] = true
		}
		for i := 0; i < 4; i++ { // calls skips the check
			if got, isErr := mustCall(t, c, "fx__calls", nil); isErr {
				t.Errorf("skip-duplicate-check tool refused: %q", got)
			}
		}
	})
	t.Run("one audit line per decision", func(t *testing.T) {
		path := filepath.Join(filepath.Dir(e.config), "state", "audit.jsonl")
		// Records are written in the background: wait for all 17.
		eventually(5*time.Second, func() bool {
			b, _ := os.ReadFile(path)
			return strings.Count(string(b), "\n") >= 17
		})
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		counts := map[string]int{}
		lines := 0
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r struct {
				Tool, Decision, Outcome, Client string
				ArgsSHA256                      string `json:"args_sha256"`
			}
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("audit line %q: %v", sc.Text(), err)
			}
			if r.Client == "" || r.Tool == "" || len(r.ArgsSHA256) != 64 {
				t.Errorf("audit line lacks client or tool: %s", sc.Text())
			}
			counts[r.Decision]++
			lines++
		}
		// progress: ask; count: deny; calls: allow; two invalid; greet
		// three times, greet Other, clock four times and calls four times:
		// allow (repeats run). 17 calls, 17 lines.
		want := map[string]int{"ask": 1, "deny": 1, "invalid": 2, "allow": 1 + 3 + 1 + 4 + 4}
		for k, v := range want {
			if counts[k] != v {
				t.Errorf("audit decisions %q = %d, want %d (all: %v)", k, counts[k], v, counts)
			}
		}
		if lines != 17 {
			t.Errorf("audit has %d lines for 17 calls", lines)
		}
	})
}

func TestReadOnlyAccess(t *testing.T) {
	e := setupWith(t, "permissions {\n  access = \"read\"\n}\n")
	c := guardedClient(t, e, nil)
	defer c.Close()
	tools, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range tools.Tools {
		names[tl.Name] = true
	}
	for _, w := range []string{"bash__run", "filesystem__write_file", "git__git_commit", "fx__count"} {
		if names[w] {
			t.Errorf("WRITE tool %s is listed in read-only mode", w)
		}
	}
	for _, r := range []string{"filesystem__read_text_file", "git__git_status", "hello__greet"} {
		if !names[r] {
			t.Errorf("READ tool %s is missing in read-only mode", r)
		}
	}
	res, err := callTool(t.Context(), c, "bash__run", map[string]any{"command": "true"}, nil)
	if err == nil && !res.IsError {
		t.Errorf("WRITE tool callable in read-only mode: %q", resultText(res))
	}
}

func TestCLIApproval(t *testing.T) {
	e := setupWith(t, guardConfig)
	_, errOut, code := run(t, e, "call", "--config", e.config, "fx.echo", `{"text":"x"}`)
	if code != 2 || !strings.Contains(errOut, `add "fx.echo" to permissions.allow`) || !strings.Contains(errOut, "--yes") {
		t.Errorf("call needing approval without a terminal = %d %q", code, errOut)
	}
	out, _, code := run(t, e, "call", "--yes", "--config", e.config, "fx.echo", `{"text":"approved"}`)
	if code != 0 || !strings.Contains(out, "approved") {
		t.Errorf("call --yes = %d %q", code, out)
	}
	_, errOut, code = run(t, e, "call", "--yes", "--config", e.config, "fx.count", `{"n":1}`)
	if code != 2 || !strings.Contains(errOut, "denied by rule") {
		t.Errorf("--yes must not override a deny rule: %d %q", code, errOut)
	}
}

// TestCLIPromptOnTerminal runs `call` on a real pseudo-terminal (through
// script(1)) and answers its approval prompt.
func TestCLIPromptOnTerminal(t *testing.T) {
	scriptBin, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script(1) is not installed")
	}
	e := setupWith(t, guardConfig)
	prompt := func(answer, args string) string {
		t.Helper()
		line := fmt.Sprintf("%s call --config %s fx.echo '%s'", e.bins.Switchboard, e.config, args)
		cmd := exec.Command(scriptBin, "-qec", line, "/dev/null")
		cmd.Stdin = strings.NewReader(answer + "\n")
		cmd.Env = append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=off")
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	if out := prompt("y", `{"text":"once"}`); !strings.Contains(out, "fx.echo needs approval") || !strings.Contains(out, "once") {
		t.Errorf("answer y: %q", out)
	}
	if out := prompt("n", `{"text":"refused"}`); !strings.Contains(out, "denied by the user") {
		t.Errorf("answer n: %q", out)
	}
	if out := prompt("a", `{"text":"always"}`); !strings.Contains(out, "always") {
		t.Errorf("answer a: %q", out)
	}
	// Saved: no prompt any more.
	if out := prompt("", `{"text":"saved"}`); strings.Contains(out, "needs approval") || !strings.Contains(out, "saved") {
		t.Errorf("after always: %q", out)
	}
}

// TestDenyRulesHoldUnderDefaultAllow: with `default = "allow"` and a deny
// rule for rm (the example config's), a line whose command name is only
// known when it runs could be rm: it must not run without a person (found
// from outside: `{rm,f}`, `x=rm; $x f` and `$(echo rm) f` deleted f). The
// control: the same computed form of an undenied command still runs under
// that default, so it is the deny rule that holds it back.
func TestDenyRulesHoldUnderDefaultAllow(t *testing.T) {
	e := setup(t)
	cfg := `project_dir = "project"
data_dir    = "state"
start_wait  = "2m"
builtin "bash" {}
permissions {
  default = "allow"
  deny    = ["bash.run:rm", "bash.start:rm", "bash.*:sudo"]
}
`
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(e.project, "victim")
	for _, line := range []string{"{rm,victim}", "x=rm; $x victim", "$(echo rm) victim", "ls; {unlink,victim}"} {
		if err := os.WriteFile(victim, []byte("keep me"), 0o644); err != nil {
			t.Fatal(err)
		}
		args, _ := json.Marshal(map[string]any{"command": line})
		out, errOut, code := run(t, e, "call", "--config", e.config, "bash.run", string(args))
		if _, err := os.Stat(victim); err != nil {
			t.Errorf("%q deleted the file under a deny rule for rm (exit %d): %s %s", line, code, out, errOut)
			continue
		}
		if code == 0 || !strings.Contains(errOut, "bash.run:rm cannot be checked") {
			t.Errorf("%q = %d %q %q, want a refusal naming the deny rule it cannot check", line, code, out, errOut)
		}
	}
	// The control: without deny rules for bash, the same computed form
	// runs under default "allow".
	if err := os.WriteFile(e.config, []byte(strings.Replace(cfg, `deny    = ["bash.run:rm", "bash.start:rm", "bash.*:sudo"]`, `deny = ["git.*"]`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]any{"command": "{touch,made}"})
	if out, errOut, code := run(t, e, "call", "--config", e.config, "bash.run", string(args)); code != 0 {
		t.Fatalf("control: {touch,made} = %d %q %q", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(e.project, "made")); err != nil {
		t.Fatalf("control: the computed touch did not run: %v", err)
	}
}

package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

// trustConfig writes a config (in a folder beside the project, the e2e
// layout) with the filesystem and bash built-ins under sandbox mode
// bashMode and filesystem's read_text_file denied, plus extra.
func trustConfig(t *testing.T, path, bashMode, deny, extra string) {
	t.Helper()
	src := fmt.Sprintf(`
project_dir = "project"
data_dir    = "state"
builtin "filesystem" {
  sandbox { mode = "required" }
}
builtin "bash" {
  sandbox { mode = %q }
}
permissions {
  deny = [%s]
}
%s
`, bashMode, deny, extra)
	// Written the way a tool (or an editor) writes: a new file renamed
	// over the old one.
	if err := os.WriteFile(path+".tmp", []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

func trustSetup(t *testing.T, bashMode string) env {
	t.Helper()
	bins := fixtures.Build(t)
	dir := t.TempDir()
	project := filepath.Join(dir, "project")
	if err := os.Mkdir(project, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "notes.txt"), []byte("line one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := env{bins: bins, config: filepath.Join(dir, "config.hcl"), project: project}
	trustConfig(t, e.config, bashMode, `"filesystem.read_text_file"`, "")
	return e
}

// readAllowed reports whether the running host lets the client read a
// file (false: the call was refused).
func readAllowed(t *testing.T, c *client.Client) bool {
	t.Helper()
	res, err := callTool(t.Context(), c, "filesystem__read_text_file", map[string]any{"path": "notes.txt"}, nil)
	if err != nil {
		return false
	}
	return !res.IsError && strings.Contains(resultText(res), "line one")
}

type statusWithNotices struct {
	PID     int      `json:"pid"`
	Notices []string `json:"notices"`
	Servers []struct {
		Name, Status, Error string
	} `json:"servers"`
}

func statusNotices(t *testing.T, e env) statusWithNotices {
	t.Helper()
	out, errOut, code := run(t, e, "status", "--json", "--config", e.config)
	if code != 0 {
		t.Fatalf("status = %d %s", code, errOut)
	}
	var all []statusWithNotices
	if err := json.Unmarshal([]byte(out), &all); err != nil || len(all) != 1 {
		t.Fatalf("status --json = %q (%v)", out, err)
	}
	return all[0]
}

// TestConfigWatchAppliesWhenOutOfReach: every server that can write files
// is confined by Landlock away from the config, so a saved change is
// applied without a person.
func TestConfigWatchAppliesWhenOutOfReach(t *testing.T) {
	e := trustSetup(t, "required")
	c, _ := mcpClient(t, e)
	initialize(t, c)
	if readAllowed(t, c) {
		t.Fatal("read_text_file is allowed before the change; the config denies it")
	}
	trustConfig(t, e.config, "required", "", "")
	if !eventually(15*time.Second, func() bool { return readAllowed(t, c) }) {
		t.Fatalf("the host did not apply the changed file; status: %+v", statusNotices(t, e))
	}
	if n := statusNotices(t, e).Notices; len(n) > 0 {
		t.Errorf("status notices after an applied change = %q", n)
	}
}

// TestConfigWatchAppliesDuringContinuousEdits: a file written again and
// again (an editor's autosave, a tool's loop) is applied within a bounded
// time, not only once the writes stop: each write used to restart the
// wait.
func TestConfigWatchAppliesDuringContinuousEdits(t *testing.T) {
	e := trustSetup(t, "required")
	c, _ := mcpClient(t, e)
	initialize(t, c)
	if readAllowed(t, c) {
		t.Fatal("read_text_file is allowed before the change; the config denies it")
	}
	trustConfig(t, e.config, "required", "", "")
	changed, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				_ = os.WriteFile(e.config, changed, 0o600)
			}
		}
	}()
	defer func() { close(stop); <-stopped }()
	// Writes every 100 ms for 12 s: the change must be applied while
	// they go on.
	if !eventually(12*time.Second, func() bool { return readAllowed(t, c) }) {
		t.Fatalf("the change was not applied while the file kept being written; status: %+v", statusNotices(t, e))
	}
}

// TestConfigWatchHoldsWhenInReach: bash runs unconfined, so it could have
// written the config: the agent's change (lifting a deny) stays unapplied,
// and status says why, until a person runs `switchboard reload`.
func TestConfigWatchHoldsWhenInReach(t *testing.T) {
	e := trustSetup(t, "off")
	c, _ := mcpClient(t, e)
	initialize(t, c)
	if readAllowed(t, c) {
		t.Fatal("read_text_file is allowed before the change; the config denies it")
	}
	// The attack: a tool rewrites the config to lift the deny.
	trustConfig(t, e.config, "off", "", "")
	var st statusWithNotices
	eventually(15*time.Second, func() bool {
		st = statusNotices(t, e)
		return len(st.Notices) > 0
	})
	want := "config changed on disk; run `switchboard reload` to apply (auto-reload is off because bash runs with sandbox mode \"off\")"
	if len(st.Notices) != 1 || st.Notices[0] != want {
		t.Fatalf("status notices = %q, want [%q]", st.Notices, want)
	}
	if readAllowed(t, c) {
		t.Fatal("the agent's change to the config was applied without a person")
	}
	out, _, _ := run(t, e, "status", "--config", e.config)
	if !strings.Contains(out, "note: "+want) {
		t.Errorf("status text lacks the notice:\n%s", out)
	}
	// A person reloads.
	if out, errOut, code := run(t, e, "reload", "--config", e.config); code != 0 {
		t.Fatalf("reload = %d %s %s", code, out, errOut)
	}
	// The reload restarts the filesystem server to cover the replaced
	// config (Rehide): the call waits for it.
	if !eventually(15*time.Second, func() bool { return readAllowed(t, c) }) {
		t.Error("read_text_file is still denied after `switchboard reload`")
	}
	if n := statusNotices(t, e).Notices; len(n) > 0 {
		t.Errorf("status notices after reload = %q", n)
	}
}

// TestBrokenMCPJSONDoesNotStopTheHost: the project's .mcp.json is a file
// tools may write; written broken (the attack: an agent that wants the
// host down at its next start, or its next reload refused), it is left
// out with a warning, and the host starts, reloads and serves the rest.
func TestBrokenMCPJSONDoesNotStopTheHost(t *testing.T) {
	e := trustSetup(t, "required")
	mcpJSON := filepath.Join(e.project, ".mcp.json")
	if err := os.WriteFile(mcpJSON, []byte(`{"mcpServers": {"half": {"comm`), 0o644); err != nil {
		t.Fatal(err)
	}
	trustConfig(t, e.config, "required", "", "import_mcp_json = true\n")
	out, errOut, code := run(t, e, "validate", "--config", e.config)
	if code != 0 || !strings.Contains(errOut, "warning: Cannot import all of .mcp.json") || !strings.Contains(errOut, "not valid JSON") {
		t.Fatalf("validate = %d\n%s%s; want valid with a warning about .mcp.json", code, out, errOut)
	}
	c, _ := mcpClient(t, e)
	initialize(t, c)
	if got, isErr := mustCall(t, c, "filesystem__list_directory", map[string]any{"path": "."}); isErr || !strings.Contains(got, "notes.txt") {
		t.Fatalf("the host does not serve its built-ins with a broken .mcp.json: %q", got)
	}
	// Broken again while it runs: the reload is applied, with a note.
	if err := os.WriteFile(mcpJSON, []byte(`not json`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = run(t, e, "reload", "--config", e.config)
	if code != 0 || !strings.Contains(out, "note: Cannot import all of .mcp.json") {
		t.Fatalf("reload = %d\n%s%s; want it applied with a note about .mcp.json", code, out, errOut)
	}
}

// TestMCPJSONNeedsApproval: a .mcp.json the agent wrote starts nothing
// until a person approves the entry, and a changed entry waits again.
func TestMCPJSONNeedsApproval(t *testing.T) {
	e := trustSetup(t, "required")
	// Inside the project, where an approved server (sandboxed, best-effort)
	// may write and run: only the approval stands between the agent's
	// entry and the marker.
	markers := filepath.Join(e.project, "markers")
	if err := os.Mkdir(markers, 0o755); err != nil {
		t.Fatal(err)
	}
	server := filepath.Join(e.project, "mcpserver")
	if b, err := os.ReadFile(e.bins.MCPServer); err != nil || os.WriteFile(server, b, 0o755) != nil {
		t.Fatalf("copying the MCP server fixture: %v", err)
	}
	writeMCPJSON := func(marker string) {
		t.Helper()
		entry := map[string]any{"mcpServers": map[string]any{
			"agentsrv": map[string]any{
				"command": "/bin/sh",
				"args":    []string{"-c", fmt.Sprintf("touch %s; exec %s", marker, server)},
			},
		}}
		b, _ := json.Marshal(entry)
		if err := os.WriteFile(filepath.Join(e.project, ".mcp.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	first, second := filepath.Join(markers, "first"), filepath.Join(markers, "second")
	writeMCPJSON(first)
	trustConfig(t, e.config, "required", "", "import_mcp_json = true\n")

	c, _ := mcpClient(t, e)
	initialize(t, c)
	serverState := func() (status, msg string) {
		for _, s := range statusNotices(t, e).Servers {
			if s.Name == "agentsrv" {
				return s.Status, s.Error
			}
		}
		return "", ""
	}
	if st, msg := serverState(); st != "awaiting approval" || msg != "awaiting approval: run `switchboard approve agentsrv`" {
		t.Errorf("agentsrv before approval: %q %q", st, msg)
	}
	if _, err := os.Stat(first); err == nil {
		t.Fatal("the unapproved .mcp.json server ran")
	}

	out, errOut, code := run(t, e, "approve", "--config", e.config, "agentsrv")
	if code != 0 || !strings.Contains(out, "approved agentsrv") || !strings.Contains(out, "command: /bin/sh -c") {
		t.Fatalf("approve = %d %q %q", code, out, errOut)
	}
	waitFor(t, "the approved server to start", func() bool {
		st, _ := serverState()
		_, err := os.Stat(first)
		return st == "ready" && err == nil
	})

	// The agent changes the approved entry: it stops and waits again.
	writeMCPJSON(second)
	if out, errOut, code := run(t, e, "reload", "--config", e.config); code != 0 {
		t.Fatalf("reload = %d %s %s", code, out, errOut)
	}
	if st, msg := serverState(); st != "awaiting approval" || !strings.Contains(msg, "changed since it was approved") {
		t.Errorf("agentsrv after its entry changed: %q %q", st, msg)
	}
	if _, err := os.Stat(second); err == nil {
		t.Error("the changed .mcp.json server ran without approval")
	}
}

// TestMCPJSONApprovedByElicitation: a client that can elicit is asked about
// a pending .mcp.json server after it lists the tools; "keep it stopped"
// leaves it waiting, "start it" approves that entry and starts it.
func TestMCPJSONApprovedByElicitation(t *testing.T) {
	e := trustSetup(t, "required")
	marker := filepath.Join(e.project, "elicited")
	server := filepath.Join(e.project, "mcpserver")
	if b, err := os.ReadFile(e.bins.MCPServer); err != nil || os.WriteFile(server, b, 0o755) != nil {
		t.Fatalf("copying the MCP server fixture: %v", err)
	}
	entry := map[string]any{"mcpServers": map[string]any{"agentsrv": map[string]any{
		"command": "/bin/sh", "args": []string{"-c", fmt.Sprintf("touch %s; exec %s", marker, server)},
	}}}
	b, _ := json.Marshal(entry)
	if err := os.WriteFile(filepath.Join(e.project, ".mcp.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	trustConfig(t, e.config, "required", "", "import_mcp_json = true\n")
	state := func() string {
		for _, s := range statusNotices(t, e).Servers {
			if s.Name == "agentsrv" {
				return s.Status
			}
		}
		return ""
	}

	// A person who says no: asked once, nothing starts.
	no := &elicitor{}
	no.will(KeepStoppedForTest)
	legacy := client.WithLegacyProtocolOnly() //nolint:staticcheck // SA1019: only that era lets a server ask outside a call
	c := guardedClient(t, e, no, legacy)
	if _, err := c.ListTools(t.Context(), mcp.ListToolsRequest{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the person to be asked", func() bool { return no.count() == 1 })
	if st := state(); st != "awaiting approval" {
		t.Errorf("after a no, agentsrv is %q, want awaiting approval", st)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the server ran although the person said no")
	}
	_ = c.Close()

	// A person who says yes: the entry as asked about is approved and runs.
	yes := &elicitor{}
	yes.will(StartServerForTest)
	c = guardedClient(t, e, yes, legacy)
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.ListTools(t.Context(), mcp.ListToolsRequest{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the approved server to start", func() bool {
		_, err := os.Stat(marker)
		return state() == "ready" && err == nil
	})
	if !strings.Contains(strings.Join(yes.asked, "\n"), "/bin/sh") {
		t.Errorf("the question did not show what would run: %q", yes.asked)
	}
}

// TestMCPJSONQuestionShowsNoHostSecret: a cloned repository's .mcp.json
// names ${VAR}s of the host's environment; the question put to the client
// (which is the agent's) showed their values (red team round 18), so a
// client that declined had read them all the same. It now shows the entry
// as written; what runs, once a person approves, has the values.
func TestMCPJSONQuestionShowsNoHostSecret(t *testing.T) {
	e := trustSetup(t, "required")
	const secret = "host-secret-5d1e"
	t.Setenv("SB_HOST_SECRET_FOR_TEST", secret)
	marker := filepath.Join(e.project, "got")
	server := filepath.Join(e.project, "mcpserver")
	if b, err := os.ReadFile(e.bins.MCPServer); err != nil || os.WriteFile(server, b, 0o755) != nil {
		t.Fatalf("copying the MCP server fixture: %v", err)
	}
	entry := map[string]any{"mcpServers": map[string]any{"cloned": map[string]any{
		"command": "/bin/sh",
		"args":    []string{"-c", fmt.Sprintf(`printf %%s "$X" > %s; exec %s # ${SB_HOST_SECRET_FOR_TEST}`, marker, server)},
		"env":     map[string]string{"X": "${SB_HOST_SECRET_FOR_TEST}"},
	}}}
	b, _ := json.Marshal(entry)
	if err := os.WriteFile(filepath.Join(e.project, ".mcp.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	trustConfig(t, e.config, "required", "", "import_mcp_json = true\n")

	el := &elicitor{}
	el.will(StartServerForTest)
	c := guardedClient(t, e, el, client.WithLegacyProtocolOnly()) //nolint:staticcheck // SA1019: only that era lets a server ask outside a call
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.ListTools(t.Context(), mcp.ListToolsRequest{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the approved server to write what it was given", func() bool {
		got, err := os.ReadFile(marker)
		return err == nil && len(got) > 0
	})
	asked := strings.Join(el.asked, "\n")
	if strings.Contains(asked, secret) {
		t.Errorf("the question put to the client shows the host's secret:\n%s", asked)
	}
	if !strings.Contains(asked, `X="${SB_HOST_SECRET_FOR_TEST}"`) || !strings.Contains(asked, "# ${SB_HOST_SECRET_FOR_TEST}") {
		t.Errorf("the question does not show the entry as written:\n%s", asked)
	}
	if got, _ := os.ReadFile(marker); string(got) != secret {
		t.Errorf("the approved server got X=%q, want the host's value %q", got, secret)
	}
}

// TestFailedServersErrorsShowNoHostSecret: an approved .mcp.json server
// whose URL or command took a value from the host's environment, and a
// config block whose URL did (env()), fail; their errors reach the
// switchboard server's servers tool, which the client reads (red team
// rounds 19 and 20: it printed the tokens). They show the entry as
// written, env("NAME") as written, and the URL without its query.
func TestFailedServersErrorsShowNoHostSecret(t *testing.T) {
	e := trustSetup(t, "required")
	const secret = "tok-9c2f-secret"
	t.Setenv("SB_HOST_SECRET_FOR_TEST2", secret)
	entry := map[string]any{"mcpServers": map[string]any{
		"remote": map[string]any{"type": "http", "url": "http://127.0.0.1:9/mcp?token=${SB_HOST_SECRET_FOR_TEST2}"},
		"cmd":    map[string]any{"command": "${SB_HOST_SECRET_FOR_TEST2}"},
	}}
	b, _ := json.Marshal(entry)
	if err := os.WriteFile(filepath.Join(e.project, ".mcp.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	trustConfig(t, e.config, "required", "", "import_mcp_json = true\n"+`external "cfgsrv" {
  url = "http://127.0.0.1:9/x?key=${env("SB_HOST_SECRET_FOR_TEST2")}"
}
external "cfgpath" {
  url = "http://127.0.0.1:9/${env("SB_HOST_SECRET_FOR_TEST2")}/mcp"
}
`)
	for _, name := range []string{"remote", "cmd"} {
		if out, errOut, code := run(t, e, "approve", "--config", e.config, name); code != 0 {
			t.Fatalf("approve %s = %d %q %q", name, code, out, errOut)
		}
	}
	c, _ := mcpClient(t, e)
	initialize(t, c)
	var got string
	waitFor(t, "the three servers' errors", func() bool {
		got, _ = mustCall(t, c, "switchboard__servers", map[string]any{})
		return strings.Count(got, "127.0.0.1:9") >= 3 && strings.Contains(got, "${SB_HOST_SECRET_FOR_TEST2}") && strings.Contains(got, `${env(\"SB_HOST_SECRET_FOR_TEST2\")}`) // as JSON writes it
	})
	if strings.Contains(got, secret) {
		t.Errorf("switchboard__servers shows the host's secret:\n%s", got)
	}
}

// The answers, as the front end names them.
const (
	StartServerForTest = "start"
	KeepStoppedForTest = "keep_stopped"
)

// TestAnotherHostsServersHoldTheReload: host B keeps its config in the
// project (a folder of its own bound read-only to its servers), so it
// applies changes to it without a person; host A, on the same project
// with another config, runs bash, which may write the project: A's agent
// rewrote B's config and B applied it by itself (red team round 5). B now
// knows from A's record that A's servers may write its config, holds the
// change, and says why; a person's reload applies it. Since round 11, A's
// sandboxes hide B's config (B's record names it), so A's bash no longer
// reaches it; the test checks that, then makes the change itself, as A's
// agent could have before A's sandboxes covered the file (a host started
// later is covered within seconds, not at once), and checks that B holds
// it.
func TestAnotherHostsServersHoldTheReload(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stopping  bool
		otherHome bool
	}{{"while it runs", false, false}, {"as it stops", true, false}, {"other HOME", false, true}} {
		t.Run(tc.name, func(t *testing.T) { anotherHostWrites(t, tc.stopping, tc.otherHome) })
	}
}

// anotherHostWrites is TestAnotherHostsServersHoldTheReload's attack, made
// while host A runs or by a job of A's as A stops.
// otherHome runs A with another HOME, whose state folder B does not read
// (red team round 8).
func anotherHostWrites(t *testing.T, stopping, otherHome bool) {
	b := trustSetup(t, "required")
	b.config = filepath.Join(b.project, ".sb", "config.hcl")
	if err := os.Mkdir(filepath.Dir(b.config), 0o700); err != nil {
		t.Fatal(err)
	}
	stateB := filepath.Join(t.TempDir(), "stateB")
	writeB := func(deny string) string {
		return fmt.Sprintf("project_dir = \"..\"\ndata_dir = %q\nbuiltin \"filesystem\" {}\npermissions {\n  deny = [%s]\n}\n", stateB, deny)
	}
	if err := os.WriteFile(b.config, []byte(writeB(`"filesystem.read_text_file"`)), 0o600); err != nil {
		t.Fatal(err)
	}
	cb, _ := mcpClient(t, b)
	initialize(t, cb)
	if readAllowed(t, cb) {
		t.Fatal("B allows read_text_file before the change; its config denies it")
	}
	if n := statusNotices(t, b).Notices; len(n) > 0 {
		t.Fatalf("B's notices before host A runs: %q", n)
	}

	a := b
	a.config = filepath.Join(t.TempDir(), "a.hcl")
	srcA := fmt.Sprintf("project_dir = %q\ndata_dir = %q\nstart_wait = \"2m\"\nbuiltin \"bash\" {}\npermissions { default = \"allow\" }\n", b.project, filepath.Join(t.TempDir(), "stateA"))
	if err := os.WriteFile(a.config, []byte(srcA), 0o600); err != nil {
		t.Fatal(err)
	}
	var tweaks []func(*exec.Cmd)
	if otherHome {
		home := t.TempDir()
		tweaks = append(tweaks, func(cmd *exec.Cmd) { cmd.Env = append(cmd.Env, "HOME="+home, "XDG_STATE_HOME=") })
	}
	ca, cmdA := mcpClient(t, a, tweaks...)
	initialize(t, ca)
	cfgText := writeB("")
	// A's bash cannot reach B's config: A's sandbox hides it.
	out, _ := mustCall(t, ca, "bash__run", map[string]any{"command": fmt.Sprintf("printf '%s' > .sb/config.hcl.tmp && mv .sb/config.hcl.tmp .sb/config.hcl && echo END; cat .sb/config.hcl", strings.ReplaceAll(cfgText, "\n", `\n`))})
	if strings.Contains(out, "END") || strings.Contains(out, "project_dir") {
		t.Fatalf("A's bash reached B's config: %q", out)
	}
	// The change as A's agent could have made it before A's sandboxes
	// covered the file: replaced, as an editor would, while A runs, or
	// (a job's SIGTERM trap, red team round 6) as A stops, so that A's
	// record is gone by the time B's watcher looks.
	if stopping {
		_ = ca.Close()
		_ = cmdA.Wait()
	}
	if err := os.WriteFile(b.config+".tmp", []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(b.config+".tmp", b.config); err != nil {
		t.Fatal(err)
	}
	var st statusWithNotices
	eventually(15*time.Second, func() bool {
		st = statusNotices(t, b)
		return len(st.Notices) > 0
	})
	if len(st.Notices) != 1 || !strings.Contains(st.Notices[0], "another host on this machine") {
		t.Fatalf("B's notices = %q, want the change held because another host's servers may write it", st.Notices)
	}
	if readAllowed(t, cb) {
		t.Fatal("B applied a config another host's agent wrote, without a person")
	}
	if o, errOut, code := run(t, b, "reload", "--config", b.config); code != 0 {
		t.Fatalf("reload = %d %s %s", code, o, errOut)
	}
	if !eventually(10*time.Second, func() bool { return readAllowed(t, cb) }) {
		t.Error("control: read_text_file is still denied after the person's `switchboard reload`")
	}
}

// TestUnseenChangeIsHeldLater: a server of host A rewrote host B's config
// through mmap, which makes no file event, so B saw nothing; once A had
// stopped, any later write event made B apply the agent's config by itself
// (red team round 7). B now checks every few seconds whether a server could
// write its config and holds every change until a person reloads. Since
// round 11 A's sandboxes hide B's config, so A's bash no longer reaches it;
// the test checks that, then makes the rewrite itself, as A's agent could
// have before A's sandboxes covered the file.
func TestUnseenChangeIsHeldLater(t *testing.T) {
	// The system's, which the sandbox shows (not a shim in a home folder).
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("no /usr/bin/python3 here to write through mmap")
	}
	b := trustSetup(t, "required")
	b.config = filepath.Join(b.project, ".sb", "config.hcl")
	if err := os.Mkdir(filepath.Dir(b.config), 0o700); err != nil {
		t.Fatal(err)
	}
	stateB := filepath.Join(t.TempDir(), "stateB")
	cfgB := func(deny string) []byte {
		// The same length either way, for a rewrite in place.
		return []byte(fmt.Sprintf("project_dir = \"..\"\ndata_dir = %q\nbuiltin \"filesystem\" {}\npermissions {\n  deny = [%-30s]\n}\n", stateB, deny))
	}
	if err := os.WriteFile(b.config, cfgB(`"filesystem.read_text_file"`), 0o600); err != nil {
		t.Fatal(err)
	}
	cb, _ := mcpClient(t, b)
	initialize(t, cb)

	a := b
	a.config = filepath.Join(t.TempDir(), "a.hcl")
	srcA := fmt.Sprintf("project_dir = %q\ndata_dir = %q\nstart_wait = \"2m\"\nbuiltin \"bash\" {}\npermissions { default = \"allow\" }\n", b.project, filepath.Join(t.TempDir(), "stateA"))
	if err := os.WriteFile(a.config, []byte(srcA), 0o600); err != nil {
		t.Fatal(err)
	}
	ca, cmdA := mcpClient(t, a)
	initialize(t, ca)
	time.Sleep(3 * time.Second) // B's watcher has looked at who may write its file
	script := fmt.Sprintf("import mmap,os,base64\nfd=os.open('.sb/config.hcl',os.O_RDWR)\nm=mmap.mmap(fd,0)\nm[:]=base64.b64decode('%s')\nm.flush()\nprint('END')\n", base64.StdEncoding.EncodeToString(cfgB("")))
	out, _ := mustCall(t, ca, "bash__run", map[string]any{"command": "echo " + base64.StdEncoding.EncodeToString([]byte(script)) + " | base64 -d | " + python + " -"})
	if strings.Contains(out, "END") {
		t.Fatalf("A's bash rewrote B's config through mmap: %q", out)
	}
	// The rewrite as A's agent could have made it before its sandbox
	// covered the file.
	cmd := exec.Command(python, "-")
	cmd.Dir = b.project
	cmd.Stdin = strings.NewReader(script)
	if got, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(got), "END") {
		t.Fatalf("the mmap rewrite: %v %s", err, got)
	}
	_ = ca.Close()
	_ = cmdA.Wait()
	time.Sleep(12 * time.Second) // A's record is gone
	// An ordinary write of the same bytes (a sync tool, a checkout).
	now, _ := os.ReadFile(b.config)
	if err := os.WriteFile(b.config, now, 0o600); err != nil {
		t.Fatal(err)
	}
	var st statusWithNotices
	eventually(15*time.Second, func() bool {
		st = statusNotices(t, b)
		return len(st.Notices) > 0 || readAllowed(t, cb)
	})
	if readAllowed(t, cb) {
		t.Fatal("B applied, by itself, a config another host's server wrote unseen")
	}
	if len(st.Notices) != 1 || !strings.Contains(st.Notices[0], "another host on this machine") {
		t.Errorf("B's notices = %q, want the change held naming the other host", st.Notices)
	}
}

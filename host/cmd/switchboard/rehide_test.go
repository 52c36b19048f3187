package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

// TestReplacedConfigStaysHidden: an editor's save replaces config.hcl with
// a new file, which the mounts of running sandboxes do not cover; the host
// notices and restarts the confined servers, so bash cannot read (or
// write) the new config.
func TestReplacedConfigStaysHidden(t *testing.T) {
	e := setup(t)
	// The default layout: the config inside the project, where bash may
	// read and write.
	e.config = filepath.Join(e.project, "config.hcl")
	cfg := fmt.Sprintf("project_dir = \".\"\ndata_dir = %q\nbuiltin \"bash\" {}\n", filepath.Join(t.TempDir(), "state"))
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := mcpClient(t, e)
	initialize(t, c)
	cat := func() string {
		res, err := callTool(t.Context(), c, "bash__run", map[string]any{"command": "cat config.hcl; echo END"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return resultText(res)
	}
	if out := cat(); strings.Contains(out, "builtin") {
		t.Fatalf("the config is visible to bash before any change: %q", out)
	}
	before := pids(status(t, e))["bash"]
	b, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	saveAsEditor(t, e.config, append(b, []byte("# saved by an editor\n")...))
	waitRestarted(t, e, "bash", before)
	var out string
	eventually(20*time.Second, func() bool {
		out = cat()
		return strings.Contains(out, "END")
	})
	if strings.Contains(out, "saved by an editor") || strings.Contains(out, "builtin") {
		t.Errorf("after the save bash reads the new config: %q", out)
	}
}

// TestNothingOutlivesAKilledHost: processes a tool starts in their own
// session (setsid -f, a double fork) die with the host, even when the host
// is SIGKILLed: bash's sandbox init gets a parent-death signal and its PID
// namespace dies with it. The count: zero.
func TestNothingOutlivesAKilledHost(t *testing.T) {
	e := setup(t)
	c, cmd := mcpClient(t, e)
	initialize(t, c)
	marker := strconv.Itoa(8000000 + os.Getpid()%999983)
	// From a background job that keeps running: escapees of a finished
	// call are ended at once (TestNothingOutlivesItsCall), those of a
	// running job wait for it, and the host dies first here.
	line := "setsid -f sleep " + marker + " >/dev/null 2>&1 </dev/null; (sleep " + marker + ".5 >/dev/null 2>&1 </dev/null &); echo started; sleep 600"
	res, err := callTool(t.Context(), c, "bash__start", map[string]any{"command": line}, nil)
	if err != nil || res.IsError {
		t.Fatalf("bash__start = %q, %v", resultText(res), err)
	}
	var escapees []int
	eventually(10*time.Second, func() bool {
		escapees = fixtures.ProcessesMatching("sleep " + marker)
		return len(escapees) >= 2
	})
	t.Cleanup(func() { fixtures.Kill(escapees) })
	if len(escapees) == 0 {
		t.Fatal("no escapee running: the test would prove nothing")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if alive := fixtures.WaitGone(escapees, 10*time.Second); len(alive) > 0 {
		t.Errorf("%d processes started with setsid / a double fork outlived the SIGKILLed host: %v", len(alive), alive)
	}
}

// TestReplacedLockStaysReadOnly: `switchboard plugin lock` replaces the lock
// file while a host runs; the mounts of running sandboxes covered the old
// file only, so the host restarts the confined servers and bash still
// cannot change the lock the host reads (found from outside: a tool could
// then pin the surface a quarantine would hold back).
func TestReplacedLockStaysReadOnly(t *testing.T) {
	e := setup(t)
	e.config = filepath.Join(e.project, "config.hcl")
	cfg := fmt.Sprintf("project_dir = \".\"\ndata_dir = %q\nbuiltin \"bash\" {}\npermissions { default = \"allow\" }\n", filepath.Join(t.TempDir(), "state"))
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(e.project, "switchboard.lock.hcl")
	c, _ := mcpClient(t, e)
	initialize(t, c)
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("the host made no lock file beside a config bash may write: %v", err)
	}
	before := pids(status(t, e))["bash"]
	// What `switchboard plugin lock` does: write a new file, rename it over.
	saveAsEditor(t, lock, []byte("# locked by a person\n"))
	waitRestarted(t, e, "bash", before)
	// Encoded, so bash's own pattern guard does not stop it first.
	script := "echo x > other.hcl && echo WROTE; echo 'plugin \"x\" { surface = \"sha256:0000\" }' >> switchboard.lock.hcl; echo END"
	var out string
	eventually(20*time.Second, func() bool {
		res, err := callTool(t.Context(), c, "bash__run", map[string]any{"command": "echo " + base64.StdEncoding.EncodeToString([]byte(script)) + " | base64 -d | sh"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		out = resultText(res)
		return strings.Contains(out, "END")
	})
	if !strings.Contains(out, "WROTE") {
		t.Fatalf("the control write did not run, so the test proves nothing: %q", out)
	}
	if b, _ := os.ReadFile(lock); strings.Contains(string(b), "sha256:0000") || !strings.Contains(string(b), "locked by a person") {
		t.Errorf("after the replacement bash changed the lock file:\n%s", b)
	}
}

// TestConfigFolderIsReadOnly: a config in a subfolder of the project
// (.sb/config.hcl) has its whole folder bound read-only in the sandbox, so
// a command waiting for a person's save (a new file renamed over the old,
// which the cover of the old file does not reach) cannot write it before
// the host restarts the server (found from outside: the agent's lines were
// in the config the next reload applied).
func TestConfigFolderIsReadOnly(t *testing.T) {
	e := setup(t)
	sb := filepath.Join(e.project, ".sb")
	if err := os.Mkdir(sb, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(e.project, "other"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.config = filepath.Join(sb, "config.hcl")
	cfg := fmt.Sprintf("project_dir = \"..\"\ndata_dir = %q\nwatch_config = false\nbuiltin \"bash\" {}\npermissions { default = \"allow\" }\n", filepath.Join(t.TempDir(), "state"))
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// The agent's command: say it is waiting, wait for the save, then
	// append to the new config and (the control) write a sibling folder.
	script := `touch waiting; while [ ! -f saved ]; do sleep 0.05; done; ` +
		`printf '\nbuiltin "web" {}\n' >> .sb/config.hcl && echo APPENDED; ` +
		`echo x > .sb/planted && echo PLANTED; echo x > other/file && echo CONTROL-WROTE`
	args, _ := json.Marshal(map[string]any{"command": "echo " + base64.StdEncoding.EncodeToString([]byte(script)) + " | base64 -d | sh", "timeout_ms": 60000})
	done := make(chan string, 1)
	go func() {
		out, errOut, _ := run(t, e, "call", "--config", e.config, "bash.run", string(args))
		done <- out + errOut
	}()
	if !eventually(60*time.Second, func() bool { _, err := os.Stat(filepath.Join(e.project, "waiting")); return err == nil }) {
		t.Fatal("the command never started")
	}
	// A person's save: a new file renamed over the config.
	if err := os.WriteFile(e.config+".new", []byte(cfg+"# saved by a person\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(e.config+".new", e.config); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.project, "saved"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := <-done
	if !strings.Contains(out, "CONTROL-WROTE") {
		t.Fatalf("the control write did not run, so the test proves nothing: %s", out)
	}
	got := mustRead(t, e.config)
	if strings.Contains(got, `builtin "web"`) || strings.Contains(out, "APPENDED") {
		t.Errorf("the command wrote the saved config:\n%s\n%s", got, out)
	}
	if _, err := os.Stat(filepath.Join(sb, "planted")); err == nil || strings.Contains(out, "PLANTED") {
		t.Errorf("the command created a file in the config's folder: %s", out)
	}
}

// TestPlantedPluginBinaryNeverRuns: a plugin block names a binary in the
// project that is not there (not installed yet, or removed) and not
// pinned. The agent writes a program there with bash and a restart is
// asked for, as restart_server would: the program must not run as that
// plugin. The control is a second plugin whose missing binary lies outside
// every folder a server may write: the same program, put there by a
// person, runs on the same restart (so the first one was refused, not
// merely broken).
func TestPlantedPluginBinaryNeverRuns(t *testing.T) {
	e := setup(t)
	dir := filepath.Dir(e.config)
	outside := filepath.Join(t.TempDir(), "switchboard-plugin-outside")
	cfg := fmt.Sprintf(`project_dir = "project"
data_dir    = "state"
start_wait  = "2m"
builtin "bash" {}
plugin "planted" { path = "project/tools/switchboard-plugin-planted" }
plugin "outside" { path = %q }
`, outside)
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := mcpClient(t, e)
	initialize(t, c)
	// The program leaves a mark in its plugin's state folder (which its
	// sandbox may write) when it runs.
	script := func(name string) string {
		return "#!/bin/sh\necho ran > " + filepath.Join(dir, "state", "plugins", name, "ran") + "\nsleep 1\n"
	}
	// (Written under another name and moved: bash's own check refuses a
	// redirection to the protected path, which the agent steps around.)
	line := "mkdir -p tools && printf '" + strings.ReplaceAll(script("planted"), "\n", `\n`) + "' > p && chmod +x p && cd tools && mv ../p switchboard-plugin-planted && echo PLANTED"
	res, err := callTool(t.Context(), c, "bash__run", map[string]any{"command": line}, nil)
	if err != nil || !strings.Contains(resultText(res), "PLANTED") {
		t.Fatalf("bash could not write the program: %v %s", err, resultText(res))
	}
	if _, err := os.Stat(filepath.Join(e.project, "tools", "switchboard-plugin-planted")); err != nil {
		t.Fatalf("the planted program is not there: %v", err)
	}
	if err := os.WriteFile(outside, []byte(script("outside")), 0o755); err != nil {
		t.Fatal(err)
	}
	// The restart of planted is refused, saying why; outside's runs.
	if out, errOut, code := run(t, e, "restart", "planted", "--config", e.config); code == 0 || !strings.Contains(errOut, "a tool could put a program there") {
		t.Errorf("restart planted = %d %q %q, want a refusal that says why", code, out, errOut)
	}
	if out, errOut, code := run(t, e, "restart", "outside", "--config", e.config); code != 0 {
		t.Fatalf("restart outside = %d %s %s", code, out, errOut)
	}
	ran := func(name string) bool {
		_, err := os.Stat(filepath.Join(dir, "state", "plugins", name, "ran"))
		return err == nil
	}
	if !eventually(30*time.Second, func() bool { return ran("outside") }) {
		t.Fatal("control: the program outside the project did not run on restart")
	}
	if ran("planted") {
		t.Fatal("the program bash planted in the project ran as plugin planted")
	}
	out, _, _ := run(t, e, "status", "--config", e.config)
	if !strings.Contains(out, "a tool could put a program there") {
		t.Errorf("status does not say why planted is refused:\n%s", out)
	}
}

// TestPluginLinksAndVersionFoldersInProject: two ways the red team ran
// its own program as a plugin from a project bash may write. (1) The
// block names a symbolic link in the project (the sandbox binds the file
// it names read-only, not the link): such an unpinned plugin is refused,
// saying why, and bash re-pointing the link runs nothing. (2) The block
// names a folder of versions in the project: the folder is bound
// read-only, so bash cannot add a newer version. Controls: bash can write
// next to both (the project is writable), and the same plugin named by
// its real file outside the project runs.
func TestPluginLinksAndVersionFoldersInProject(t *testing.T) {
	e := setup(t)
	dir := filepath.Dir(e.config)
	if err := os.MkdirAll(filepath.Join(e.project, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e.bins.Hello, filepath.Join(e.project, "bin", "linked")); err != nil {
		t.Fatal(err)
	}
	versions := filepath.Join(e.project, "pl")
	if err := os.MkdirAll(versions, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(e.bins.Hello)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(versions, "switchboard-plugin-versioned_v1.0.0"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`project_dir = "project"
data_dir    = "state"
start_wait  = "2m"
builtin "bash" {}
plugin "linked" { path = "project/bin/linked" }
plugin "versioned" { path = "project/pl" }
plugin "direct" { path = %q }
`, e.bins.Hello)
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := mcpClient(t, e)
	initialize(t, c)
	bash := func(line string) string {
		res, err := callTool(t.Context(), c, "bash__run", map[string]any{"command": line}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return resultText(res)
	}
	script := "#!/bin/sh\necho ran > " + filepath.Join(dir, "state", "plugins", "linked", "ran") + "\n"
	bash("printf '" + strings.ReplaceAll(script, "\n", `\n`) + "' > evil && chmod +x evil && cd bin && ln -sfn ../evil linked && echo RELINKED")
	bash("cd pl && cp ../evil switchboard-plugin-versioned_v9.9.9; echo done")
	bash("echo beside > pl-beside && echo beside > bin/beside")
	if out, _, _ := run(t, e, "restart", "linked", "--config", e.config); strings.Contains(out, "restarting linked") {
		t.Errorf("restart linked = %q, want a refusal", out)
	}
	out, _, _ := run(t, e, "status", "--config", e.config)
	if !strings.Contains(out, "is reached through the symbolic link") {
		t.Errorf("status does not say why linked is refused:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "state", "plugins", "linked", "ran")); err == nil {
		t.Error("the program bash linked in ran as plugin linked")
	}
	if _, err := os.Stat(filepath.Join(versions, "switchboard-plugin-versioned_v9.9.9")); err == nil {
		t.Error("bash added a version to a plugin's versions folder")
	}
	for _, f := range []string{"pl-beside", "bin/beside"} {
		if _, err := os.Stat(filepath.Join(e.project, f)); err != nil {
			t.Errorf("control: bash could not write %s beside them: %v", f, err)
		}
	}
	if got := callOK(t, c, "direct__greet", map[string]any{"name": "x"}); !strings.Contains(got, "x") {
		t.Errorf("control: the plugin by its real file = %q", got)
	}
	if got := callOK(t, c, "versioned__greet", map[string]any{"name": "v"}); !strings.Contains(got, "v") {
		t.Errorf("the versioned plugin = %q", got)
	}
}

// TestMCPJSONCannotBeCreated: with import_mcp_json on and no .mcp.json in
// the project, bash created one under a computed name (the red team's
// `> $(echo .mcp).json`), which offered its own server at the next start.
// The host now makes an empty one first, which every sandbox covers. The
// control: the same write to another name in the project succeeds.
func TestMCPJSONCannotBeCreated(t *testing.T) {
	e := setup(t)
	cfg := `project_dir = "project"
data_dir    = "state"
start_wait  = "2m"
import_mcp_json = true
builtin "bash" {}
`
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := mcpClient(t, e)
	initialize(t, c)
	evil := `{"mcpServers":{"evil":{"command":"/bin/sh","args":["-c","id"]}}}`
	for _, name := range []string{".mcp", "other"} {
		line := "printf '%s' '" + evil + "' > $(echo " + name + ").json; echo wrote"
		if _, err := callTool(t.Context(), c, "bash__run", map[string]any{"command": line}, nil); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(filepath.Join(e.project, ".mcp.json"))
	if err != nil {
		t.Fatalf("no .mcp.json: %v", err)
	}
	if strings.Contains(string(got), "evil") {
		t.Fatalf("bash wrote .mcp.json: %s", got)
	}
	if other, err := os.ReadFile(filepath.Join(e.project, "other.json")); err != nil || !strings.Contains(string(other), "evil") {
		t.Fatalf("control: the same write to other.json did not happen: %v %q", err, other)
	}
}

// TestNothingOutlivesItsCall: a process a command started in its own
// session (setsid -f) or through a double fork is ended once the call that
// started it has returned (found from outside: a setsid'd loop kept
// running until the bash server stopped). The control: with bash's
// sandbox off there is no PID namespace of its own to clean, and the
// escapee outlives the call.
func TestNothingOutlivesItsCall(t *testing.T) {
	for _, tc := range []struct {
		name, block string
		survives    bool
	}{
		{"confined", `builtin "bash" {}`, false},
		{"sandbox off", `builtin "bash" {
  sandbox { mode = "off" }
}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			cfg := "project_dir = \"project\"\ndata_dir = \"state\"\nstart_wait = \"2m\"\n" + tc.block + "\n"
			if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			c, _ := mcpClient(t, e)
			initialize(t, c)
			marker := strconv.Itoa(7000000 + os.Getpid()%999983)
			line := "setsid -f sleep " + marker + " >/dev/null 2>&1 </dev/null; (sleep " + marker + ".5 >/dev/null 2>&1 </dev/null &); echo started"
			res, err := callTool(t.Context(), c, "bash__run", map[string]any{"command": line}, nil)
			if err != nil || !strings.Contains(resultText(res), "started") {
				t.Fatalf("run = %v %q", err, resultText(res))
			}
			count := func() []int { return fixtures.ProcessesMatching("sleep " + marker) }
			t.Cleanup(func() { fixtures.Kill(count()) })
			alive := fixtures.WaitGone(count(), 5*time.Second)
			switch {
			case !tc.survives && len(alive) > 0:
				t.Errorf("%d processes outlived the call that started them: %v", len(alive), alive)
			case tc.survives && len(alive) == 0:
				t.Error("control: with the sandbox off no escapee outlived the call, so the test proves nothing")
			}
		})
	}
}

// TestApprovedMCPJSONScriptIsCovered: a .mcp.json server whose command is
// a script in the project is approved with the script's content, and the
// script is bound read-only in every sandbox: bash cannot edit the
// approved server into another (found from outside: it could, and the
// edited script ran at every start). An edit made outside the host
// (no sandbox to stop it) makes the server wait for approval again. The
// control: bash writes a file beside the script.
func TestApprovedMCPJSONScriptIsCovered(t *testing.T) {
	e := setup(t)
	script := filepath.Join(e.project, "srv.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.project, ".mcp.json"), []byte(`{"mcpServers":{"scripted":{"command":"./srv.sh"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := "project_dir = \"project\"\ndata_dir = \"state\"\nstart_wait = \"2m\"\nimport_mcp_json = true\nbuiltin \"bash\" {}\n"
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := run(t, e, "approve", "scripted", "--config", e.config); code != 0 {
		t.Fatalf("approve = %d %q %q", code, out, errOut)
	} else if !strings.Contains(out, "what it loads from the project") {
		// Only the named files are covered (red team: a module the
		// approved script imported was edited, and ran unapproved).
		t.Errorf("approve does not say that what the script loads from the project is not covered:\n%s", out)
	}
	c, _ := mcpClient(t, e)
	initialize(t, c)
	// Under a computed name, as the red team did (bash's own check refuses
	// a plain redirection to the protected path).
	for _, line := range []string{"f=srv; echo 'touch /tmp/x' >> $f.sh; echo done", "echo 'x' >> beside.sh; echo done"} {
		if _, err := callTool(t.Context(), c, "bash__run", map[string]any{"command": line}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := os.ReadFile(script); strings.Contains(string(b), "touch") {
		t.Fatalf("bash edited the approved server's script: %q", b)
	}
	if _, err := os.Stat(filepath.Join(e.project, "beside.sh")); err != nil {
		t.Fatalf("control: bash could not write beside the script: %v", err)
	}
	_ = c.Close()
	// Edited outside any sandbox: approved no longer.
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho changed\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, _, _ := run(t, e, "inspect", "--config", e.config)
	if !strings.Contains(out, "changed since it was approved") {
		t.Errorf("inspect after the script changed does not say it awaits approval again:\n%s", out)
	}
}

// TestHardLinkedConfigStaysHidden: a command waiting for a person's save
// can hard-link the new config file before the host restarts the
// sandboxes (the file is not covered until then); the link is the live
// config under a name nothing covered, and every server could read it
// afterwards (found from outside). The restarted sandboxes cover the
// config's other names too. The test makes the link itself, at the moment
// such a command would.
func TestHardLinkedConfigStaysHidden(t *testing.T) {
	e := setup(t)
	e.config = filepath.Join(e.project, "config.hcl")
	cfg := fmt.Sprintf("project_dir = \".\"\ndata_dir = %q\nbuiltin \"bash\" {}\nbuiltin \"filesystem\" {}\npermissions { default = \"allow\" }\n# LINKED-SECRET\n", filepath.Join(t.TempDir(), "state"))
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := mcpClient(t, e)
	initialize(t, c)
	link := filepath.Join(e.project, "sub", ".cfgcopy")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	before := pids(status(t, e))["bash"]
	// The save, and the link made in the window before the restart.
	saveAsEditor(t, e.config, []byte(cfg+"# saved by an editor\n"))
	if err := os.Link(e.config, link); err != nil {
		t.Fatal(err)
	}
	waitRestarted(t, e, "bash", before)
	var out string
	eventually(20*time.Second, func() bool {
		res, err := callTool(t.Context(), c, "bash__run", map[string]any{"command": "cat sub/.cfgcopy; echo END"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		out = resultText(res)
		return strings.Contains(out, "END")
	})
	if strings.Contains(out, "LINKED-SECRET") {
		t.Errorf("bash reads the live config through a hard link: %q", out)
	}
	res, err := callTool(t.Context(), c, "filesystem__read_text_file", map[string]any{"path": "sub/.cfgcopy"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(res); strings.Contains(got, "LINKED-SECRET") {
		t.Errorf("read_text_file reads the live config through a hard link: %q", got)
	}
	res, err = callTool(t.Context(), c, "filesystem__grep", map[string]any{"pattern": "LINKED-SECRET", "path": "."}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(res); strings.Contains(got, ".cfgcopy") {
		t.Errorf("grep finds the config's text through a hard link: %q", got)
	}
}

// saveAsEditor replaces path with a new file holding content, as an
// editor's save (and `switchboard plugin lock`) does: write a temporary
// file, rename it over.
func saveAsEditor(t *testing.T, path string, content []byte) {
	t.Helper()
	if err := os.WriteFile(path+".new", content, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// waitRestarted waits for the host to restart server, whose process was
// before, after a file a sandbox covers was replaced.
func waitRestarted(t *testing.T, e env, server string, before int) {
	t.Helper()
	if !eventually(20*time.Second, func() bool {
		now := pids(status(t, e))[server]
		return now != before && now != 0
	}) {
		t.Fatalf("%s was not restarted after a file its sandbox covers was replaced", server)
	}
}

// TestOtherHostsStateIsHidden: every config's default data_dir is a folder
// of $XDG_STATE_HOME/switchboard, and an external server may write the XDG
// state folder (its package runners keep state there). Through that grant a
// server of one host rewrote another host's permissions.json, and that
// host then ran bash without asking (red team). The whole switchboard state
// folder is hidden in every sandbox; the rest of the grant still works, and
// so does this host's own state (its data_dir is in the hidden folder too).
func TestOtherHostsStateIsHidden(t *testing.T) {
	e := setup(t)
	stateHome := filepath.Join(t.TempDir(), "xdg-state")
	other := filepath.Join(stateHome, "switchboard", "0123456789ab") // another config's default data_dir
	if err := os.MkdirAll(other, 0o700); err != nil {
		t.Fatal(err)
	}
	perms := filepath.Join(other, "permissions.json")
	const saved = `{"version":1,"allow":[],"deny":null}`
	if err := os.WriteFile(perms, []byte(saved), 0o600); err != nil {
		t.Fatal(err)
	}
	// No data_dir: this host's is the default, under the same folder. Bash
	// is granted the state folder as an external server is.
	cfg := fmt.Sprintf("project_dir = \"project\"\nstart_wait = \"2m\"\nbuiltin \"bash\" {\n  sandbox {\n    write = [%q]\n  }\n}\n", stateHome)
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := mcpClient(t, e, func(cmd *exec.Cmd) { cmd.Env = append(cmd.Env, "XDG_STATE_HOME="+stateHome) })
	initialize(t, c)
	grant := `{"version":1,"allow":["bash.*"],"deny":null}`
	res, err := callTool(t.Context(), c, "bash__run", map[string]any{"command": fmt.Sprintf(
		"f=%s; printf '%%s' '%s' > $f.tmp && mv $f.tmp $f; cat %s; mkdir -p %s && echo kept > %s; echo END",
		perms, grant, perms, filepath.Join(stateHome, "other-app"), filepath.Join(stateHome, "other-app", "file"))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := resultText(res)
	if !strings.Contains(out, "END") {
		t.Fatalf("the command did not run: %q", out)
	}
	if b, _ := os.ReadFile(perms); string(b) != saved {
		t.Errorf("bash rewrote another host's permissions.json through its state grant: %q (command said %q)", b, out)
	}
	if strings.Contains(out, `"allow"`) {
		t.Errorf("bash read another host's permissions.json: %q", out)
	}
	if b, err := os.ReadFile(filepath.Join(stateHome, "other-app", "file")); err != nil || string(b) != "kept\n" {
		t.Errorf("control: the rest of the state folder is not writable through the grant (%q, %v); command said %q", b, err, out)
	}
}

// TestPlantedHelperNeverRuns: the sandbox helper runs before any sandbox
// exists, as the host's user. A host whose folder a server may write (a
// project's bin/) and that had no switchboard-sandbox beside it ran the
// one a bash command wrote there at the next start, unconfined (red team).
// The host runs the file beside it only when it hashes to the helper this
// build pins, and else its own binary (`switchboard sandbox-exec`). The
// control: the genuine helper copied there is used.
func TestPlantedHelperNeverRuns(t *testing.T) {
	e := setup(t)
	binDir := filepath.Join(e.project, "bin")
	if err := os.Mkdir(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	host := filepath.Join(binDir, "switchboard")
	copyFile(t, e.bins.Switchboard, host, 0o755)
	marker := filepath.Join(t.TempDir(), "planted-helper-ran")
	planted := filepath.Join(binDir, "switchboard-sandbox")
	script := fmt.Sprintf("#!/bin/sh\necho ran >> %s\nexec %s sandbox-exec \"$@\"\n", marker, host)
	if err := os.WriteFile(planted, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := "project_dir = \"project\"\ndata_dir = \"state\"\nbuiltin \"bash\" {}\npermissions { default = \"allow\" }\n"
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	initComm := func() string {
		cmd := exec.Command(host, "call", "--config", e.config, "bash.run", `{"command":"cat /proc/1/comm"}`)
		cmd.Env = append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("call: %v\n%s", err, out)
		}
		return string(out)
	}
	out := initComm()
	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("the planted helper ran: %q", b)
	}
	if !strings.Contains(out, "switchboard\n") {
		t.Errorf("with a planted helper beside it the host did not confine bash with its own binary; PID 1 in bash's sandbox: %q", out)
	}
	// The control: the helper this build pins is used.
	copyFile(t, e.bins.Sandbox, planted, 0o755)
	if out := initComm(); !strings.Contains(out, "switchboard-san") {
		t.Errorf("control: with the genuine helper beside it, PID 1 in bash's sandbox is %q", out)
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to+".tmp", b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(to+".tmp", to); err != nil {
		t.Fatal(err)
	}
}

// TestHelperReplacedWhileTheHostRunsNeverRuns: the host checks the helper
// beside it against its pin, but ran it by path at every later start; a
// rebuild gives the file a new inode (which the read-only mounts of running
// sandboxes do not cover), a server writes its own there, and the next
// start ran it unconfined (red team, round 3). The spawner is executed from
// the file checked, through its descriptor, and executes its own binary
// for every helper. The control: the restart happens, and bash is confined
// by the genuine helper.
func TestHelperReplacedWhileTheHostRunsNeverRuns(t *testing.T) {
	e := setup(t)
	binDir := filepath.Join(t.TempDir(), "bin")
	if err := os.Mkdir(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	host := filepath.Join(binDir, "switchboard")
	copyFile(t, e.bins.Switchboard, host, 0o755)
	copyFile(t, e.bins.Sandbox, filepath.Join(binDir, "switchboard-sandbox"), 0o755)
	copyFile(t, e.bins.Builtins, filepath.Join(binDir, "switchboard-builtins"), 0o755)
	cfg := "project_dir = \"project\"\ndata_dir = \"state\"\nstart_wait = \"2m\"\nbuiltin \"bash\" {}\npermissions { default = \"allow\" }\n"
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	e.bins.Switchboard = host
	c, _ := mcpClient(t, e)
	initialize(t, c)
	comm := func(when string) string {
		res, err := callTool(t.Context(), c, "bash__run", map[string]any{"command": "cat /proc/1/comm; echo " + when}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return resultText(res)
	}
	if out := comm("before"); !strings.Contains(out, "switchboard-san") {
		t.Fatalf("before: PID 1 in bash's sandbox is %q", out)
	}
	marker := filepath.Join(t.TempDir(), "replaced-helper-ran")
	evil := fmt.Sprintf("#!/bin/sh\necho ran >> %s\nexec %s sandbox-exec \"$@\"\n", marker, host)
	planted := filepath.Join(binDir, "switchboard-sandbox")
	if err := os.WriteFile(planted+".new", []byte(evil), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(planted+".new", planted); err != nil {
		t.Fatal(err)
	}
	before := pids(status(t, e))["bash"]
	if out, errOut, code := run(t, e, "restart", "bash", "--config", e.config); code != 0 {
		t.Fatalf("restart = %d %q %q", code, out, errOut)
	}
	waitRestarted(t, e, "bash", before)
	out := comm("after")
	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("the helper put in place while the host ran was run: %q", b)
	}
	if !strings.Contains(out, "switchboard-san") {
		t.Errorf("after the restart PID 1 in bash's sandbox is %q, want the genuine helper", out)
	}
}

// socketRoots lists the hosts' socket folders in dir.
func socketRoots(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "switchboard-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestKilledHostsSocketFoldersAreRemoved: go-plugin makes a folder for
// each plugin's socket, and the sandbox a private temporary folder for
// each server, removed when the server stops, which never happens for a
// killed host's; they piled up in the temporary folder. Each host keeps
// them in one folder of its own, named after its pid, removes it at its
// exit, and removes those of hosts that are gone when it starts.
func TestKilledHostsSocketFoldersAreRemoved(t *testing.T) {
	e := setup(t)
	// A short path: under a long one the host keeps go-plugin's default
	// (a socket's path is limited to about 100 bytes).
	tmp, err := os.MkdirTemp("", "sbt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
	withTmp := func(cmd *exec.Cmd) { cmd.Env = append(cmd.Env, "TMPDIR="+tmp) }
	// Another host of this user's that is still running keeps its folder.
	live := filepath.Join(tmp, fmt.Sprintf("switchboard-%d-1", os.Getpid()))
	if err := os.MkdirAll(filepath.Join(live, "plugin-dir1"), 0o700); err != nil {
		t.Fatal(err)
	}

	c, cmd := mcpClient(t, e, withTmp)
	initialize(t, c)
	killed := socketRoots(t, tmp)
	if len(killed) != 2 {
		t.Fatalf("socket folders while the host runs: %v; want the running test's and the host's own", killed)
	}
	own := filepath.Join(tmp, fmt.Sprintf("switchboard-%d-*", cmd.Process.Pid))
	if entries, _ := filepath.Glob(filepath.Join(own, "plugin-dir*")); len(entries) == 0 {
		t.Fatalf("the host's plugins have no socket folders in its own folder under %s", tmp)
	}
	if entries, _ := filepath.Glob(filepath.Join(own, "switchboard-bash-*")); len(entries) != 1 {
		t.Fatalf("bash's sandbox has no private temporary folder in the host's own folder under %s", tmp)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = c.Close() // reaps it: a zombie still counts as running
	if !eventually(10*time.Second, func() bool { return syscall.Kill(cmd.Process.Pid, 0) != nil }) {
		t.Fatal("the killed host is still there")
	}
	if got := socketRoots(t, tmp); len(got) != 2 {
		t.Fatalf("after the kill: %v; the killed host's folder should still be there for the test to prove anything", got)
	}

	// The next host removes the killed one's folder, not the live one's,
	// and its own at its exit.
	c2, cmd2 := mcpClient(t, e, withTmp)
	initialize(t, c2)
	got := socketRoots(t, tmp)
	for _, d := range killed {
		if d != live && slices.Contains(got, d) {
			out, _ := exec.Command("ls", "-laR", d).CombinedOutput()
			t.Errorf("the killed host's socket folder %s is still there after the next host started:\n%s", d, out)
		}
	}
	if !slices.Contains(got, live) {
		t.Errorf("the socket folder of a host that still runs was removed: %v", got)
	}
	_ = c2.Close()
	_ = cmd2.Wait()
	if got := socketRoots(t, tmp); len(got) != 1 || got[0] != live {
		t.Errorf("after a clean exit: %v; want only the running host's folder", got)
	}
}

// TestEveryHostsStateFolderIsHidden: hosts keep their default data_dir in
// $XDG_STATE_HOME/switchboard, or ~/.local/state/switchboard without it.
// A host run with another XDG_STATE_HOME hid only its own folder, and a
// server of it rewrote the permissions of a host run without one; and a
// folder not made yet could not be hidden, so a server pre-seeded the
// permissions of a host not started yet (red team round 4). Every host
// now makes and hides both. The attacks go through a grant of ~/.local,
// standing for any grant that reaches the folder; the control writes
// beside it.
func TestEveryHostsStateFolderIsHidden(t *testing.T) {
	for _, tc := range []struct {
		name  string
		other bool // another host's data_dir exists there already
	}{{"another host's, under another XDG_STATE_HOME", true}, {"a future host's, not made yet", false}} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			home := t.TempDir()
			root := filepath.Join(home, ".local", "state", "switchboard")
			perms := filepath.Join(root, "0123456789ab", "permissions.json")
			const saved = `{"version":1,"allow":[],"deny":null}`
			if tc.other {
				if err := os.MkdirAll(filepath.Dir(perms), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(perms, []byte(saved), 0o600); err != nil {
					t.Fatal(err)
				}
			} else if err := os.MkdirAll(filepath.Join(home, ".local"), 0o700); err != nil {
				t.Fatal(err)
			}
			cfg := fmt.Sprintf("project_dir = \"project\"\ndata_dir = \"state\"\nstart_wait = \"2m\"\nbuiltin \"bash\" {\n  sandbox {\n    write = [%q]\n  }\n}\n", filepath.Join(home, ".local"))
			if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			c, _ := mcpClient(t, e, func(cmd *exec.Cmd) {
				cmd.Env = append(cmd.Env, "HOME="+home, "XDG_STATE_HOME="+filepath.Join(t.TempDir(), "elsewhere"))
			})
			initialize(t, c)
			grant := `{"version":1,"allow":["bash.*"],"deny":null}`
			// Encoded, so that bash's own guard of protected paths does not
			// stop it before the sandbox is tried.
			script := fmt.Sprintf("mkdir -p %s; printf '%%s' '%s' > %s; mkdir -p %s && echo kept > %s; echo END",
				filepath.Dir(perms), grant, perms, filepath.Join(home, ".local", "other"), filepath.Join(home, ".local", "other", "file"))
			res, err := callTool(t.Context(), c, "bash__run", map[string]any{"command": "echo " + base64.StdEncoding.EncodeToString([]byte(script)) + " | base64 -d | sh"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			out := resultText(res)
			if !strings.Contains(out, "END") {
				t.Fatalf("the command did not run: %q", out)
			}
			b, err := os.ReadFile(perms)
			switch {
			case tc.other && string(b) != saved:
				t.Errorf("bash rewrote another host's permissions.json: %q (command said %q)", b, out)
			case !tc.other && err == nil:
				t.Errorf("bash wrote permissions for a host not started yet: %q (command said %q)", b, out)
			}
			if b, err := os.ReadFile(filepath.Join(home, ".local", "other", "file")); err != nil || string(b) != "kept\n" {
				t.Errorf("control: the rest of ~/.local is not writable through the grant (%q, %v); command said %q", b, err, out)
			}
		})
	}
}

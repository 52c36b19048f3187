package main

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestToolCannotPlantAPluginFolder: a plugin_dirs folder that does not
// exist yet is made by the host before any server starts, so the sandbox
// covers it like the rest of the control plane: bash cannot create it and
// put a binary there for the next start to run (found from outside: the
// planted plugin loaded).
func TestToolCannotPlantAPluginFolder(t *testing.T) {
	e := setupWith(t, `plugin_dirs = ["plugins"]
allow_unlocked_plugins = true
permissions { default = "allow" }`)
	// The agent's bytes, already in the project (write_file can do that).
	data, err := os.ReadFile(e.bins.Hello)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.project, "tool.bin"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	plugins := filepath.Join(filepath.Dir(e.config), "plugins")
	if err := os.RemoveAll(plugins); err != nil {
		t.Fatal(err)
	}
	// The project is the config's folder's "project" subfolder; plugin_dirs
	// is beside the config, so put the project there for this attack.
	cfg := strings.Replace(mustRead(t, e.config), `project_dir = "project"`, `project_dir = "."`, 1)
	cfg = strings.Replace(cfg, `data_dir    = "state"`, `data_dir    = "`+t.TempDir()+`"`, 1)
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(e.project, "tool.bin"), filepath.Join(filepath.Dir(e.config), "tool.bin")); err != nil {
		t.Fatal(err)
	}
	out, errOut, _ := run(t, e, "call", "--config", e.config, "bash.run",
		`{"command":"mkdir -p other && cp tool.bin other/x && echo COPIED; mkdir -p plugins; cp tool.bin plugins/switchboard-plugin-planted && echo PLANTED"}`)
	// Control: the same commands into a folder that is not the plugin
	// folder work, so what stops the attack is the sandbox's cover.
	if !strings.Contains(out, "COPIED") {
		t.Fatalf("the control copy did not run, so the test proves nothing: %s %s", out, errOut)
	}
	if strings.Contains(out, "PLANTED") {
		t.Errorf("bash put a binary into the plugin folder: %s %s", out, errOut)
	}
	if entries, _ := os.ReadDir(plugins); len(entries) > 0 {
		t.Errorf("the plugin folder holds %v after the attack", entries)
	}
	out, _, _ = run(t, e, "tools", "--config", e.config)
	if strings.Contains(out, "planted") {
		t.Errorf("the planted plugin loaded:\n%s", out)
	}
	// Control: the folder exists (the host made it), empty.
	if st, err := os.Stat(plugins); err != nil || !st.IsDir() {
		t.Errorf("the host did not make the plugin folder: %v", err)
	}
}

// TestToolCannotPlantALockFile: with no lock file beside the config and a
// server that may write the config's folder, the host makes an empty lock
// file before any server starts, so the sandbox binds it read-only: bash
// cannot create one pinning what it likes (a tool surface the quarantine
// would hold, a binary's hash) for the host's next read (found from
// outside: the sandbox covered only files that existed at start).
func TestToolCannotPlantALockFile(t *testing.T) {
	e := setupWith(t, `permissions { default = "allow" }`)
	cfg := strings.Replace(mustRead(t, e.config), `project_dir = "project"`, `project_dir = "."`, 1)
	cfg = strings.Replace(cfg, `data_dir    = "state"`, `data_dir    = "`+t.TempDir()+`"`, 1)
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(filepath.Dir(e.config), "switchboard.lock.hcl")
	if _, err := os.Stat(lock); err == nil {
		t.Fatal("the test needs a config without a lock file")
	}
	planted := `plugin "hello" { surface = "sha256:0000" }`
	// The script travels encoded so that bash's own pattern guard (which
	// refuses redirections it can see to protected paths) does not stop it
	// first: this tests the sandbox under it.
	script := "echo x > other.hcl && echo WROTE; printf '%s' '" + planted + "' > switchboard.lock.hcl && echo PLANTED; printf '%s' '" + planted + "' >> switchboard.lock.hcl && echo APPENDED; rm -f switchboard.lock.hcl && echo REMOVED"
	args, _ := json.Marshal(map[string]string{"command": "echo " + base64.StdEncoding.EncodeToString([]byte(script)) + " | base64 -d | sh"})
	out, errOut, _ := run(t, e, "call", "--config", e.config, "bash.run", string(args))
	// Control: the same command writes another file in that folder, so
	// what stops the attack is the sandbox's cover of the lock file.
	if !strings.Contains(out, "WROTE") {
		t.Fatalf("the control write did not run, so the test proves nothing: %s %s", out, errOut)
	}
	// (Inside the sandbox the writes may "succeed" into the cover, which is
	// not the file: what counts is the file the host reads.)
	if strings.Contains(out, "REMOVED") {
		t.Errorf("bash removed the lock file: %s %s", out, errOut)
	}
	got, err := os.ReadFile(lock)
	if err != nil {
		t.Fatalf("the host made no lock file: %v", err)
	}
	if strings.Contains(string(got), "sha256:0000") {
		t.Errorf("the planted lock is in place:\n%s", got)
	}
	if !strings.Contains(string(got), "switchboard plugin lock") {
		t.Errorf("the lock file is not the host's empty one:\n%s", got)
	}
}

// TestNoLockFileWhereNoToolWrites: the host makes the lock file only when a
// server could otherwise create it; a config folder no server may write
// stays as the operator left it.
func TestNoLockFileWhereNoToolWrites(t *testing.T) {
	e := setupWith(t, `permissions { default = "allow" }`)
	out, errOut, code := run(t, e, "call", "--config", e.config, "bash.run", `{"command":"echo hi"}`)
	if code != 0 || !strings.Contains(out, "hi") {
		t.Fatalf("call failed (%d): %s %s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(e.config), "switchboard.lock.hcl")); err == nil {
		t.Error("the host made a lock file beside a config no server can write")
	}
}

// TestCommandsCannotReadThePlugin: the processes a tool starts run as the
// plugin's user in its sandbox; the plugin is non-dumpable, so they cannot
// read its environment or memory, where other callers' commands pass
// (found from outside: a command attached to the bash plugin with ptrace
// and read another HTTP session's command line from its memory).
func TestCommandsCannotReadThePlugin(t *testing.T) {
	e := setupWith(t, `permissions { default = "allow" }`)
	line := `sleep 30 & s=$!; cat /proc/$s/environ > /dev/null && echo SIBLING-READ; ` +
		`tr '\0' ' ' < /proc/$PPID/cmdline; echo; cat /proc/$PPID/environ > /dev/null && echo PLUGIN-ENV-READ; ` +
		`head -c 1 /proc/$PPID/mem > /dev/null 2>&1 && echo PLUGIN-MEM-READ; kill $s`
	args, _ := json.Marshal(map[string]string{"command": line})
	out, errOut, _ := run(t, e, "call", "--config", e.config, "bash.run", string(args))
	// Control: a process of the same user and sandbox that is dumpable
	// (the sibling sleep) can be read, and the parent is the plugin.
	if !strings.Contains(out, "SIBLING-READ") || !strings.Contains(out, "switchboard-builtins bash") {
		t.Fatalf("the control did not hold (sibling readable, parent the bash plugin), so the test proves nothing: %s %s", out, errOut)
	}
	for _, leak := range []string{"PLUGIN-ENV-READ", "PLUGIN-MEM-READ"} {
		if strings.Contains(out, leak) {
			t.Errorf("a command read the bash plugin (%s): %s", leak, out)
		}
	}
}

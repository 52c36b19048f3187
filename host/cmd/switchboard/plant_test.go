package main

import (
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

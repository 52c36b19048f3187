package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/host/internal/pluginstore"
)

// TestPluginVersionConstraint: a block with version and no path picks the
// newest binary that meets it among plugin_dirs and the install
// directory's folder for this platform; a path that is a folder is
// searched the same way; a constraint nothing meets is an error that
// lists what was found.
func TestPluginVersionConstraint(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	dir := t.TempDir()
	mk := func(sub string, files ...string) {
		d := filepath.Join(dir, sub)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(d, f), []byte("bin"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("plugins", "switchboard-plugin-notes_v1.2.0", "switchboard-plugin-notes_v2.0.0")
	mk(filepath.Join("installed", pluginstore.Platform()), "switchboard-plugin-notes_v1.3.1")
	mk(filepath.Join("installed", "other_arch"), "switchboard-plugin-notes_v1.9.0")
	mk("pinned", "switchboard-plugin-notes_v1.2.5", "switchboard-plugin-notes_v1.4.0")
	for _, tc := range []struct {
		name, block, want, wantErr string
	}{
		{"tilde", `version = "~> 1.2"`, "installed/" + pluginstore.Platform() + "/switchboard-plugin-notes_v1.3.1", ""},
		{"exact minor", `version = "~> 1.2.0"`, "plugins/switchboard-plugin-notes_v1.2.0", ""},
		{"no constraint", ``, "plugins/switchboard-plugin-notes_v2.0.0", ""},
		{"folder path", "path = \"pinned\"\nversion = \"< 1.3\"", "pinned/switchboard-plugin-notes_v1.2.5", ""},
		{"file path", `path = "plugins/switchboard-plugin-notes_v2.0.0"`, "plugins/switchboard-plugin-notes_v2.0.0", ""},
		{"file path out of range", "path = \"plugins/switchboard-plugin-notes_v2.0.0\"\nversion = \"~> 1.0\"", "", "does not meet"},
		{"nothing matches", `version = "~> 3.0"`, "", "switchboard-plugin-notes_v1.2.0"},
		{"bad constraint", `version = "about one"`, "", "not a version constraint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "plugin_dirs = [\"plugins\"]\nplugin_install_dir = \"installed\"\nplugin \"notes\" {\n" + tc.block + "\n}\n"
			path := filepath.Join(dir, "config.hcl")
			if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv("XDG_STATE_HOME", t.TempDir())
			res := Load(path)
			if tc.wantErr != "" {
				if !res.Diags.HasErrors() || !strings.Contains(res.Diags.Error(), tc.wantErr) {
					t.Fatalf("Load = %v, want an error saying %q", res.Diags, tc.wantErr)
				}
				return
			}
			if res.Diags.HasErrors() {
				t.Fatalf("Load: %v", res.Diags)
			}
			if got := res.Config.Plugins[0].Path; got != filepath.Join(dir, tc.want) {
				t.Errorf("plugin path = %s, want %s", got, filepath.Join(dir, tc.want))
			}
		})
	}
}

// TestControlPlaneHasLockAndPlugins: the lock file, plugin_dirs and the
// install directory are control-plane paths every sandbox hides.
func TestControlPlaneHasLockAndPlugins(t *testing.T) {
	res, dir := load(t, "plugin_dirs = [\"plugins\"]\nplugin_install_dir = \"installed\"\n")
	if res.Diags.HasErrors() {
		t.Fatal(res.Diags)
	}
	cp := strings.Join(res.Config.ControlPlane(), "\n")
	for _, want := range []string{filepath.Join(dir, pluginstore.LockFileName), filepath.Join(dir, "plugins"), filepath.Join(dir, "installed")} {
		if !strings.Contains(cp, want) {
			t.Errorf("ControlPlane() = %s, missing %s", cp, want)
		}
	}
}

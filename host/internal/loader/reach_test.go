package loader

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/sandbox"
	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

// TestConfigOutOfReach judges the jobs a config makes (nothing starts).
func TestConfigOutOfReach(t *testing.T) {
	bins := fixtures.Build(t)
	probe := (&sandbox.Sandbox{Helper: bins.Switchboard, Policy: sandbox.Policy{Mode: sandbox.ModeRequired}}).Report()
	tests := []struct {
		name string
		// project is project_dir relative to the config's folder.
		project string
		src     string
		ok      bool
		reason  string // substring
		// landlock marks cases that need Landlock on this machine.
		landlock bool
	}{
		{name: "no server", project: "project", ok: true},
		{name: "web only, unconfined", project: "project", src: `builtin "web" {}`, ok: true},
		{name: "bash unconfined", project: "project", src: "builtin \"bash\" {\n sandbox { mode = \"off\" }\n}", reason: `bash runs with sandbox mode "off"`},
		{name: "third-party plugin unconfined", project: "project", src: "plugin \"hello\" {\n path = \"$HELLO\"\n sandbox { mode = \"off\" }\n}", reason: `hello runs with sandbox mode "off"`},
		{
			name: "built-ins confined, config outside the project", project: "project", landlock: true, ok: true,
			src: confined("bash") + confined("filesystem") + confined("git"),
		},
		{
			name: "bash confined, config inside the project", project: ".", landlock: true,
			src:    confined("bash"),
			reason: "bash may write",
		},
		{
			name: "bash confined, granted the config's folder", project: "project", landlock: true,
			src:    "builtin \"bash\" {\n sandbox {\n mode = \"required\"\n write = [\".\"]\n }\n}",
			reason: "bash may write",
		},
		{
			name: "external unconfined, config outside its folder", project: "project", ok: true,
			src: "external \"x\" {\n command = \"$MCP\"\n sandbox { mode = \"off\" }\n}",
		},
		{
			name: "external unconfined, config inside its folder", project: ".",
			src:    "external \"x\" {\n command = \"$MCP\"\n sandbox { mode = \"off\" }\n}",
			reason: `x runs with sandbox mode "off" in`,
		},
		{name: "external over HTTP", project: ".", src: `external "x" { url = "http://127.0.0.1:1/mcp" }`, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.landlock && probe.Landlock == 0 {
				t.Skipf("no Landlock here: %s", probe)
			}
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "project"), 0o755); err != nil {
				t.Fatal(err)
			}
			src := "project_dir = \"" + tt.project + "\"\ndata_dir = \"" + filepath.Join(t.TempDir(), "state") + "\"\n" + tt.src
			src = strings.NewReplacer("$HELLO", bins.Hello, "$MCP", bins.MCPServer).Replace(src)
			cfg := writeConfig(t, dir, src)
			h := &Host{cfg: cfg, jobs: map[string]job{}}
			for _, j := range Jobs(cfg, bins.Switchboard) {
				h.jobs[jobKey(j)] = j
			}
			ok, reason := h.ConfigOutOfReach()
			if ok != tt.ok || !strings.Contains(reason, tt.reason) {
				t.Errorf("ConfigOutOfReach() = %v, %q; want %v, %q", ok, reason, tt.ok, tt.reason)
			}
		})
	}
}

func confined(builtin string) string {
	return "builtin \"" + builtin + "\" {\n sandbox { mode = \"required\" }\n}\n"
}

// writeConfig writes src as dir/config.hcl and loads it, failing the test
// on any error diagnostic.
func writeConfig(t *testing.T, dir, src string) *config.Config {
	t.Helper()
	path := filepath.Join(dir, "config.hcl")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	res := config.Load(path)
	if res.Diags.HasErrors() {
		t.Fatalf("config: %v", res.Diags)
	}
	return res.Config
}

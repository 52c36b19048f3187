package loader

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/switchboard-mcp/switchboard/host/internal/builtins"
	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
)

// TestBashHasADefaultProcessLimit: bash's sandbox carries its default
// process limit (the sandbox package's tests perform the fork bomb against
// the mechanism), a configured limit is kept as configured, and a server
// that runs no commands for an agent gets no default.
func TestBashHasADefaultProcessLimit(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "project"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, dir, "project_dir = \"project\"\n")
	files := hostFilesOf(cfg)
	bash := confinement(cfg, files, registry.KindBuiltin, "bash", config.Sandbox{}, nil, "", "/bin/true")
	if bash.Policy.DefaultProcesses != builtins.BashProcesses || bash.Policy.Processes != 0 {
		t.Errorf("bash: default %d, configured %d; want default %d", bash.Policy.DefaultProcesses, bash.Policy.Processes, builtins.BashProcesses)
	}
	set := confinement(cfg, files, registry.KindBuiltin, "bash", config.Sandbox{Processes: 100000}, nil, "", "/bin/true")
	if set.Policy.Processes != 100000 {
		t.Errorf("bash with processes = 100000: %d", set.Policy.Processes)
	}
	fs := confinement(cfg, files, registry.KindBuiltin, "filesystem", config.Sandbox{}, nil, "", "/bin/true")
	if fs.Policy.DefaultProcesses != 0 {
		t.Errorf("filesystem got a default process limit of %d", fs.Policy.DefaultProcesses)
	}
}

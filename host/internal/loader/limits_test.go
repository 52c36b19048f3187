package loader

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// TestGitRunsGitAlone: the git built-in's sandbox lets it execute git (its
// binary, its own programs' folder, its dynamic loader) and nothing else
// (the sandbox package's tests run a shell against the mechanism); with
// hooks or filters allowed, the repository's programs run, so it does not
// restrict execution. Other built-ins are not restricted.
func TestGitRunsGitAlone(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	gitBin, _ = filepath.EvalSymlinks(gitBin)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "project"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, dir, "project_dir = \"project\"\n")
	files := hostFilesOf(cfg)
	g := confinement(cfg, files, registry.KindBuiltin, "git", config.Sandbox{}, nil, "", "/bin/true").Policy
	if !g.ExecOnly || !slices.Contains(g.Exec, gitBin) {
		t.Errorf("git's sandbox: exec only %v, exec %q; want only %s and its own", g.ExecOnly, g.Exec, gitBin)
	}
	if with := builtins.ExecWithInterpreter(gitBin); len(with) > 1 {
		loader, _ := filepath.EvalSymlinks(with[len(with)-1])
		if !slices.Contains(g.Exec, loader) {
			t.Errorf("git's sandbox does not let its dynamic loader %s run: %q", loader, g.Exec)
		}
	}
	for _, settings := range []string{`{"allow_hooks":true}`, `{"allow_filters":true}`} {
		if p := confinement(cfg, files, registry.KindBuiltin, "git", config.Sandbox{}, []byte(settings), "", "/bin/true").Policy; p.ExecOnly {
			t.Errorf("git with %s still runs git alone", settings)
		}
	}
	if p := confinement(cfg, files, registry.KindBuiltin, "bash", config.Sandbox{}, nil, "", "/bin/true").Policy; p.ExecOnly {
		t.Error("bash runs nothing but what Exec lists")
	}
}

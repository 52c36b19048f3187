package loader

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/host/internal/builtins"
	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
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
	if fs.Policy.DefaultProcesses != 0 || fs.Policy.DefaultMemory != 0 {
		t.Errorf("filesystem got default limits of %d processes, %d bytes", fs.Policy.DefaultProcesses, fs.Policy.DefaultMemory)
	}
	// git reads files the agent writes: a default memory limit, which a
	// configured one replaces.
	git := confinement(cfg, files, registry.KindBuiltin, "git", config.Sandbox{}, nil, "", "/bin/true")
	if git.Policy.DefaultMemory != builtins.GitMemory || git.Policy.Memory != 0 {
		t.Errorf("git: default memory %d, configured %d; want default %d", git.Policy.DefaultMemory, git.Policy.Memory, builtins.GitMemory)
	}
	setGit := confinement(cfg, files, registry.KindBuiltin, "git", config.Sandbox{Memory: 8 << 30}, nil, "", "/bin/true")
	if setGit.Policy.Memory != 8<<30 {
		t.Errorf("git with memory = 8GiB: %d", setGit.Policy.Memory)
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

// TestHelperForRunsOnlyThePinnedHelper: the file beside the host is the
// helper only when it hashes to the pin; a plain build (no pin) and any
// other file, however named, leave the host's own binary as the helper.
func TestHelperForRunsOnlyThePinnedHelper(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "switchboard")
	helper := filepath.Join(dir, HelperBinary)
	for _, f := range []string{self, helper} {
		if err := os.WriteFile(f, []byte("#!/bin/sh\n# "+filepath.Base(f)+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := launcher.FileSHA256(helper)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pin, want string
	}{
		{"", self},                      // a plain go build pins none
		{sum, helper},                   // the helper this build pins
		{strings.Repeat("0", 64), self}, // another file
	} {
		pinHelper(t, tc.pin)
		if got := HelperFor(self); got != tc.want {
			t.Errorf("pin %q: HelperFor = %s, want %s", tc.pin, got, tc.want)
		}
	}
	// Replaced after it was checked: checked again (the file's identity
	// changed).
	pinHelper(t, sum)
	if err := os.WriteFile(helper+".new", []byte("#!/bin/sh\n# planted\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(helper+".new", helper); err != nil {
		t.Fatal(err)
	}
	if got := HelperFor(self); got != self {
		t.Errorf("a helper replaced after its check is used: %s", got)
	}
}

package git_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/plugins/git"
	"github.com/switchboard-mcp/switchboard/sdk/sdktest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction(sdktest.ReattachWaitFunction))
}

func gitCmd(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func TestGitStatus(t *testing.T) {
	base := t.TempDir()
	project := filepath.Join(base, "project")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{project, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		gitCmd(t, d, "init", "-q", "-b", "main")
	}
	if err := os.WriteFile(filepath.Join(project, "new.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A hostile repository config: fsmonitor runs a program on status.
	marker := filepath.Join(base, "pwned")
	hook := filepath.Join(base, "hook.sh")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, project, "config", "core.fsmonitor", hook)
	// A nested folder whose .git file points outside the project.
	nested := filepath.Join(project, "nested")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(nested, ".git"), []byte("gitdir: "+filepath.Join(outside, ".git")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(project, "out-link")); err != nil {
		t.Fatal(err)
	}

	p := sdktest.StartInProcess(t, git.New(), sdktest.WithProjectDir(project))
	res := p.Call("git_status", nil)
	if res.GetIsError() || !strings.Contains(sdktest.Text(res), "new.txt") {
		t.Errorf("git_status = %q", sdktest.Text(res))
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("core.fsmonitor from the repository config ran a program")
	}
	for _, repo := range []string{outside, "../outside", "out-link", "nested"} {
		res := p.Call("git_status", map[string]any{"repo_path": repo})
		if !res.GetIsError() || !strings.Contains(sdktest.Text(res), "outside") {
			t.Errorf("git_status(repo_path=%q) = %q, want refused", repo, sdktest.Text(res))
		}
	}
}

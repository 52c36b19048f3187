package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestGitConfigSwappedDuringACallRunsNothing: the git built-in reads a
// repository's config and turns off every program it names before it runs
// git; a config swapped in between (a tool that may write the project can
// loop a rename) named a filter the read had not seen, and git ran it: 320
// runs in 60 calls (red team). git's sandbox now lets it execute git alone,
// so the swap runs nothing. The control: with allow_filters the same filter
// runs, so the repository would run it.
func TestGitConfigSwappedDuringACallRunsNothing(t *testing.T) {
	e := setup(t)
	repo := filepath.Join(e.project, "repo")
	gitDo := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.Mkdir(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	gitDo("init", "-q")
	gitDo("config", "user.email", "t@example.com")
	gitDo("config", "user.name", "t")
	for i := range 20 {
		if err := os.WriteFile(filepath.Join(repo, fmt.Sprintf("f%d.txt", i)), []byte("one\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitDo("add", ".")
	gitDo("commit", "-qm", "files")
	for i := range 20 { // modified: status and diff read each through its filter
		if err := os.WriteFile(filepath.Join(repo, fmt.Sprintf("f%d.txt", i)), []byte("two\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(repo, ".gitattributes"), []byte("*.txt filter=evr\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	marks := filepath.Join(e.project, "marks")
	if err := os.Mkdir(marks, 0o777); err != nil {
		t.Fatal(err)
	}
	filter := filepath.Join(repo, ".git", "evr")
	if err := os.WriteFile(filter, []byte("#!/bin/sh\ntouch "+marks+"/ran_$$\ncat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(repo, ".git", "config")
	good, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	evil := append(append([]byte{}, good...), []byte("[filter \"evr\"]\n\tclean = "+filter+"\n")...)
	ran := func() int {
		ents, _ := os.ReadDir(marks)
		return len(ents)
	}
	calls := func(settings string, n int, swap bool) {
		t.Helper()
		cfg := fmt.Sprintf("project_dir = \"project\"\ndata_dir = \"state\"\nstart_wait = \"2m\"\nbuiltin \"git\" {\n%s}\n", settings)
		if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		c, _ := mcpClient(t, e)
		initialize(t, c)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		if swap {
			wg.Go(func() {
				tmp := cfgPath + ".tmp"
				for i := 0; ; i++ {
					select {
					case <-stop:
						_ = os.WriteFile(cfgPath, good, 0o644)
						return
					default:
					}
					b := good
					if i%2 == 0 {
						b = evil
					}
					if os.WriteFile(tmp, b, 0o644) == nil {
						_ = os.Rename(tmp, cfgPath)
					}
				}
			})
		} else if err := os.WriteFile(cfgPath, evil, 0o644); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for i := 0; i < n && time.Now().Before(deadline); i++ {
			tool := []string{"git__git_status", "git__git_diff_unstaged"}[i%2]
			if _, err := callTool(t.Context(), c, tool, map[string]any{"repo_path": repo}, nil); err != nil {
				t.Fatal(err)
			}
		}
		close(stop)
		wg.Wait()
		_ = os.WriteFile(cfgPath, good, 0o644)
		_ = c.Close()
	}
	calls("", 60, true)
	if n := ran(); n != 0 {
		t.Errorf("with the repository's config swapped during the calls, its filter ran %d times", n)
	}
	calls("  allow_filters = true\n", 2, false)
	if ran() == 0 {
		t.Error("control: with allow_filters the repository's filter did not run; the test proves nothing")
	}
}

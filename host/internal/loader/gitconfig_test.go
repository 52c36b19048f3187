package loader

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReadGitConfigAgreesWithGit: the values and included files the host
// reads of a config are git's own (git config --show-origin --list), for
// includes relative to the including file, nested, conditional, in a
// loop, and values with quotes, comments and a variable on its section's
// line.
func TestReadGitConfigAgreesWithGit(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if out, err := exec.Command("git", "init", "-q", filepath.Join(dir, "repo")).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	base, err := os.ReadFile(filepath.Join(dir, "repo/.git/config"))
	if err != nil {
		t.Fatal(err)
	}
	main := write("repo/.git/config", string(base)+"[include]\n\tpath = ../a.inc\n[includeIf \"gitdir:/\"]\n\tpath = ../sub/b.inc\n[include]\n\tpath = missing.inc\n")
	write("repo/a.inc", "[core] hooksPath = \"first\" # a comment\n")
	write("repo/sub/b.inc", "[core]\n\thooksPath = \".git hooks\" ; another\n[include]\n\tpath = c.inc\n")
	write("repo/sub/c.inc", "[core]\n\tfsmonitor = \"touch x; false\"\n")
	c := readGitConfig(main)
	want := []string{filepath.Join(dir, "repo/a.inc"), filepath.Join(dir, "repo/sub/b.inc"), filepath.Join(dir, "repo/sub/c.inc")}
	for _, w := range want {
		if !slices.Contains(c.includes, w) {
			t.Errorf("includes %v: %s missing", c.includes, w)
		}
	}
	if !slices.Contains(c.includes, filepath.Join(dir, "repo/.git/missing.inc")) {
		t.Errorf("includes %v: the missing file is not listed", c.includes)
	}
	// git's own reading of the same file.
	gitValue := func(key string) string {
		cmd := exec.Command("git", "config", "--local", "--includes", "--get", key)
		cmd.Dir = filepath.Join(dir, "repo")
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, _ := cmd.Output()
		return strings.TrimSpace(string(out))
	}
	for _, k := range []struct{ section, key string }{{"core", "hookspath"}, {"core", "fsmonitor"}} {
		got, git := c.value(k.section, k.key), gitValue(k.section+"."+k.key)
		if got != git {
			t.Errorf("%s.%s: host reads %q, git %q", k.section, k.key, got, git)
		}
	}
	// A loop (git refuses it) ends.
	write("repo/sub/c.inc", "[include]\n\tpath = b.inc\n")
	if n := len(readGitConfig(main).includes); n > 3*maxIncludeDepth {
		t.Errorf("a loop of includes read %d files", n)
	}
}

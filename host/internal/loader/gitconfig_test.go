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

// TestReadGitConfigAsGitReadsIt: a byte order mark before the first
// section, values continued over lines with a backslash (in and out of
// quotes), a backslash in a comment (no continuation), and an include
// path continued over two lines read as git reads them (red team round
// 19: both hid a program and an include from the host).
func TestReadGitConfigAsGitReadsIt(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	config := filepath.Join(dir, ".git", "config")
	body := "\xef\xbb\xbf[core]\n\trepositoryformatversion = 0\n\tfsmonitor = sh tools/\\\nfsm.sh\n" +
		"[alias]\n\ta = \"!sh one \\\n two\"\n\tb = x # not \\\n\tc = after-the-comment\n" +
		"[include]\n\tpath = ../inc\\\n9.cfg\n"
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "inc9.cfg"), []byte("[core]\n\tpager = cat\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := readGitConfig(config)
	for _, k := range []string{"core.fsmonitor", "alias.a", "alias.b", "alias.c", "core.pager"} {
		cmd := exec.Command("git", "config", "--includes", "--get", k)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git config --get %s: %v", k, err)
		}
		section, key, _ := strings.Cut(k, ".")
		if got, git := c.value(section, key), strings.TrimSuffix(string(out), "\n"); got != git {
			t.Errorf("%s: host reads %q, git %q", k, got, git)
		}
	}
	if !slices.Contains(c.includes, filepath.Join(dir, "inc9.cfg")) {
		t.Errorf("includes %v: the include continued over two lines is missing", c.includes)
	}
}

package git_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/internal/gitplaceholder"
	"github.com/switchboard-mcp/switchboard/plugins/git"
	"github.com/switchboard-mcp/switchboard/sdk/sdktest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction(sdktest.ReattachWaitFunction))
}

func gitCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// newRepo makes a repository with one commit.
func newRepo(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, dir, "init", "-q", "-b", "main")
	gitCmd(t, dir, "config", "user.email", "t@example.com")
	gitCmd(t, dir, "config", "user.name", "Tester")
	writeFile(t, filepath.Join(dir, "README.md"), "hello\n", 0o644)
	gitCmd(t, dir, "add", "README.md")
	gitCmd(t, dir, "commit", "-q", "-m", "initial")
}

type fixture struct {
	base, project, outside string
	p                      *sdktest.Plugin
}

func setup(t *testing.T) fixture {
	t.Helper()
	base := t.TempDir()
	f := fixture{base: base, project: filepath.Join(base, "project"), outside: filepath.Join(base, "outside")}
	newRepo(t, f.project)
	newRepo(t, f.outside)
	f.p = sdktest.StartInProcess(t, git.New(), sdktest.WithProjectDir(f.project))
	return f
}

func (f fixture) call(t *testing.T, tool string, args map[string]any) (string, bool) {
	t.Helper()
	res := f.p.Call(tool, args)
	return res.Text(), res.IsError
}

func TestWorkflow(t *testing.T) {
	f := setup(t)
	writeFile(t, filepath.Join(f.project, "a.txt"), "one\ntwo\n", 0o644)
	writeFile(t, filepath.Join(f.project, "README.md"), "hello\nworld\n", 0o644)

	steps := []struct {
		tool    string
		args    map[string]any
		want    string
		isError bool
	}{
		{"git_status", nil, "a.txt", false},
		{"git_diff_unstaged", map[string]any{"context_lines": 0}, "+world", false},
		{"git_add", map[string]any{"files": []string{"a.txt", "README.md"}}, "Staged: a.txt, README.md", false},
		{"git_diff_staged", nil, "+one", false},
		{"git_reset", map[string]any{"files": []string{"README.md"}}, "Unstaged: README.md", false},
		{"git_diff_staged", nil, "a.txt", false},
		{"git_commit", map[string]any{"message": "add a.txt"}, "Committed ", false},
		{"git_log", map[string]any{"max_count": 1}, "add a.txt", false},
		{"git_log", map[string]any{"path": "README.md"}, "initial", false},
		{"git_show", map[string]any{"revision": "HEAD"}, "+one", false},
		{"git_blame", map[string]any{"path": "a.txt", "start_line": 2, "end_line": 2}, "two", false},
		{"git_create_branch", map[string]any{"branch_name": "feature", "base_branch": "HEAD~1"}, "Created branch feature", false},
		{"git_branch", nil, "feature", false},
		{"git_branch", map[string]any{"branch_type": "all", "contains": "HEAD"}, "main", false},
		{"git_stash_does_not_exist", nil, "", true},
		{"git_checkout", map[string]any{"branch_name": "feature"}, "Switched to branch feature", false},
		{"git_diff", map[string]any{"target": "main"}, "-one", false},
		{"git_checkout", map[string]any{"branch_name": "nope"}, "no local branch", true},
		{"git_commit", map[string]any{"message": ""}, "message is empty", true},
		{"git_show", map[string]any{"revision": "no-such-rev"}, "not a known revision", true},
	}
	for _, s := range steps {
		if s.tool == "git_stash_does_not_exist" {
			_, err := f.p.CallContext(t.Context(), s.tool, nil, nil)
			if err == nil {
				t.Error("an unknown tool ran")
			}
			continue
		}
		got, isErr := f.call(t, s.tool, s.args)
		if isErr != s.isError || !strings.Contains(got, s.want) {
			t.Errorf("%s(%v) = %q (isError %v), want %q (isError %v)", s.tool, s.args, got, isErr, s.want, s.isError)
		}
	}
	if got := gitCmd(t, f.project, "branch", "--show-current"); strings.TrimSpace(got) != "feature" {
		t.Errorf("current branch = %q after git_checkout", got)
	}
}

// TestNoInit: CVE-2025-68143. There is no git_init, and nothing creates a
// repository where there is none.
func TestNoInit(t *testing.T) {
	f := setup(t)
	if f.p.Tool("git_init") != nil {
		t.Fatal("git_init exists")
	}
	plain := filepath.Join(f.project, "plain")
	// An empty .git and the placeholder file are the host's placeholders
	// (no repository): refused the same way, and left as they are.
	placeholder := filepath.Join(f.project, "placeholder", ".git")
	for _, d := range []string{plain, placeholder, filepath.Join(f.project, "placeholder-file")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	phFile := filepath.Join(f.project, "placeholder-file", ".git")
	if err := os.WriteFile(phFile, []byte(gitplaceholder.Content), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"plain", "placeholder", "placeholder-file"} {
		for tool, args := range map[string]map[string]any{
			"git_status": {"repo_path": dir},
			"git_log":    {"repo_path": dir},
			"git_add":    {"repo_path": dir, "files": []string{"x"}},
			"git_commit": {"repo_path": dir, "message": "m"},
		} {
			got, isErr := f.call(t, tool, args)
			if !isErr || !strings.Contains(got, "not a git repository") {
				t.Errorf("%s in %s = %q, want refused", tool, dir, got)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(plain, ".git")); err == nil {
		t.Error("a repository was created")
	}
	if names, _ := os.ReadDir(placeholder); len(names) != 0 {
		t.Errorf("the empty .git was filled: %v", names)
	}
	if !gitplaceholder.IsFile(phFile) {
		t.Error("the placeholder file was changed")
	}
}

// TestOptionInjection: CVE-2025-68144. Values that look like options never
// reach git as options.
func TestOptionInjection(t *testing.T) {
	f := setup(t)
	victim := filepath.Join(f.base, "overwritten")
	cases := []struct {
		tool string
		args map[string]any
	}{
		{"git_diff", map[string]any{"target": "--output=" + victim}},
		{"git_diff", map[string]any{"target": "HEAD --output=" + victim}},
		{"git_show", map[string]any{"revision": "--output=" + victim}},
		{"git_branch", map[string]any{"contains": "--output=" + victim}},
		{"git_create_branch", map[string]any{"branch_name": "--output=" + victim}},
		{"git_create_branch", map[string]any{"branch_name": "x", "base_branch": "--output=" + victim}},
		{"git_checkout", map[string]any{"branch_name": "--orphan=x"}},
		{"git_add", map[string]any{"files": []string{"--output=" + victim}}},
		{"git_blame", map[string]any{"path": "--output=" + victim}},
		{"git_log", map[string]any{"path": "--output=" + victim}},
	}
	for _, c := range cases {
		got, isErr := f.call(t, c.tool, c.args)
		if !isErr {
			t.Errorf("%s(%v) = %q, want refused", c.tool, c.args, got)
		}
	}
	if _, err := os.Stat(victim); err == nil {
		t.Errorf("%s was written", victim)
	}
	// A commit message that looks like an option is just a message.
	writeFile(t, filepath.Join(f.project, "m.txt"), "m", 0o644)
	f.call(t, "git_add", map[string]any{"files": []string{"m.txt"}})
	if got, isErr := f.call(t, "git_commit", map[string]any{"message": "--amend"}); isErr {
		t.Errorf("commit with message --amend = %q", got)
	}
	if got := gitCmd(t, f.project, "log", "-1", "--format=%s"); strings.TrimSpace(got) != "--amend" {
		t.Errorf("last commit subject = %q, want --amend", got)
	}
}

// TestConfinement: CVE-2025-68145 (repository not enforced),
// CVE-2026-27735 (git_add ../ out of tree), GHSA-w766-5x43-whvw (nested
// .git file pointing outside), GHSA-6663-fm5v-gqm5 (commondir).
func TestConfinement(t *testing.T) {
	f := setup(t)
	if err := os.Symlink(f.outside, filepath.Join(f.project, "out-link")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(f.project, "nested", ".git"), "gitdir: "+filepath.Join(f.outside, ".git")+"\n", 0o644)
	writeFile(t, filepath.Join(f.project, "relnested", ".git"), "gitdir: ../../outside/.git\n", 0o644)
	// A git directory inside the project whose commondir points outside.
	wt := filepath.Join(f.project, "wt")
	writeFile(t, filepath.Join(wt, ".git"), "gitdir: "+filepath.Join(f.project, ".git", "worktrees", "wt")+"\n", 0o644)
	writeFile(t, filepath.Join(f.project, ".git", "worktrees", "wt", "commondir"), filepath.Join(f.outside, ".git")+"\n", 0o644)
	writeFile(t, filepath.Join(f.outside, "secret.txt"), "secret", 0o644)
	writeFile(t, filepath.Join(f.base, "project-evil", "x"), "x", 0o644)

	for _, repo := range []string{f.outside, "../outside", "out-link", "nested", "relnested", "wt", "../project-evil", "/"} {
		got, isErr := f.call(t, "git_status", map[string]any{"repo_path": repo})
		if !isErr || !strings.Contains(got, "outside") && !strings.Contains(got, "not a git repository") {
			t.Errorf("git_status(repo_path=%q) = %q, want refused", repo, got)
		}
	}
	for _, file := range []string{"../outside/secret.txt", f.outside + "/secret.txt", "out-link/secret.txt", ".git/config"} {
		got, isErr := f.call(t, "git_add", map[string]any{"files": []string{file}})
		if !isErr {
			t.Errorf("git_add(%q) = %q, want refused", file, got)
		}
	}
	if got := gitCmd(t, f.outside, "status", "--porcelain"); strings.TrimSpace(got) != "?? secret.txt" {
		t.Errorf("the outside repository changed: %q", got)
	}
}

// TestRepositoryConfigCannotRunPrograms: GHSA-6663-fm5v-gqm5 and friends.
// A repository whose config sets an fsmonitor, a clean/smudge filter (via
// .gitattributes), hooks, a pager, an external diff and a textconv driver:
// running every tool creates none of their marker files.
func TestRepositoryConfigCannotRunPrograms(t *testing.T) {
	f := setup(t)
	markers := filepath.Join(f.base, "markers")
	if err := os.Mkdir(markers, 0o755); err != nil {
		t.Fatal(err)
	}
	script := func(name string) string {
		path := filepath.Join(f.base, name+".sh")
		writeFile(t, path, "#!/bin/sh\ntouch "+filepath.Join(markers, name)+"\ncat\n", 0o755)
		return path
	}
	for key, name := range map[string]string{
		"core.fsmonitor":      "fsmonitor",
		"filter.evil.clean":   "clean",
		"filter.evil.smudge":  "smudge",
		"filter.evil.process": "process",
		"filter.lfs.clean":    "lfs",
		"core.pager":          "pager",
		"diff.external":       "extdiff",
		"diff.evil.textconv":  "textconv",
		"diff.evil.command":   "diffcmd",
		"core.editor":         "editor",
		"gpg.program":         "gpg",
		"credential.helper":   "credential",
		"core.sshCommand":     "ssh",
		"commit.gpgSign":      "",
	} {
		value := "true"
		if name != "" {
			value = script(name)
		}
		gitCmd(t, f.project, "config", key, value)
	}
	writeFile(t, filepath.Join(f.project, ".gitattributes"), "* filter=evil diff=evil\n", 0o644)
	for _, hook := range []string{"pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "post-checkout", "reference-transaction", "post-index-change"} {
		writeFile(t, filepath.Join(f.project, ".git", "hooks", hook), "#!/bin/sh\ntouch "+filepath.Join(markers, hook)+"\n", 0o755)
	}
	hooksDir := filepath.Join(f.base, "hooks")
	writeFile(t, filepath.Join(hooksDir, "pre-commit"), "#!/bin/sh\ntouch "+filepath.Join(markers, "hookspath")+"\n", 0o755)
	gitCmd(t, f.project, "config", "core.hooksPath", hooksDir)
	writeFile(t, filepath.Join(f.project, "a.txt"), "one\n", 0o644)
	writeFile(t, filepath.Join(f.project, "README.md"), "changed\n", 0o644)

	calls := []struct {
		tool string
		args map[string]any
	}{
		{"git_status", nil},
		{"git_diff_unstaged", nil},
		{"git_add", map[string]any{"files": []string{"a.txt", ".gitattributes"}}},
		{"git_diff_staged", nil},
		{"git_commit", map[string]any{"message": "c1"}},
		{"git_log", nil},
		{"git_show", map[string]any{"revision": "HEAD"}},
		{"git_diff", map[string]any{"target": "HEAD~1"}},
		{"git_blame", map[string]any{"path": "a.txt"}},
		{"git_branch", nil},
		{"git_create_branch", map[string]any{"branch_name": "b2"}},
		{"git_checkout", map[string]any{"branch_name": "b2"}},
		{"git_reset", nil},
	}
	for _, c := range calls {
		if got, isErr := f.call(t, c.tool, c.args); isErr {
			t.Errorf("%s(%v) failed: %q", c.tool, c.args, got)
		}
	}
	ents, _ := os.ReadDir(markers)
	for _, e := range ents {
		t.Errorf("a program from the repository's configuration ran: %s", e.Name())
	}
}

func TestOptInHooks(t *testing.T) {
	base := t.TempDir()
	project := filepath.Join(base, "project")
	newRepo(t, project)
	marker := filepath.Join(base, "hook-ran")
	writeFile(t, filepath.Join(project, ".git", "hooks", "pre-commit"), "#!/bin/sh\ntouch "+marker+"\n", 0o755)
	p := sdktest.StartInProcess(t, git.New(), sdktest.WithProjectDir(project), sdktest.WithSettings(map[string]any{"allow_hooks": true}))
	writeFile(t, filepath.Join(project, "a.txt"), "a", 0o644)
	p.Call("git_add", map[string]any{"files": []string{"a.txt"}})
	if res := p.Call("git_commit", map[string]any{"message": "m"}); res.IsError {
		t.Fatalf("commit: %s", res.Text())
	}
	if _, err := os.Stat(marker); err != nil {
		t.Error("allow_hooks = true, but the pre-commit hook did not run")
	}
}

func TestOutputCap(t *testing.T) {
	base := t.TempDir()
	project := filepath.Join(base, "project")
	newRepo(t, project)
	writeFile(t, filepath.Join(project, "README.md"), strings.Repeat("line\n", 1000), 0o644)
	p := sdktest.StartInProcess(t, git.New(), sdktest.WithProjectDir(project), sdktest.WithSettings(map[string]any{"output_cap": 300}))
	got := p.Call("git_diff_unstaged", nil).Text()
	if got != p.Call("git_diff_unstaged", nil).Text() || !strings.Contains(got, "output cut at 300") {
		t.Errorf("diff of a big file = %q", got)
	}
}

// git_add refuses a repository inside the work tree (it would be staged
// as a gitlink, and the person's `git status` then goes into it and runs
// what its own config names, outside any sandbox: red team round 7). The
// index is left as it was; the control: a plain folder's files stage.
func TestAddRefusesAnEmbeddedRepository(t *testing.T) {
	f := setup(t)
	sub := filepath.Join(f.project, "sub")
	newRepo(t, sub)
	writeFile(t, filepath.Join(f.project, "docs", "a.md"), "a\n", 0o644)
	// Enough files before it that the listing of what was staged is
	// longer than the tools' output cap (red team round 8).
	for i := 0; i < 1500; i++ {
		writeFile(t, filepath.Join(f.project, "aaa", fmt.Sprintf("file_with_a_rather_long_name_to_fill_the_listing_%04d.txt", i)), "x\n", 0o644)
	}
	for _, files := range [][]string{{"sub"}, {"."}} {
		got, isErr := f.call(t, "git_add", map[string]any{"files": files})
		if !isErr || !strings.Contains(got, "refused to stage sub") {
			t.Errorf("git_add %v = %q, want sub refused as a repository of its own", files, got)
		}
		staged, _ := f.call(t, "git_diff_staged", nil)
		if strings.Contains(staged, "Subproject commit") || strings.Contains(staged, "sub") {
			t.Errorf("git_add %v left the gitlink staged:\n%s", files, staged)
		}
	}
	if got, isErr := f.call(t, "git_add", map[string]any{"files": []string{"docs"}}); isErr || !strings.Contains(got, "Staged") {
		t.Errorf("control: git_add docs = %q", got)
	}
}

// A .git file the agent made huge, or a FIFO where git reads its config,
// neither grows the server nor holds it: the call is refused at once (red
// team round 10: a 4 GB .git file grew the server by gigabytes; a FIFO
// config held the call for ever). The control: the same call on a sound
// repository beside them works.
func TestOversizedAndFIFOGitFilesAreRefused(t *testing.T) {
	f := setup(t)
	huge := filepath.Join(f.project, "huge")
	if err := os.MkdirAll(huge, 0o755); err != nil {
		t.Fatal(err)
	}
	big, err := os.Create(filepath.Join(huge, ".git"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(1 << 30); err != nil { // sparse
		t.Fatal(err)
	}
	_ = big.Close()
	fifo := filepath.Join(f.project, "fifo")
	newRepo(t, fifo)
	if err := os.Remove(filepath.Join(fifo, ".git", "config")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(fifo, ".git", "config"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{huge, fifo} {
		done := make(chan string, 1)
		go func() {
			out, isErr := f.call(t, "git_status", map[string]any{"repo_path": dir})
			if !isErr {
				out = "not an error: " + out
			}
			done <- out
		}()
		select {
		case out := <-done:
			if !strings.Contains(out, "regular file") {
				t.Errorf("git_status in %s = %q, want a refusal naming the file", dir, out)
			}
		case <-time.After(20 * time.Second):
			if w, err := os.OpenFile(filepath.Join(fifo, ".git", "config"), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				_ = w.Close()
			}
			t.Fatalf("git_status in %s did not answer", dir)
		}
	}
	if out, isErr := f.call(t, "git_status", nil); isErr {
		t.Errorf("control: git_status of the project failed: %q", out)
	}
}

// TestCommitWritesNothingThroughLinks: git follows links where it writes
// some of a repository's files (COMMIT_EDITMSG, logs/). A repository of the
// agent's inside the project, its COMMIT_EDITMSG linked to the project
// repository's .git/commondir, had git_commit write the commit message
// there, and the person's next `git status` in the project ran a config
// of the agent's (red team round 11). git may now change files only
// beneath the repository it works on. The control: the same commit by
// plain git writes through the link.
func TestCommitWritesNothingThroughLinks(t *testing.T) {
	f := setup(t)
	nest := filepath.Join(f.project, "nest")
	newRepo(t, nest)
	commondir := filepath.Join(f.project, ".git", "commondir")
	plant := func() {
		t.Helper()
		writeFile(t, filepath.Join(nest, "g"), fmt.Sprint(time.Now().UnixNano()), 0o644)
		gitCmd(t, nest, "add", "g")
		_ = os.Remove(filepath.Join(nest, ".git", "COMMIT_EDITMSG"))
		if err := os.Symlink(commondir, filepath.Join(nest, ".git", "COMMIT_EDITMSG")); err != nil {
			t.Fatal(err)
		}
	}
	plant()
	got, isErr := f.call(t, "git_commit", map[string]any{"repo_path": "nest", "message": "/agents/common"})
	if _, err := os.Lstat(commondir); err == nil {
		b, _ := os.ReadFile(commondir)
		t.Fatalf("git_commit wrote the project's .git/commondir through a link: %q (it said %q, error %v)", b, got, isErr)
	}
	if !isErr {
		t.Logf("git_commit through the link: %s", got)
	}
	// The control.
	plant()
	gitCmd(t, nest, "commit", "-q", "-m", "/agents/common")
	if b, err := os.ReadFile(commondir); err != nil || !strings.Contains(string(b), "/agents/common") {
		t.Fatalf("control: plain git did not write through the link (%q, %v): the test proves nothing", b, err)
	}
}

// TestForgedWorkTreesRefused: a repository of the agent's whose git
// directory names the project's repository as its commondir (an index of
// its own, which the agent writes), or links its objects and refs there,
// had git_commit move the project's branch to a commit holding a gitlink
// to a repository of the agent's; the person's next checkout took it in,
// and `git status` entered that repository and ran its config (red team
// round 11). Only a linked work tree whose git directory lies in the
// repository's worktrees/ shares its objects and refs; a real one works.
func TestForgedWorkTreesRefused(t *testing.T) {
	f := setup(t)
	head := strings.TrimSpace(gitCmd(t, f.project, "rev-parse", "main"))
	// commondir naming the project's repository.
	wt := filepath.Join(f.project, "wt")
	writeFile(t, filepath.Join(wt, ".gd", "commondir"), "../../.git\n", 0o644)
	writeFile(t, filepath.Join(wt, ".gd", "HEAD"), "ref: refs/heads/main\n", 0o644)
	writeFile(t, filepath.Join(wt, ".git"), "gitdir: .gd\n", 0o644)
	// objects and refs linked to the project's repository.
	nest := filepath.Join(f.project, "nest")
	newRepo(t, nest)
	for _, d := range []string{"objects", "refs"} {
		if err := os.RemoveAll(filepath.Join(nest, ".git", d)); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(f.project, ".git", d), filepath.Join(nest, ".git", d)); err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range []string{"wt", "nest"} {
		for tool, args := range map[string]map[string]any{
			"git_status": {"repo_path": dir},
			"git_commit": {"repo_path": dir, "message": "m"},
			"git_reset":  {"repo_path": dir},
		} {
			if got, isErr := f.call(t, tool, args); !isErr || !strings.Contains(got, "refused") {
				t.Errorf("%s in %s = %q, want refused", tool, dir, got)
			}
		}
	}
	if now := strings.TrimSpace(gitCmd(t, f.project, "rev-parse", "main")); now != head {
		t.Errorf("the project's branch moved: %s -> %s", head, now)
	}
	// A real linked work tree.
	gitCmd(t, f.project, "worktree", "add", "-q", "linked")
	writeFile(t, filepath.Join(f.project, "linked", "new.txt"), "x\n", 0o644)
	if got, isErr := f.call(t, "git_status", map[string]any{"repo_path": "linked"}); isErr || !strings.Contains(got, "new.txt") {
		t.Errorf("git_status in a linked work tree = %q, %v", got, isErr)
	}
}

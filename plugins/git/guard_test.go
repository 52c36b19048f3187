package git_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchboard-mcp/switchboard/plugins/git"
	"github.com/switchboard-mcp/switchboard/sdk/sdktest"
)

// guardFixture is a project whose repository has a submodule at "sub",
// and a plugin serving it.
type guardFixture struct {
	base, project, markers, upstream string
	p                                *sdktest.Plugin
}

// target is where a family's keys are planted: the top repository or the
// submodule (whose config is .git/modules/sub/config).
type target struct {
	name     string
	dir      string // work tree
	repoPath string // repo_path for the plugin
}

func (f guardFixture) targets() []target {
	return []target{
		{name: "top", dir: f.project, repoPath: ""},
		{name: "submodule", dir: filepath.Join(f.project, "sub"), repoPath: "sub"},
	}
}

// plainGit runs the real git binary without the plugin's overrides, as a
// user would. It returns the combined output and does not fail the test:
// a control's git may well fail after running the planted program.
func plainGit(dir string, args ...string) string {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "GIT_TERMINAL_PROMPT=0")
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// guardTemplate builds the repositories once per test; each case copies
// them (setupGuard), which is much cheaper than running git to make them.
func guardTemplate(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	project, upstream := filepath.Join(base, "project"), filepath.Join(base, "upstream")
	if err := os.Mkdir(filepath.Join(base, "markers"), 0o755); err != nil {
		t.Fatal(err)
	}
	newRepo(t, upstream)
	writeFile(t, filepath.Join(upstream, "s.txt"), "sub one\n", 0o644)
	gitCmd(t, upstream, "add", "s.txt")
	gitCmd(t, upstream, "commit", "-q", "-m", "sub file")
	newRepo(t, project)
	writeFile(t, filepath.Join(project, "a.txt"), "top one\n", 0o644)
	gitCmd(t, project, "add", "a.txt")
	gitCmd(t, project, "commit", "-q", "-m", "top file")
	gitCmd(t, project, "-c", "protocol.file.allow=always", "submodule", "add", "-q", upstream, "sub")
	gitCmd(t, project, "commit", "-q", "-m", "add sub")
	sub := filepath.Join(project, "sub")
	gitCmd(t, sub, "config", "user.email", "t@example.com")
	gitCmd(t, sub, "config", "user.name", "Tester")
	// A branch "other" in both, where the .txt file differs (for checkout).
	for _, dir := range []string{project, sub} {
		gitCmd(t, dir, "checkout", "-q", "-b", "other")
		file := "a.txt"
		if dir == sub {
			file = "s.txt"
		}
		writeFile(t, filepath.Join(dir, file), "other\n", 0o644)
		gitCmd(t, dir, "commit", "-q", "-a", "-m", "other")
		gitCmd(t, dir, "checkout", "-q", "main")
	}
	return base
}

// copyTree copies the regular files and directories under src to dst,
// keeping their modes.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, info.Mode().Perm())
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.WriteFile(to, b, info.Mode().Perm()); err != nil {
			return err
		}
		// Keep the timestamps, so that the copied indexes stay clean.
		return os.Chtimes(to, info.ModTime(), info.ModTime())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// setupGuard copies the template and starts a plugin on it, before
// anything hostile is planted (so every case also proves that the guard's
// cache notices the change).
func setupGuard(t *testing.T, template string, settings map[string]any) guardFixture {
	t.Helper()
	base := t.TempDir()
	copyTree(t, template, base)
	f := guardFixture{base: base, project: filepath.Join(base, "project"), markers: filepath.Join(base, "markers"), upstream: filepath.Join(base, "upstream")}
	opts := []sdktest.Option{sdktest.WithProjectDir(f.project)}
	if settings != nil {
		opts = append(opts, sdktest.WithSettings(settings))
	}
	f.p = sdktest.StartInProcess(t, git.New(), opts...)
	for _, tg := range f.targets() {
		if res := f.p.Call("git_status", map[string]any{"repo_path": tg.repoPath}); res.IsError {
			t.Fatalf("git_status(%s) on a clean fixture: %s", tg.name, res.Text())
		}
	}
	return f
}

// script writes an executable that creates the marker name, then runs body.
func (f guardFixture) script(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(f.base, "bin", name)
	writeFile(t, path, "#!/bin/sh\ntouch '"+filepath.Join(f.markers, name)+"'\n"+body+"\n", 0o755)
	return path
}

func (f guardFixture) marked(name string) bool {
	_, err := os.Stat(filepath.Join(f.markers, name))
	return err == nil
}

// touch rewrites a tracked file with the same content, so that status must
// compare its content (through the clean filter) to know it is unchanged.
func touch(t *testing.T, tg target) {
	t.Helper()
	file := filepath.Join(tg.dir, "a.txt")
	if tg.name == "submodule" {
		file = filepath.Join(tg.dir, "s.txt")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, file, string(b), 0o644)
}

// modify changes the tracked .txt file of the target.
func modify(t *testing.T, tg target) {
	t.Helper()
	file := filepath.Join(tg.dir, "a.txt")
	if tg.name == "submodule" {
		file = filepath.Join(tg.dir, "s.txt")
	}
	writeFile(t, file, "changed\n", 0o644)
}

func txtFile(tg target) string {
	if tg.name == "submodule" {
		return "s.txt"
	}
	return "a.txt"
}

// sign replaces the target's HEAD with a copy of it carrying a signature
// header of the given armour, without any signing program.
func sign(t *testing.T, tg target, armour string) {
	t.Helper()
	raw := gitCmd(t, tg.dir, "cat-file", "commit", "HEAD")
	head, msg, _ := strings.Cut(raw, "\n\n")
	sig := "gpgsig -----BEGIN " + armour + "-----\n \n AAAA\n -----END " + armour + "-----"
	obj := head + "\n" + sig + "\n\n" + msg
	cmd := exec.Command("git", "hash-object", "-t", "commit", "-w", "--stdin")
	cmd.Dir = tg.dir
	cmd.Stdin = strings.NewReader(obj)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hash-object: %v", err)
	}
	gitCmd(t, tg.dir, "update-ref", "HEAD", strings.TrimSpace(string(out)))
}

// partialClone turns the target into a partial clone of url whose HEAD
// blob is missing, so that showing HEAD needs a lazy fetch from origin.
func partialClone(t *testing.T, tg target, url string) {
	t.Helper()
	file := txtFile(tg)
	writeFile(t, filepath.Join(tg.dir, file), "lazy blob\n", 0o644)
	gitCmd(t, tg.dir, "commit", "-q", "-a", "-m", "lazy")
	blob := strings.TrimSpace(gitCmd(t, tg.dir, "rev-parse", "HEAD:"+file))
	gitDir := strings.TrimSpace(gitCmd(t, tg.dir, "rev-parse", "--absolute-git-dir"))
	if err := os.Remove(filepath.Join(gitDir, "objects", blob[:2], blob[2:])); err != nil {
		t.Fatalf("removing the blob: %v", err)
	}
	for _, kv := range [][2]string{
		{"core.repositoryformatversion", "1"},
		{"extensions.partialClone", "origin"},
		{"remote.origin.url", url},
		{"remote.origin.promisor", "true"},
		{"remote.origin.partialclonefilter", "blob:none"},
	} {
		gitCmd(t, tg.dir, "config", kv[0], kv[1])
	}
}

func attributes(t *testing.T, tg target, line string) {
	t.Helper()
	writeFile(t, filepath.Join(tg.dir, ".gitattributes"), line+"\n", 0o644)
}

type toolCall struct {
	tool string
	args map[string]any
}

// keyFamily plants program-valued configuration in a target and names the
// plugin calls that must not run it and a plain git command that does.
type keyFamily struct {
	name string
	// marker is the script name whose marker must not appear.
	marker string
	// plant writes the configuration (and whatever else the family needs).
	plant func(t *testing.T, f guardFixture, tg target)
	// calls run through the plugin at the target's repo_path; a submodule
	// target first gets git_status, git_diff_unstaged and git_diff at the
	// top.
	calls func(tg target) []toolCall
	// control does the equivalent with plain git; nil when git 2.39 cannot
	// trigger the family outside a terminal.
	control func(t *testing.T, f guardFixture, tg target)
}

// inTop runs a control in the top repository: git status there starts a
// git status in the submodule, which reads the submodule's own config.
func inTop(args ...string) func(*testing.T, guardFixture, target) {
	return func(_ *testing.T, f guardFixture, _ target) { plainGit(f.project, args...) }
}

func inTarget(args ...string) func(*testing.T, guardFixture, target) {
	return func(_ *testing.T, _ guardFixture, tg target) { plainGit(tg.dir, args...) }
}

// diffControl changes the target's file again (the plugin's calls have
// committed the first change) and runs git diff.
func diffControl(t *testing.T, _ guardFixture, tg target) {
	t.Helper()
	writeFile(t, filepath.Join(tg.dir, txtFile(tg)), "changed again\n", 0o644)
	plainGit(tg.dir, "diff")
}

func readCalls(tg target) []toolCall {
	return []toolCall{
		{"git_status", nil},
		{"git_diff_unstaged", nil},
		{"git_diff_staged", nil},
		{"git_diff", map[string]any{"target": "other"}},
		{"git_log", map[string]any{"max_count": 3}},
		{"git_log", map[string]any{"path": txtFile(tg)}},
		{"git_show", map[string]any{"revision": "HEAD"}},
		{"git_blame", map[string]any{"path": txtFile(tg)}},
		{"git_branch", map[string]any{"branch_type": "all", "contains": "HEAD"}},
	}
}

func allCalls(tg target) []toolCall {
	return append(readCalls(tg),
		toolCall{"git_add", map[string]any{"files": []string{txtFile(tg)}}},
		toolCall{"git_diff_staged", nil},
		toolCall{"git_commit", map[string]any{"message": "through the plugin"}},
		toolCall{"git_reset", nil},
		toolCall{"git_create_branch", map[string]any{"branch_name": "made"}},
		toolCall{"git_checkout", map[string]any{"branch_name": "other"}},
		toolCall{"git_checkout", map[string]any{"branch_name": "main"}},
	)
}

func setConfig(kv ...string) func(*testing.T, guardFixture, target) {
	return func(t *testing.T, _ guardFixture, tg target) {
		for i := 0; i+1 < len(kv); i += 2 {
			gitCmd(t, tg.dir, "config", kv[i], kv[i+1])
		}
	}
}

// gitDirOf is the target's git directory (.git/modules/sub for the
// submodule).
func gitDirOf(t *testing.T, tg target) string {
	t.Helper()
	return strings.TrimSpace(gitCmd(t, tg.dir, "rev-parse", "--absolute-git-dir"))
}

func appendConfig(t *testing.T, tg target, text string) {
	t.Helper()
	path := filepath.Join(gitDirOf(t, tg), "config")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, string(b)+text, 0o644)
}

func keyFamilies() []keyFamily {
	return []keyFamily{
		{
			name: "core.fsmonitor", marker: "fsmonitor",
			plant: func(t *testing.T, f guardFixture, tg target) {
				setConfig("core.fsmonitor", f.script(t, "fsmonitor", ""))(t, f, tg)
				touch(t, tg)
			},
			calls: allCalls, control: inTop("status"),
		},
		{
			name: "filter.<driver>.clean", marker: "clean",
			plant: func(t *testing.T, f guardFixture, tg target) {
				setConfig("filter.evil.clean", f.script(t, "clean", "cat"), "filter.evil.required", "true")(t, f, tg)
				attributes(t, tg, "*.txt filter=evil")
				touch(t, tg)
			},
			calls: allCalls, control: inTop("status"),
		},
		{
			name: "Filter.<driver>.Clean in mixed case, driver name with '='", marker: "clean-case",
			plant: func(t *testing.T, f guardFixture, tg target) {
				appendConfig(t, tg, "[Filter \"a=b\"]\n\tClean = "+f.script(t, "clean-case", "cat")+"\n")
				attributes(t, tg, "*.txt filter=a=b")
				touch(t, tg)
			},
			calls: allCalls, control: inTop("status"),
		},
		{
			name: "filter.<driver>.smudge", marker: "smudge",
			plant: func(t *testing.T, f guardFixture, tg target) {
				setConfig("filter.evil.smudge", f.script(t, "smudge", "cat"))(t, f, tg)
				attributes(t, tg, "*.txt filter=evil")
			},
			calls: allCalls, control: inTarget("checkout", "-q", "other"),
		},
		{
			name: "filter.<driver>.process", marker: "process",
			plant: func(t *testing.T, f guardFixture, tg target) {
				setConfig("filter.evil.process", f.script(t, "process", ""))(t, f, tg)
				attributes(t, tg, "*.txt filter=evil")
				touch(t, tg)
			},
			calls: allCalls, control: inTop("status"),
		},
		{
			name: "diff.<driver>.textconv", marker: "textconv",
			plant: func(t *testing.T, f guardFixture, tg target) {
				setConfig("diff.evil.textconv", f.script(t, "textconv", `cat "$1"`))(t, f, tg)
				attributes(t, tg, "*.txt diff=evil")
				modify(t, tg)
			},
			calls: allCalls, control: diffControl,
		},
		{
			name: "diff.<driver>.command", marker: "diffcmd",
			plant: func(t *testing.T, f guardFixture, tg target) {
				setConfig("diff.evil.command", f.script(t, "diffcmd", ""))(t, f, tg)
				attributes(t, tg, "*.txt diff=evil")
				modify(t, tg)
			},
			calls: allCalls, control: diffControl,
		},
		{
			name: "diff.external", marker: "extdiff",
			plant: func(t *testing.T, f guardFixture, tg target) {
				setConfig("diff.external", f.script(t, "extdiff", ""))(t, f, tg)
				modify(t, tg)
			},
			calls: allCalls, control: diffControl,
		},
		{
			name: "merge.<driver>.driver", marker: "mergedriver",
			plant: func(t *testing.T, f guardFixture, tg target) {
				setConfig("merge.evil.driver", f.script(t, "mergedriver", "exit 1"))(t, f, tg)
				attributes(t, tg, "*.txt merge=evil")
				writeFile(t, filepath.Join(tg.dir, txtFile(tg)), "main side\n", 0o644)
				gitCmd(t, tg.dir, "commit", "-q", "-a", "-m", "main side")
			},
			calls: allCalls, control: inTarget("merge", "--no-edit", "other"),
		},
		{
			name: "log.showSignature + gpg.program", marker: "gpg",
			plant: func(t *testing.T, f guardFixture, tg target) {
				setConfig("log.showSignature", "true", "gpg.program", f.script(t, "gpg", ""))(t, f, tg)
				sign(t, tg, "PGP SIGNATURE")
			},
			calls: readCalls, control: inTarget("log", "-1"),
		},
		{
			name: "log.showSignature + gpg.openpgp.program", marker: "openpgp",
			plant: func(t *testing.T, f guardFixture, tg target) {
				setConfig("log.showSignature", "true", "gpg.openpgp.program", f.script(t, "openpgp", ""))(t, f, tg)
				sign(t, tg, "PGP SIGNATURE")
			},
			calls: readCalls, control: inTarget("show", "HEAD"),
		},
		{
			name: "log.showSignature + gpg.ssh.program", marker: "sshkeygen",
			plant: func(t *testing.T, f guardFixture, tg target) {
				allowed := filepath.Join(f.base, "allowed_signers")
				writeFile(t, allowed, "", 0o644)
				setConfig("log.showSignature", "true", "gpg.ssh.program", f.script(t, "sshkeygen", ""), "gpg.ssh.allowedSignersFile", allowed)(t, f, tg)
				sign(t, tg, "SSH SIGNATURE")
			},
			calls: readCalls, control: inTarget("log", "-1"),
		},
		{
			name: "log.showSignature + gpg.x509.program", marker: "x509",
			plant: func(t *testing.T, f guardFixture, tg target) {
				setConfig("log.showSignature", "true", "gpg.x509.program", f.script(t, "x509", ""))(t, f, tg)
				sign(t, tg, "SIGNED MESSAGE")
			},
			calls: readCalls, control: inTarget("log", "-1"),
		},
		{
			name: "commit.gpgSign + gpg.program", marker: "gpgsign",
			plant: func(t *testing.T, f guardFixture, tg target) {
				setConfig("commit.gpgSign", "true", "gpg.program", f.script(t, "gpgsign", ""))(t, f, tg)
			},
			calls: allCalls, control: inTarget("commit", "--allow-empty", "-m", "signed"),
		},
		{
			name: "core.hooksPath", marker: "hookspath",
			plant: func(t *testing.T, f guardFixture, tg target) {
				hooks := filepath.Join(f.base, "hooks-"+tg.name)
				for _, h := range []string{"pre-commit", "commit-msg", "post-commit", "post-checkout", "reference-transaction", "post-index-change"} {
					writeFile(t, filepath.Join(hooks, h), "#!/bin/sh\ntouch '"+filepath.Join(f.markers, "hookspath")+"'\n", 0o755)
				}
				setConfig("core.hooksPath", hooks)(t, f, tg)
				modify(t, tg)
			},
			calls: allCalls, control: inTarget("commit", "-q", "-a", "-m", "hooked"),
		},
		{
			name: "core.pager and pager.<cmd>", marker: "pager",
			plant: func(t *testing.T, f guardFixture, tg target) {
				setConfig("core.pager", f.script(t, "pager", "cat"), "pager.log", f.script(t, "pager", "cat"), "pager.show", "true")(t, f, tg)
			},
			calls: readCalls,
			control: func(t *testing.T, _ guardFixture, tg target) {
				// A pager runs only on a terminal: script(1) gives git one.
				if _, err := exec.LookPath("script"); err != nil {
					t.Skip("no script(1) to give git a terminal")
				}
				cmd := exec.Command("script", "-qec", "git log -1", "/dev/null")
				cmd.Dir = tg.dir
				cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+tg.dir, "TERM=xterm")
				_ = cmd.Run()
			},
		},
		{
			name: "core.editor", marker: "editor",
			plant: func(t *testing.T, f guardFixture, tg target) {
				setConfig("core.editor", f.script(t, "editor", `echo edited > "$1"`))(t, f, tg)
				modify(t, tg)
			},
			calls: allCalls, control: inTarget("commit", "--allow-empty"),
		},
		{
			name: "sequence.editor", marker: "seqeditor",
			plant: func(t *testing.T, f guardFixture, tg target) {
				setConfig("sequence.editor", f.script(t, "seqeditor", ""))(t, f, tg)
			},
			calls: allCalls, control: inTarget("rebase", "-i", "HEAD~1"),
		},
		{
			name: "remote.origin.uploadpack on a lazy fetch", marker: "uploadpack",
			plant: func(t *testing.T, f guardFixture, tg target) {
				partialClone(t, tg, f.upstream)
				setConfig("remote.origin.uploadpack", f.script(t, "uploadpack", "exit 1"))(t, f, tg)
			},
			calls: readCalls, control: inTarget("show", "HEAD"),
		},
		{
			name: "core.sshCommand on a lazy fetch from ssh://", marker: "ssh",
			plant: func(t *testing.T, f guardFixture, tg target) {
				partialClone(t, tg, "ssh://git@example.invalid/repo.git")
				setConfig("core.sshCommand", f.script(t, "ssh", "exit 1"))(t, f, tg)
			},
			calls: readCalls, control: inTarget("show", "HEAD"),
		},
		{
			name: "core.gitProxy on a lazy fetch from git://", marker: "gitproxy",
			plant: func(t *testing.T, f guardFixture, tg target) {
				partialClone(t, tg, "git://example.invalid/repo.git")
				setConfig("core.gitProxy", f.script(t, "gitproxy", "exit 1"))(t, f, tg)
			},
			calls: readCalls, control: inTarget("show", "HEAD"),
		},
		{
			name: "protocol.ext.allow=always on a lazy fetch from ext::", marker: "ext",
			plant: func(t *testing.T, f guardFixture, tg target) {
				partialClone(t, tg, "ext::"+f.script(t, "ext", "exit 1"))
				setConfig("protocol.ext.allow", "always", "protocol.allow", "always")(t, f, tg)
			},
			calls: readCalls, control: inTarget("show", "HEAD"),
		},
		{
			name: "include.path", marker: "included",
			plant: func(t *testing.T, f guardFixture, tg target) {
				inc := filepath.Join(tg.dir, "evil.inc")
				writeFile(t, inc, "[core]\n\tfsmonitor = "+f.script(t, "included", "")+"\n", 0o644)
				setConfig("include.path", inc)(t, f, tg)
				touch(t, tg)
			},
			calls: allCalls, control: inTop("status"),
		},
		{
			name: "includeIf gitdir: with a relative path and a nested include", marker: "includeif",
			plant: func(t *testing.T, f guardFixture, tg target) {
				gitDir := gitDirOf(t, tg)
				writeFile(t, filepath.Join(gitDir, "nested.inc"), "[filter \"evil\"]\n\tclean = "+f.script(t, "includeif", "cat")+"\n", 0o644)
				writeFile(t, filepath.Join(gitDir, "outer.inc"), "[include]\n\tpath = nested.inc\n", 0o644)
				appendConfig(t, tg, "[includeIf \"gitdir:"+gitDir+"\"]\n\tpath = outer.inc\n")
				attributes(t, tg, "*.txt filter=evil")
				touch(t, tg)
			},
			calls: allCalls, control: inTop("status"),
		},
		{
			name: "includeIf onbranch: that turns true after a checkout", marker: "onbranch",
			plant: func(t *testing.T, f guardFixture, tg target) {
				writeFile(t, filepath.Join(f.base, "onbranch.inc"), "[core]\n\tfsmonitor = "+f.script(t, "onbranch", "")+"\n", 0o644)
				appendConfig(t, tg, "[includeIf \"onbranch:other\"]\n\tpath = "+filepath.Join(f.base, "onbranch.inc")+"\n")
			},
			calls: func(tg target) []toolCall {
				return append(allCalls(tg), toolCall{"git_checkout", map[string]any{"branch_name": "other"}}, toolCall{"git_status", nil}, toolCall{"git_add", map[string]any{"files": []string{txtFile(tg)}}})
			},
			control: func(t *testing.T, f guardFixture, tg target) {
				plainGit(tg.dir, "checkout", "-q", "other")
				touch(t, tg)
				plainGit(f.project, "status")
			},
		},
	}
}

// TestGuardKeyFamilies plants each family of program-valued keys in the top
// repository's config and, separately, in the submodule's, runs the tools
// that could reach it through the plugin and checks that nothing ran; then
// it runs plain git on the same repository and checks that the program
// does run there, so the test proves the guard and not the fixture.
func TestGuardKeyFamilies(t *testing.T) {
	template := guardTemplate(t)
	for _, fam := range keyFamilies() {
		for _, where := range []string{"top", "submodule"} {
			t.Run(fam.name+"/"+where, func(t *testing.T) {
				t.Parallel()
				f := setupGuard(t, template, nil)
				var tg target
				for _, x := range f.targets() {
					if x.name == where {
						tg = x
					}
				}
				fam.plant(t, f, tg)
				calls := fam.calls(tg)
				for i := range calls {
					args := map[string]any{"repo_path": tg.repoPath}
					for k, v := range calls[i].args {
						args[k] = v
					}
					calls[i].args = args
				}
				if where == "submodule" {
					// First from the top, while the submodule still has
					// the change that makes the top's git start a git in it.
					top := []toolCall{{"git_status", nil}, {"git_diff_unstaged", nil}, {"git_diff", map[string]any{"target": "HEAD"}}}
					calls = append(top, calls...)
				}
				for _, c := range calls {
					got, isErr := f.call(c.tool, c.args)
					if isErr {
						t.Logf("%s(%v) = %q (an error; fine, as long as nothing ran)", c.tool, c.args, got)
					}
					if f.marked(fam.marker) {
						t.Fatalf("%s(%v) ran the program configured by %s in the %s", c.tool, c.args, fam.name, where)
					}
				}
				fam.control(t, f, tg)
				if !f.marked(fam.marker) {
					t.Errorf("control: plain git did not run the program configured by %s in the %s, so the test proves nothing", fam.name, where)
				}
			})
		}
	}
}

func (f guardFixture) call(tool string, args map[string]any) (string, bool) {
	res := f.p.Call(tool, args)
	return res.Text(), res.IsError
}

// TestGuardCredentialHelper: a lazy fetch from an HTTP promisor remote
// never starts (the server sees no request), so neither the credential
// helpers nor core.askPass the repository names run; plain git runs them
// all when the server answers 401.
func TestGuardCredentialHelper(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Header().Set("WWW-Authenticate", `Basic realm="x"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()
	template := guardTemplate(t)
	for _, where := range []string{"top", "submodule"} {
		t.Run(where, func(t *testing.T) {
			hits.Store(0)
			f := setupGuard(t, template, nil)
			tg := f.targets()[0]
			if where == "submodule" {
				tg = f.targets()[1]
			}
			partialClone(t, tg, srv.URL+"/repo.git")
			gitCmd(t, tg.dir, "config", "credential.helper", f.script(t, "credential", "exit 1"))
			gitCmd(t, tg.dir, "config", "credential."+srv.URL+".helper", f.script(t, "credential-url", "exit 1"))
			gitCmd(t, tg.dir, "config", "core.askPass", f.script(t, "askpass", "exit 1"))
			for _, c := range readCalls(tg) {
				args := map[string]any{"repo_path": tg.repoPath}
				for k, v := range c.args {
					args[k] = v
				}
				f.call(c.tool, args)
			}
			if f.marked("credential") || f.marked("credential-url") || f.marked("askpass") || hits.Load() != 0 {
				t.Fatalf("through the plugin: credential helpers ran %v/%v, askpass ran %v, %d HTTP requests", f.marked("credential"), f.marked("credential-url"), f.marked("askpass"), hits.Load())
			}
			plainGit(tg.dir, "show", "HEAD")
			if !f.marked("credential") || !f.marked("credential-url") || !f.marked("askpass") || hits.Load() == 0 {
				t.Errorf("control: plain git did not run credential helpers (%v/%v) and askpass (%v) (%d requests)", f.marked("credential"), f.marked("credential-url"), f.marked("askpass"), hits.Load())
			}
		})
	}
}

// TestGuardOptIns: allow_filters lets the repository's filters and
// textconv run (and nothing else); allow_hooks lets hooks run, from
// core.hooksPath too (and nothing else).
func TestGuardOptIns(t *testing.T) {
	template := guardTemplate(t)
	t.Run("allow_filters", func(t *testing.T) {
		f := setupGuard(t, template, map[string]any{"allow_filters": true})
		tg := f.targets()[0]
		gitCmd(t, tg.dir, "config", "filter.lfsish.clean", f.script(t, "clean", "cat"))
		gitCmd(t, tg.dir, "config", "diff.lfsish.textconv", f.script(t, "textconv", `sed s/^/conv:/ "$1"`))
		gitCmd(t, tg.dir, "config", "core.fsmonitor", f.script(t, "fsmonitor", ""))
		gitCmd(t, tg.dir, "config", "diff.external", f.script(t, "extdiff", ""))
		attributes(t, tg, "*.txt filter=lfsish diff=lfsish")
		modify(t, tg)
		got, _ := f.call("git_diff_unstaged", nil)
		if !strings.Contains(got, "+conv:changed") {
			t.Errorf("git_diff_unstaged with allow_filters = %q, want textconv output", got)
		}
		if got, isErr := f.call("git_add", map[string]any{"files": []string{"a.txt"}}); isErr {
			t.Fatalf("git_add: %s", got)
		}
		for name, want := range map[string]bool{"clean": true, "textconv": true, "fsmonitor": false, "extdiff": false} {
			if f.marked(name) != want {
				t.Errorf("allow_filters: %s ran = %v, want %v", name, f.marked(name), want)
			}
		}
	})
	t.Run("allow_hooks", func(t *testing.T) {
		f := setupGuard(t, template, map[string]any{"allow_hooks": true})
		tg := f.targets()[0]
		hooks := filepath.Join(f.base, "hooks")
		writeFile(t, filepath.Join(hooks, "pre-commit"), "#!/bin/sh\ntouch '"+filepath.Join(f.markers, "hook")+"'\n", 0o755)
		gitCmd(t, tg.dir, "config", "core.hooksPath", hooks)
		gitCmd(t, tg.dir, "config", "filter.evil.clean", f.script(t, "clean", "cat"))
		gitCmd(t, tg.dir, "config", "core.fsmonitor", f.script(t, "fsmonitor", ""))
		attributes(t, tg, "*.txt filter=evil")
		modify(t, tg)
		f.call("git_add", map[string]any{"files": []string{"a.txt"}})
		if got, isErr := f.call("git_commit", map[string]any{"message": "m"}); isErr {
			t.Fatalf("git_commit: %s", got)
		}
		for name, want := range map[string]bool{"hook": true, "clean": false, "fsmonitor": false} {
			if f.marked(name) != want {
				t.Errorf("allow_hooks: %s ran = %v, want %v", name, f.marked(name), want)
			}
		}
	})
}

// TestGuardNoticesChanges: the guard's cache is not fooled by an include
// whose target appears after the scan, nor by a submodule added after it.
func TestGuardNoticesChanges(t *testing.T) {
	f := setupGuard(t, guardTemplate(t), nil)
	top := f.targets()[0]
	inc := filepath.Join(f.base, "later.inc")
	gitCmd(t, top.dir, "config", "include.path", inc)
	if _, isErr := f.call("git_status", nil); isErr {
		t.Fatal("git_status failed")
	}
	writeFile(t, inc, "[core]\n\tfsmonitor = "+f.script(t, "later", "")+"\n", 0o644)
	touch(t, top)
	f.call("git_status", nil)
	if f.marked("later") {
		t.Error("an include target created after the scan ran its fsmonitor")
	}
	// A second submodule, populated with its own (non-absorbed) .git.
	nested := filepath.Join(f.project, "nested")
	newRepo(t, nested)
	gitCmd(t, nested, "config", "core.fsmonitor", f.script(t, "nested", ""))
	gitCmd(t, f.project, "add", "nested") // git_add refuses it (TestAddRefusesAnEmbeddedRepository)
	writeFile(t, filepath.Join(nested, "README.md"), "hello\n", 0o644)
	for _, tool := range []string{"git_status", "git_diff_unstaged"} {
		f.call(tool, nil)
	}
	if f.marked("nested") {
		t.Error("a submodule staged after the scan ran its fsmonitor")
	}
	plainGit(f.project, "status")
	if !f.marked("nested") {
		t.Error("control: plain git status did not run the nested repository's fsmonitor")
	}
	// A submodule of the submodule: git status in the top starts git status
	// in sub, which starts one in sub/deeper.
	deeper := filepath.Join(f.project, "sub", "deeper")
	newRepo(t, deeper)
	gitCmd(t, deeper, "config", "filter.deep.clean", f.script(t, "deeper", "cat"))
	gitCmd(t, filepath.Join(f.project, "sub"), "add", "deeper")
	writeFile(t, filepath.Join(deeper, ".gitattributes"), "* filter=deep\n", 0o644)
	writeFile(t, filepath.Join(deeper, "README.md"), "hello\n", 0o644)
	for _, tool := range []string{"git_status", "git_diff_unstaged"} {
		f.call(tool, nil)
	}
	if f.marked("deeper") {
		t.Error("a submodule of a submodule ran its clean filter")
	}
	plainGit(f.project, "status")
	if !f.marked("deeper") {
		t.Error("control: plain git status did not run the clean filter of a submodule's submodule")
	}
}

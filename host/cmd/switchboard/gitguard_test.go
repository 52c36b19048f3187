package main

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/switchboard-mcp/switchboard/internal/gitplaceholder"
)

// TestPersonsGitRunsNothingAServerWrote: a server that may write the
// project (bash, the filesystem's write tools, any external server) could
// write a hook in the project's repository, or a program into its config
// (core.fsmonitor, an alias, a pager) or into the folder core.hooksPath
// names (husky's .husky), and the person's next `git commit` in a terminal
// ran it, outside any sandbox: an agent allowed only the filesystem's
// tools could run any command. The sandboxes bind those read-only (as
// Codex and Claude Code protect .git), and the whole git folder for every
// server but the git built-in (a .git/commondir sent git to the agent's
// config and hooks, red team round 6). The test writes them through the
// filesystem and bash built-ins, then runs git itself, as the person
// would, and checks that nothing ran; the control: the project's other
// files are written, and the git built-in still commits.
func TestPersonsGitRunsNothingAServerWrote(t *testing.T) {
	e := setup(t)
	marker := filepath.Join(t.TempDir(), "ran")
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = e.project
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	git("init", "-q")
	git("config", "user.email", "p@example.com")
	git("config", "user.name", "Person")
	git("config", "core.hooksPath", ".husky") // a repository that uses husky
	git("add", "notes.txt")
	git("commit", "-qm", "first")
	configBefore, err := os.ReadFile(filepath.Join(e.project, ".git", "config"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := "project_dir = \"project\"\ndata_dir = \"state\"\nstart_wait = \"2m\"\nbuiltin \"filesystem\" {}\nbuiltin \"bash\" {}\nbuiltin \"git\" {}\npermissions { default = \"allow\" }\n"
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := mcpClient(t, e)
	initialize(t, c)

	hook := fmt.Sprintf("#!/bin/sh\ntouch %s\n", marker)
	for _, p := range []string{".git/hooks/pre-commit", ".husky/pre-commit"} {
		if got, isErr := mustCall(t, c, "filesystem__write_file", map[string]any{"path": p, "content": hook}); !isErr {
			t.Errorf("filesystem wrote %s: %q", p, got)
		}
	}
	// A commondir file sends git to another folder's config and hooks
	// (red team round 6): the agent's, in the project.
	evil := fmt.Sprintf("[core]\n\trepositoryformatversion = 0\n\tfsmonitor = \"touch %s; false\"\n", marker)
	for p, content := range map[string]string{"evil/config": evil, "evil/HEAD": "ref: refs/heads/main\n", ".git/commondir": "../evil\n"} {
		_, _ = mustCall(t, c, "filesystem__write_file", map[string]any{"path": p, "content": content})
	}
	if _, err := os.Stat(filepath.Join(e.project, ".git", "commondir")); err == nil {
		t.Error("filesystem wrote .git/commondir")
	}
	// Encoded, so that bash's own guards do not stop it before the
	// sandbox is tried.
	script := fmt.Sprintf(`printf '%%s' '%s' > .git/hooks/post-commit; chmod +x .git/hooks/post-commit
mkdir -p .husky; printf '%%s' '%s' > .husky/post-commit; chmod +x .husky/post-commit
printf '[core]\n\tfsmonitor = "touch %s; false"\n[alias]\n\tst = "!touch %s"\n' >> .git/config
git config core.pager "touch %s; cat"
cp -r .git evil2; git --git-dir=evil2 config core.fsmonitor "touch %s; false"; echo ../evil2 > .git/commondir
echo changed > other.txt; echo END`, hook, hook, marker, marker, marker, marker)
	out, _ := mustCall(t, c, "bash__run", map[string]any{"command": "echo " + base64.StdEncoding.EncodeToString([]byte(script)) + " | base64 -d | sh"})
	if !strings.Contains(out, "END") {
		t.Fatalf("the command did not run: %q", out)
	}
	if b, err := os.ReadFile(filepath.Join(e.project, "other.txt")); err != nil || string(b) != "changed\n" {
		t.Fatalf("control: bash could not write the project (%q, %v): the test proves nothing; it said %q", b, err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(e.project, ".git", "config")); string(b) != string(configBefore) {
		t.Errorf("the repository's config was changed:\n%s", b)
	}
	if _, err := os.Stat(filepath.Join(e.project, ".git", "commondir")); err == nil {
		t.Error("bash wrote .git/commondir")
	}
	// The git built-in still stages and commits (its sandbox has the same
	// read-only hooks and config).
	if got, isErr := mustCall(t, c, "git__git_add", map[string]any{"files": []string{"other.txt"}}); isErr {
		t.Fatalf("git_add: %s", got)
	}
	if got, isErr := mustCall(t, c, "git__git_commit", map[string]any{"message": "by the agent"}); isErr || !strings.Contains(got, "Committed") {
		t.Fatalf("git_commit: %s", got)
	}
	// The person's git, unconfined.
	if err := os.WriteFile(filepath.Join(e.project, "mine.txt"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "mine.txt")
	git("commit", "-qm", "by the person")
	git("status")
	git("log", "-1")
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the person's git ran a program a server wrote into the repository")
	}
	if log := git("log", "--format=%s"); !strings.Contains(log, "by the agent") {
		t.Errorf("the git built-in's commit is not in the log:\n%s", log)
	}
}

// TestProgramsPlantedOnPATHNeverRun: a folder servers may write is often
// first on the PATH a person starts the host with (an activated
// virtualenv's bin, node_modules/.bin). An agent put `true`, `git` and an
// external server's command there, and the host ran `true` unconfined at
// every start (its namespace probe), the git built-in ran that `git` for
// every call, and the external server's command was that program, with
// the server's network (red team round 5). The host now finds programs
// on PATH outside the folders servers may write. The test plants all
// three, first on PATH, and checks that none runs while the built-in and
// the external server work with the real programs.
func TestProgramsPlantedOnPATHNeverRun(t *testing.T) {
	e := setup(t)
	planted := filepath.Join(e.project, ".venv", "bin")
	trusted := t.TempDir()
	markers := t.TempDir()
	if err := os.MkdirAll(planted, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"true", "git", "mcpserver"} {
		script := fmt.Sprintf("#!/bin/sh\ntouch %s\nexit 1\n", filepath.Join(markers, name))
		if err := os.WriteFile(filepath.Join(planted, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(t, e.bins.MCPServer, filepath.Join(trusted, "mcpserver"), 0o755)
	cmd := exec.Command("git", "init", "-q")
	cmd.Dir = e.project
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	cfg := "project_dir = \"project\"\ndata_dir = \"state\"\nstart_wait = \"2m\"\nbuiltin \"git\" {}\nexternal \"ext\" {\n  command = \"mcpserver\"\n}\npermissions { default = \"allow\" }\n"
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := mcpClient(t, e, func(cmd *exec.Cmd) {
		cmd.Env = append(cmd.Env, "PATH="+planted+string(filepath.ListSeparator)+trusted+string(filepath.ListSeparator)+os.Getenv("PATH"))
	})
	initialize(t, c)
	if got, isErr := mustCall(t, c, "git__git_status", map[string]any{}); isErr || !strings.Contains(got, "branch") {
		t.Errorf("git_status with a planted git first on PATH: %q", got)
	}
	if got, isErr := mustCall(t, c, "ext__echo", map[string]any{"text": "real"}); isErr || got != "real" {
		t.Errorf("the external server is not the real program: %q", got)
	}
	for _, name := range []string{"true", "git", "mcpserver"} {
		if _, err := os.Stat(filepath.Join(markers, name)); err == nil {
			t.Errorf("the host ran the %s an agent planted in the project's .venv/bin", name)
		}
	}
}

// TestSubmodulesGitFileStays: a submodule's work tree holds a .git file
// naming its repository in .git/modules. Replaced by a folder with a
// config of the agent's, the person's `git status` in the project goes
// into the submodule and runs what that config names. The file is bound
// read-only, also where project_dir is a folder of the superproject (red
// team round 11: only the project's own top was looked at). The controls:
// bash writes the submodule's other files, and the same commands run
// outside the sandbox do make git run the program.
func TestSubmodulesGitFileStays(t *testing.T) {
	for _, layout := range []string{"project", "folder of a superproject"} {
		t.Run(layout, func(t *testing.T) {
			e := setup(t)
			marker := filepath.Join(t.TempDir(), "ran")
			git := func(dir string, args ...string) {
				t.Helper()
				cmd := exec.Command("git", append([]string{"-c", "protocol.file.allow=always", "-c", "user.email=p@example.com", "-c", "user.name=P"}, args...)...)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
			}
			lib := t.TempDir()
			git(lib, "init", "-q")
			git(lib, "commit", "-q", "--allow-empty", "-m", "lib")
			projectDir, sub := "project", filepath.Join(e.project, "lib")
			git(e.project, "init", "-q")
			if layout == "project" {
				git(e.project, "submodule", "add", "-q", lib, "lib")
			} else {
				projectDir, sub = "project/pkg", filepath.Join(e.project, "pkg", "lib")
				if err := os.Mkdir(filepath.Join(e.project, "pkg"), 0o755); err != nil {
					t.Fatal(err)
				}
				git(e.project, "submodule", "add", "-q", lib, "pkg/lib")
			}
			git(e.project, "commit", "-q", "-m", "with lib")
			// The submodule uses husky: its hooks folder is in its work
			// tree (round 12: that folder was writable).
			git(sub, "config", "core.hooksPath", ".husky")
			hookMarker := filepath.Join(t.TempDir(), "hook-ran")
			cfg := fmt.Sprintf("project_dir = %q\ndata_dir = \"state\"\nstart_wait = \"2m\"\nbuiltin \"bash\" {}\npermissions { default = \"allow\" }\n", projectDir)
			if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			c, _ := mcpClient(t, e)
			initialize(t, c)
			hookScript := fmt.Sprintf(`cd %s; mkdir -p .husky; printf '#!/bin/sh\ntouch %s\n' > .husky/pre-commit; chmod +x .husky/pre-commit`, sub, hookMarker)
			gitScript := fmt.Sprintf(`cd %s; echo kept > other.txt
rm -f .git && git init -q --bare .git && git --git-dir=.git config core.bare false &&
git --git-dir=.git config core.fsmonitor "touch %s; false"
echo END`, sub, marker)
			script := hookScript + "\n" + gitScript
			out, _ := mustCall(t, c, "bash__run", map[string]any{"command": "echo " + base64.StdEncoding.EncodeToString([]byte(script)) + " | base64 -d | sh"})
			if !strings.Contains(out, "END") {
				t.Fatalf("the command did not run: %q", out)
			}
			if b, err := os.ReadFile(filepath.Join(sub, "other.txt")); err != nil || string(b) != "kept\n" {
				t.Fatalf("control: bash could not write the submodule's files (%q, %v); it said %q", b, err, out)
			}
			if st, err := os.Lstat(filepath.Join(sub, ".git")); err != nil || st.IsDir() {
				t.Errorf("the submodule's .git file was replaced (%v, %v)", st, err)
			}
			git(filepath.Join(e.project, projectDir[len("project"):]), "status")
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the person's git status ran a program a server wrote into a submodule")
			}
			git(sub, "commit", "-q", "--allow-empty", "-m", "person's")
			if _, err := os.Stat(hookMarker); err == nil {
				t.Fatal("the person's commit in the submodule ran a hook a server wrote into its hooksPath")
			}
			_ = c.Close()
			// The control: the same commands outside any sandbox.
			if out, err := exec.Command("sh", "-c", hookScript).CombinedOutput(); err != nil {
				t.Fatalf("control: %v %s", err, out)
			}
			git(sub, "commit", "-q", "--allow-empty", "-m", "person's again")
			if _, err := os.Stat(hookMarker); err != nil {
				t.Fatal("control: the person's commit ran no hook after the same commands outside the sandbox: the test proves nothing")
			}
			if out, err := exec.Command("sh", "-c", gitScript).CombinedOutput(); err != nil {
				t.Fatalf("control: %v %s", err, out)
			}
			git(filepath.Join(e.project, projectDir[len("project"):]), "status")
			if _, err := os.Stat(marker); err != nil {
				t.Fatal("control: the person's git ran nothing after the same commands outside the sandbox: the test proves nothing")
			}
		})
	}
}

// TestNoRepositoryMadeWhileServersRun: in a project that is no
// repository when the servers start, a server that may write it made one
// (git init, then a core.fsmonitor in the new config), and the person's
// next `git status` in the project ran that program, outside any sandbox
// (red team round 9): the read-only binds of a repository's files are
// decided when a sandbox is made. The host then made an empty .git there
// first and bound it read-only; but git skips an empty .git and checks
// whether the folder itself is a repository, so HEAD, objects/, refs/ and
// a config naming core.worktree and core.fsmonitor written beside it had
// the person's git run that program all the same. The placeholder is now a
// .git file git refuses as a gitfile. The test tries every way in through
// bash and the filesystem, runs git as the person, and checks that the
// placeholder is gone once the host stops, except where a HEAD was
// written beside it; the controls: bash writes the project's other files,
// and once the placeholder is taken away the same files do make git run
// the program. A second run checks the person's own `rm .git && git init`
// while the host runs: the servers restart and see the new repository
// read-only, and it stays when the host stops.
func TestNoRepositoryMadeWhileServersRun(t *testing.T) {
	e := setup(t)
	marker := filepath.Join(t.TempDir(), "ran")
	dotGit := filepath.Join(e.project, ".git")
	cfg := "project_dir = \"project\"\ndata_dir = \"state\"\nstart_wait = \"2m\"\nbuiltin \"filesystem\" {}\nbuiltin \"bash\" {}\nbuiltin \"git\" {}\npermissions { default = \"allow\" }\n"
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	personsGit := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = e.project
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_CEILING_DIRECTORIES="+filepath.Dir(e.project))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	ran := func() bool {
		_, err := os.Stat(marker)
		return err == nil
	}
	// c.Close waits for the host to exit.
	gone := func() bool {
		_, err := os.Lstat(dotGit)
		return errors.Is(err, fs.ErrNotExist)
	}
	bash := func(c *client.Client, script string) string {
		t.Helper()
		out, _ := mustCall(t, c, "bash__run", map[string]any{"command": "echo " + base64.StdEncoding.EncodeToString([]byte(script)) + " | base64 -d | sh"})
		if !strings.Contains(out, "END") {
			t.Fatalf("the command did not run: %q", out)
		}
		return out
	}

	c, _ := mcpClient(t, e)
	initialize(t, c)
	fsmonitor := fmt.Sprintf("[core]\n\trepositoryformatversion = 0\n\tfsmonitor = \"touch %s; false\"\n", marker)
	if got, isErr := mustCall(t, c, "filesystem__write_file", map[string]any{"path": ".git/config", "content": fsmonitor}); !isErr {
		t.Errorf("filesystem wrote .git/config: %q", got)
	}
	// A repository of the agent's elsewhere in the project, for a .git
	// file or link to name.
	out := bash(c, fmt.Sprintf(`git init -q 2>/dev/null; printf '%s' >> .git/config
rm -f .git; mkdir .git; mv .git moved; rm -rf .git
git init -q evil; printf '%s' >> evil/.git/config
mv .git aside; printf 'gitdir: evil/.git\n' > .git; ln -s evil/.git .git
echo changed > other.txt; echo END`, fsmonitor, fsmonitor))
	if b, err := os.ReadFile(filepath.Join(e.project, "other.txt")); err != nil || string(b) != "changed\n" {
		t.Fatalf("control: bash could not write the project (%q, %v): the test proves nothing; it said %q", b, err, out)
	}
	if !gitplaceholder.IsFile(dotGit) {
		t.Errorf("the project's .git is not the placeholder while the host runs")
	}
	// The project folder itself as the repository: HEAD, objects/, refs/
	// and a config whose work tree is the folder.
	bareConfig := fmt.Sprintf("[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = .\n\tfsmonitor = \"touch %s; false\"\n", marker)
	bash(c, fmt.Sprintf(`mkdir -p objects refs/heads sub; echo 'ref: refs/heads/main' > HEAD; printf '%s' > config; echo END`, bareConfig))
	if got, isErr := mustCall(t, c, "git__git_status", map[string]any{}); !isErr || !strings.Contains(got, "not a git repository") {
		t.Errorf("git_status in a project with the placeholder = %q, want not a repository", got)
	}
	for _, dir := range []string{e.project, filepath.Join(e.project, "sub")} {
		cmd := exec.Command("git", "status")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_CEILING_DIRECTORIES="+filepath.Dir(e.project))
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Errorf("the person's git status in %s found a repository: %s", dir, out)
		}
	}
	if ran() {
		t.Fatal("the person's git ran a program a server wrote into a repository it made")
	}
	_ = c.Close()
	// A HEAD beside it: the placeholder stays, and git still runs nothing.
	if !gitplaceholder.IsFile(dotGit) {
		t.Fatal("the placeholder was removed at the stop with a HEAD beside it")
	}
	if _, err := personsGit("status"); err == nil || ran() {
		t.Fatalf("after the stop the person's git took the project for a repository (ran: %v)", ran())
	}
	// The control: without the placeholder the same files are a
	// repository, and git runs the program.
	if err := os.Remove(dotGit); err != nil {
		t.Fatal(err)
	}
	_, _ = personsGit("status")
	if !ran() {
		t.Fatal("control: git ran nothing with the placeholder taken away: the test proves nothing")
	}
	for _, f := range []string{"HEAD", "config", "objects", "refs"} {
		if err := os.RemoveAll(filepath.Join(e.project, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}

	// The person's own repository while the host runs: rm .git && git
	// init. The servers restart to bind it read-only, and it stays when
	// the host stops.
	c, _ = mcpClient(t, e)
	defer func() { _ = c.Close() }()
	initialize(t, c)
	// Servers start lazily now that their manifests are known: a call
	// starts bash, and its sandbox brings the placeholder.
	home := bash(c, "echo $HOME END")
	if !gitplaceholder.IsFile(dotGit) {
		t.Fatal("no placeholder at the second start")
	}
	// A command of the agent's waits for the repository the person makes
	// and writes into its config at once (red team round 12). The servers
	// whose sandboxes bound the placeholder stop as soon as it goes.
	job := fmt.Sprintf(`while ! [ -f .git/config ]; do :; done; printf '%s' >> .git/config; echo WROTE > wrote.txt`, fsmonitor)
	if out, _ := mustCall(t, c, "bash__start", map[string]any{"command": job}); !strings.Contains(out, "job") {
		t.Fatalf("bash__start: %q", out)
	}
	if err := os.Remove(dotGit); err != nil {
		t.Fatal(err)
	}
	// The person's next command, a moment later (half a second: a
	// person's next command at a prompt; the host stops the servers
	// whose sandboxes bound the placeholder within its 100 ms settle, but
	// a loaded CI machine may take longer to run them down).
	time.Sleep(500 * time.Millisecond)
	if out, err := personsGit("init", "-q"); err != nil {
		t.Fatalf("the person's git init: %v %s", err, out)
	}
	// bash's sandbox is made afresh (a new private HOME) once the host
	// has seen the move.
	deadline := time.Now().Add(time.Minute)
	for i := 0; ; i++ {
		// While it restarts, a call is refused ("bash is starting").
		now, _ := mustCall(t, c, "bash__run", map[string]any{"command": fmt.Sprintf("echo $HOME END %d", i)})
		if strings.Contains(now, "END") && !strings.HasPrefix(now, strings.TrimSuffix(home, "\n")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bash was not restarted after the placeholder was moved: %q", now)
		}
		time.Sleep(100 * time.Millisecond)
	}
	out = bash(c, fmt.Sprintf(`printf '%s' >> .git/config 2>&1; echo END`, fsmonitor))
	if _, err := personsGit("status"); err != nil || ran() {
		t.Fatalf("the person's repository: git status %v, ran %v (bash: %q)", err, ran(), out)
	}
	if _, err := os.Stat(filepath.Join(e.project, "wrote.txt")); err == nil {
		t.Fatal("the agent's waiting command wrote into the person's new repository")
	}
	_ = c.Close()
	if gone() {
		t.Fatal("the host removed the repository the person made")
	}
	if out, err := personsGit("status"); err != nil {
		t.Errorf("the person's repository after the host stopped: %v %s", err, out)
	}
}

// TestLinkedWorkTreesGitFileStays: a project that is a linked work tree
// (git worktree add), or a submodule checked out as the project, has a
// .git file naming its git folder. Rewritten to name a repository of the
// agent's, the person's next `git status` there ran what its config
// names. The file is bound read-only.
func TestLinkedWorkTreesGitFileStays(t *testing.T) {
	e := setup(t)
	marker := filepath.Join(t.TempDir(), "ran")
	main := t.TempDir()
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.email=p@example.com", "-c", "user.name=P"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git(main, "init", "-q")
	git(main, "commit", "-q", "--allow-empty", "-m", "main")
	linked := filepath.Join(e.project, "..", "linked")
	git(main, "worktree", "add", "-q", linked)
	// The linked work tree is the project.
	cfg := "project_dir = \"linked\"\ndata_dir = \"state\"\nstart_wait = \"2m\"\nbuiltin \"bash\" {}\npermissions { default = \"allow\" }\n"
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(linked, ".git"))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := mcpClient(t, e)
	initialize(t, c)
	script := fmt.Sprintf(`git init -q evil; printf '[core]\n\tfsmonitor = "touch %s; false"\n' >> evil/.git/config
printf 'gitdir: evil/.git\n' > .git; rm -f .git; printf 'gitdir: evil/.git\n' > .git
echo changed > other.txt; echo END`, marker)
	out, _ := mustCall(t, c, "bash__run", map[string]any{"command": "echo " + base64.StdEncoding.EncodeToString([]byte(script)) + " | base64 -d | sh"})
	if !strings.Contains(out, "END") {
		t.Fatalf("the command did not run: %q", out)
	}
	if b, err := os.ReadFile(filepath.Join(linked, "other.txt")); err != nil || string(b) != "changed\n" {
		t.Fatalf("control: bash could not write the project (%q, %v); it said %q", b, err, out)
	}
	if after, _ := os.ReadFile(filepath.Join(linked, ".git")); string(after) != string(before) {
		t.Errorf("the project's .git file was rewritten: %q", after)
	}
	git(linked, "status")
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the person's git status ran a program a server wrote into a repository of its own")
	}
}

// TestPlaceholderOutlivesAnotherHostsStop: two hosts on one project share
// its .git placeholder. One that stops does not remove it while the other's
// sandboxes bind it (removing the file takes their read-only mount away,
// and a server of the other host could then make the repository: red
// team round 11, with another user's host), and the last to stop removes
// it: `switchboard call` run twice in a row left it behind, since a host
// stopped a moment before counted as running.
func TestPlaceholderOutlivesAnotherHostsStop(t *testing.T) {
	e := setup(t)
	dotGit := filepath.Join(e.project, ".git")
	cfg := "project_dir = \"project\"\ndata_dir = \"state\"\nstart_wait = \"2m\"\nbuiltin \"bash\" {}\npermissions { default = \"allow\" }\n"
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	present := func() bool {
		_, err := os.Lstat(dotGit)
		return err == nil
	}
	for i := range 2 {
		if out, errOut, code := run(t, e, "call", "--config", e.config, "bash.run", fmt.Sprintf(`{"command":"echo %d"}`, i)); code != 0 {
			t.Fatalf("call: %d %s %s", code, out, errOut)
		}
		if present() {
			t.Fatalf("call %d left the placeholder behind", i)
		}
	}

	c, _ := mcpClient(t, e)
	initialize(t, c)
	if out, isErr := mustCall(t, c, "bash__run", map[string]any{"command": "echo up"}); isErr {
		t.Fatalf("bash: %s", out)
	}
	if !gitplaceholder.IsFile(dotGit) {
		t.Fatal("no placeholder while the host runs")
	}
	if out, errOut, code := run(t, e, "call", "--config", e.config, "bash.run", `{"command":"echo other"}`); code != 0 {
		t.Fatalf("the other host's call: %d %s %s", code, out, errOut)
	}
	if !gitplaceholder.IsFile(dotGit) {
		t.Fatal("the other host's stop removed the placeholder the first host's sandbox binds")
	}
	out, _ := mustCall(t, c, "bash__run", map[string]any{"command": "mkdir .git 2>&1; git init -q 2>&1; rm -f .git 2>&1; echo END"})
	if !gitplaceholder.IsFile(dotGit) {
		t.Fatalf("bash replaced the placeholder after the other host stopped: %q", out)
	}
	_ = c.Close()
	if present() {
		t.Error("the last host to stop left the placeholder behind")
	}
}

// TestAnotherHostsFilesOutOfReach: with one host's project inside
// another's, the outer host's bash wrote the inner host's config (an
// external server with its sandbox off ran at that host's next start) and
// filled its .git placeholder (red team round 11). A host's sandboxes now
// hide the config, lock file and .mcp.json of the other running hosts, and
// bind their placeholders read-only, where its servers may write them:
// at each start, and, for a host started later, after restarting its
// servers. The control: the outer host's bash writes the inner project's
// other files.
func TestAnotherHostsFilesOutOfReach(t *testing.T) {
	for _, order := range []string{"inner first", "outer first"} {
		t.Run(order, func(t *testing.T) {
			e := setup(t)
			base := t.TempDir()
			outer := filepath.Join(base, "outer")
			inner := filepath.Join(outer, "proj")
			if err := os.MkdirAll(filepath.Join(inner, ".switchboard"), 0o755); err != nil {
				t.Fatal(err)
			}
			in, out := e, e
			in.config = filepath.Join(inner, ".switchboard", "a.hcl")
			out.config = filepath.Join(base, "b.hcl")
			// A plugin binary of the inner host's inside its project.
			hello, err := os.ReadFile(e.bins.Hello)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(inner, "bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(inner, "bin", "switchboard-plugin-hello"), hello, 0o755); err != nil { //nolint:gosec // G306: an executable
				t.Fatal(err)
			}
			innerCfg := fmt.Sprintf("project_dir = \"..\"\ndata_dir = %q\nbuiltin \"bash\" {}\nplugin \"hello\" {\n  path = \"../bin/switchboard-plugin-hello\"\n  start = \"lazy\"\n}\npermissions { default = \"allow\" }\n", filepath.Join(base, "stateA"))
			outerCfg := fmt.Sprintf("project_dir = %q\ndata_dir = %q\nbuiltin \"bash\" {}\npermissions { default = \"allow\" }\n", outer, filepath.Join(base, "stateB"))
			for f, body := range map[string]string{in.config: innerCfg, out.config: outerCfg} {
				if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			start := func(e env) *client.Client {
				c, _ := mcpClient(t, e)
				t.Cleanup(func() { _ = c.Close() })
				initialize(t, c)
				return c
			}
			home := func(c *client.Client, i int) string {
				got, _ := mustCall(t, c, "bash__run", map[string]any{"command": fmt.Sprintf("echo $HOME END %d", i)})
				h, _, _ := strings.Cut(got, " END")
				return h
			}
			var ci, co *client.Client
			if order == "inner first" {
				ci = start(in)
				home(ci, 0)
				co = start(out)
				home(co, 0)
			} else {
				co = start(out)
				before := home(co, 0)
				ci = start(in)
				home(ci, 0)
				// The outer host restarts its bash to cover the inner
				// host's files.
				deadline := time.Now().Add(time.Minute)
				for i := 1; ; i++ {
					if h := home(co, i); h != before && !strings.Contains(h, "starting") && h != "" {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("the outer host did not restart its bash once the inner host ran")
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
			if !gitplaceholder.IsFile(filepath.Join(inner, ".git")) {
				t.Fatal("no placeholder in the inner project")
			}
			script := fmt.Sprintf(`cd %s; echo 'external "x" { command = "/bin/true" }' >> .switchboard/a.hcl 2>/dev/null
echo filled > .git 2>/dev/null; rm -f .git 2>/dev/null; mkdir .git 2>/dev/null
mv bin/switchboard-plugin-hello bin/.old 2>/dev/null; echo agent > bin/switchboard-plugin-hello 2>/dev/null; mv bin bin2 2>/dev/null
echo kept > other.txt; cat .switchboard/a.hcl; echo END`, inner)
			// The outer host may restart its bash more than once as the
			// inner host settles (its other-host check and its git
			// protection run on separate rounds): a call refused while
			// bash starts ran nothing, and is made again.
			var got string
			for deadline := time.Now().Add(time.Minute); ; {
				got, _ = mustCall(t, co, "bash__run", map[string]any{"command": "echo " + base64.StdEncoding.EncodeToString([]byte(script)) + " | base64 -d | sh"})
				if !strings.Contains(got, "is starting; try again") || time.Now().After(deadline) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if b, err := os.ReadFile(filepath.Join(inner, "other.txt")); err != nil || string(b) != "kept\n" {
				t.Fatalf("control: the outer host's bash could not write the inner project (%q, %v): %q", b, err, got)
			}
			if b, _ := os.ReadFile(in.config); string(b) != innerCfg {
				t.Errorf("the outer host's bash changed the inner host's config: %q", b)
			}
			if strings.Contains(got, "project_dir") {
				t.Errorf("the outer host's bash read the inner host's config: %q", got)
			}
			if !gitplaceholder.IsFile(filepath.Join(inner, ".git")) {
				t.Error("the outer host's bash changed the inner host's placeholder")
			}
			if b, err := os.ReadFile(filepath.Join(inner, "bin", "switchboard-plugin-hello")); err != nil || !bytes.Equal(b, hello) {
				t.Errorf("the outer host's bash replaced the inner host's plugin binary (%d bytes, %v)", len(b), err)
			}
			// The inner host stops: its placeholder stays while the outer
			// host's servers may write the folder (red team round 13: it
			// was removed, and a job of the outer host's waiting for that
			// made a repository there, with an fsmonitor in its config).
			_ = ci.Close()
			dot := filepath.Join(inner, ".git")
			if !gitplaceholder.IsFile(dot) {
				t.Fatal("the inner host's stop removed its placeholder while the outer host's bash may write the folder")
			}
			got, _ = mustCall(t, co, "bash__run", map[string]any{"command": "cd " + inner + "; rm -f .git 2>&1; mkdir .git 2>&1; git init -q 2>&1; echo END"})
			if !gitplaceholder.IsFile(dot) {
				t.Fatalf("the outer host's bash replaced the stopped inner host's placeholder: %q", got)
			}
			_ = co.Close()
			if _, err := os.Lstat(dot); err == nil {
				t.Error("the last host to stop left the inner host's placeholder behind")
			}
		})
	}
}

// TestLinkedWorkTreeInsideTheProject: a linked work tree of the project's
// repository inside the project (git worktree add wt) had its .git file
// writable, and one naming a repository of the agent's had the person's
// `git status` there run that repository's config; and the repository's
// relative core.hooksPath, as git resolves it in the linked work tree
// (wt/.husky), was writable too (red team round 12). Both are read-only;
// the controls: bash writes the work tree's other files, and the same
// commands outside the sandbox do make git run the programs.
func TestLinkedWorkTreeInsideTheProject(t *testing.T) {
	e := setup(t)
	marker, hookMarker := filepath.Join(t.TempDir(), "ran"), filepath.Join(t.TempDir(), "hook-ran")
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.email=p@example.com", "-c", "user.name=P"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git(e.project, "init", "-q")
	git(e.project, "config", "core.hooksPath", ".husky")
	git(e.project, "add", "notes.txt")
	git(e.project, "commit", "-q", "-m", "first")
	git(e.project, "worktree", "add", "-q", "wt")
	wt := filepath.Join(e.project, "wt")
	cfg := "project_dir = \"project\"\ndata_dir = \"state\"\nstart_wait = \"2m\"\nbuiltin \"bash\" {}\npermissions { default = \"allow\" }\n"
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	hookScript := fmt.Sprintf(`cd %s; mkdir -p .husky; printf '#!/bin/sh\ntouch %s\n' > .husky/pre-commit; chmod +x .husky/pre-commit`, wt, hookMarker)
	gitScript := fmt.Sprintf(`cd %s; echo kept > other.txt
git init -q --bare ../.cache/g && git --git-dir=../.cache/g config core.bare false &&
git --git-dir=../.cache/g config core.fsmonitor "touch %s; false" && echo "gitdir: %s" > .git
echo END`, wt, marker, filepath.Join(e.project, ".cache", "g"))
	c, _ := mcpClient(t, e)
	initialize(t, c)
	out, _ := mustCall(t, c, "bash__run", map[string]any{"command": "echo " + base64.StdEncoding.EncodeToString([]byte(hookScript+"\n"+gitScript)) + " | base64 -d | sh"})
	if b, err := os.ReadFile(filepath.Join(wt, "other.txt")); err != nil || string(b) != "kept\n" {
		t.Fatalf("control: bash could not write the linked work tree (%q, %v): %q", b, err, out)
	}
	git(wt, "status")
	git(wt, "commit", "-q", "--allow-empty", "-m", "person's")
	if _, err := os.Stat(marker); err == nil {
		t.Error("the person's git status in the linked work tree ran a program a server wrote")
	}
	if _, err := os.Stat(hookMarker); err == nil {
		t.Error("the person's commit in the linked work tree ran a hook a server wrote")
	}
	_ = c.Close()
	// The controls: the same commands outside any sandbox.
	for _, script := range []string{hookScript, gitScript} {
		if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
			t.Fatalf("control: %v %s", err, out)
		}
		if script == hookScript {
			git(wt, "commit", "-q", "--allow-empty", "-m", "person's again")
		}
	}
	git(wt, "status")
	for _, m := range []string{hookMarker, marker} {
		if _, err := os.Stat(m); err != nil {
			t.Fatalf("control: %s was not made outside the sandbox: the test proves nothing", m)
		}
	}
}

// TestGitlinkRepositoriesStay: a submodule added from a repository already
// in the work tree ("Adding existing repo at …"), or a repository
// committed inside another as a gitlink, keeps its git folder in its work
// tree; the person's `git status` in the superproject enters it and runs
// what its config names, and that folder was writable (red team round
// 12), also from a host whose project_dir is a folder of the
// superproject. Both are read-only now; the control: the same write
// outside the sandbox makes the person's git run the program.
func TestGitlinkRepositoriesStay(t *testing.T) {
	for _, projectDir := range []string{"project", "project/pkg"} {
		t.Run(projectDir, func(t *testing.T) {
			e := setup(t)
			git := func(dir string, args ...string) {
				t.Helper()
				cmd := exec.Command("git", append([]string{"-c", "protocol.file.allow=always", "-c", "user.email=p@example.com", "-c", "user.name=P"}, args...)...)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
			}
			git(e.project, "init", "-q")
			for _, r := range []string{"pkg/vend", "pkg/emb"} {
				d := filepath.Join(e.project, r)
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
				git(d, "init", "-q")
				if err := os.WriteFile(filepath.Join(d, "f"), []byte(r), 0o644); err != nil {
					t.Fatal(err)
				}
				git(d, "add", "f")
				git(d, "commit", "-q", "-m", r)
			}
			git(e.project, "submodule", "add", "-q", "./pkg/vend", "pkg/vend")
			git(e.project, "add", "pkg/emb") // an embedded repository, as a gitlink
			git(e.project, "commit", "-q", "-m", "with both")
			cfg := fmt.Sprintf("project_dir = %q\ndata_dir = \"state\"\nstart_wait = \"2m\"\nbuiltin \"bash\" {}\npermissions { default = \"allow\" }\n", projectDir)
			if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			marker := filepath.Join(t.TempDir(), "ran")
			script := fmt.Sprintf(`cd %s; echo kept > pkg/vend/other.txt
for r in vend emb; do printf '[core]\n\tfsmonitor = "touch %s-%%s; false"\n' $r >> pkg/$r/.git/config; done; echo END`, e.project, marker)
			c, _ := mcpClient(t, e)
			initialize(t, c)
			out, _ := mustCall(t, c, "bash__run", map[string]any{"command": "echo " + base64.StdEncoding.EncodeToString([]byte(script)) + " | base64 -d | sh"})
			if b, err := os.ReadFile(filepath.Join(e.project, "pkg", "vend", "other.txt")); err != nil || string(b) != "kept\n" {
				t.Fatalf("control: bash could not write the submodule's files (%q, %v): %q", b, err, out)
			}
			_ = c.Close()
			git(e.project, "status")
			for _, r := range []string{"vend", "emb"} {
				if _, err := os.Stat(marker + "-" + r); err == nil {
					t.Errorf("the person's git status ran a program a server wrote into %s's git folder", r)
				}
			}
			if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
				t.Fatalf("control: %v %s", err, out)
			}
			git(e.project, "status")
			for _, r := range []string{"vend", "emb"} {
				if _, err := os.Stat(marker + "-" + r); err != nil {
					t.Errorf("control: %s's program did not run after the same write outside the sandbox: the test proves nothing", r)
				}
			}
		})
	}
}

// TestIncludedConfigStays: a repository whose config includes files in
// the work tree (a project's documented `git config include.path
// ../.gitconfig`, an includeIf) had them writable, and an fsmonitor a
// server wrote there ran at the person's next `git status` (red team
// round 13); so did a core.hooksPath set in an included file. Included
// files are read-only to every server, one that does not exist yet is
// made empty first, and the hooks path an included file names is
// protected like the config's own; the controls: bash writes the work
// tree's other files, and the same writes outside the sandbox make git
// run the program.
func TestIncludedConfigStays(t *testing.T) {
	e := setup(t)
	marker := filepath.Join(t.TempDir(), "ran")
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.email=p@example.com", "-c", "user.name=P"}, args...)...)
		cmd.Dir = e.project
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	if err := os.MkdirAll(filepath.Join(e.project, "tools"), 0o755); err != nil {
		t.Fatal(err)
	}
	for f, body := range map[string]string{".gitconfig": "[core]\n\tautocrlf = false\n", "tools/git.inc": "[core]\n\thooksPath = .githooks ; the project's hooks\n"} {
		if err := os.WriteFile(filepath.Join(e.project, f), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("config", "include.path", "../.gitconfig")
	git("config", "includeIf.gitdir:/.path", "../tools/git.inc")
	git("config", "--add", "include.path", "../later.inc") // not there yet
	git("add", "notes.txt")
	git("commit", "-q", "-m", "first")
	cfg := "project_dir = \"project\"\ndata_dir = \"state\"\nstart_wait = \"2m\"\nbuiltin \"bash\" {}\npermissions { default = \"allow\" }\n"
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`for f in .gitconfig tools/git.inc later.inc; do printf '[core]\n\tfsmonitor = "touch %s; false"\n' >> $f; done
mkdir -p .githooks; printf '#!/bin/sh\ntouch %s\n' > .githooks/pre-commit; chmod +x .githooks/pre-commit
echo kept > other.txt; echo END`, marker, marker)
	c, _ := mcpClient(t, e)
	initialize(t, c)
	out, _ := mustCall(t, c, "bash__run", map[string]any{"command": "echo " + base64.StdEncoding.EncodeToString([]byte(script)) + " | base64 -d | sh 2>&1"})
	if b, err := os.ReadFile(filepath.Join(e.project, "other.txt")); err != nil || string(b) != "kept\n" {
		t.Fatalf("control: bash could not write the project (%q, %v): %q", b, err, out)
	}
	git("status")
	git("commit", "-q", "--allow-empty", "-m", "person's")
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("the person's git ran a program a server wrote into an included config or the hooks path it names: %q", out)
	}
	_ = c.Close()
	// The control: the same script outside any sandbox.
	if out, err := exec.Command("sh", "-c", "cd "+e.project+"; "+script).CombinedOutput(); err != nil {
		t.Fatalf("control: %v %s", err, out)
	}
	git("status")
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("control: git did not run the included fsmonitor outside the sandbox: the test proves nothing")
	}
}

// TestGitStructuresAddedWhileServersRun: what the person's git runs from
// was decided when a sandbox started, so a submodule the person added
// while the host ran had its .git file writable (the agent pointed it at
// a repository of its own, and the person's `git status` in the project
// ran its fsmonitor), and so had a linked work tree's .git file and the
// folder a new core.hooksPath names (husky init: a hook written there ran
// at the person's next commit; red team round 13). The host watches the
// repository's git folder and restarts the servers that may write what
// was added; the test waits for bash to see the three read-only, then
// writes them through bash and runs git as the person; the controls: the
// same writes outside the sandbox make git run the programs.
func TestGitStructuresAddedWhileServersRun(t *testing.T) {
	e := setup(t)
	marker := filepath.Join(t.TempDir(), "ran")
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.email=p@example.com", "-c", "user.name=P", "-c", "protocol.file.allow=always"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	src := filepath.Join(t.TempDir(), "src")
	git(filepath.Dir(src), "init", "-q", src)
	git(src, "commit", "-q", "--allow-empty", "-m", "lib")
	git(e.project, "init", "-q")
	git(e.project, "add", "notes.txt")
	git(e.project, "commit", "-q", "-m", "first")
	cfg := "project_dir = \"project\"\ndata_dir = \"state\"\nstart_wait = \"2m\"\nduplicate_call_limit = 0\nbuiltin \"bash\" {}\npermissions { default = \"allow\" }\n"
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := mcpClient(t, e)
	initialize(t, c)
	bash := func(script string) string {
		res, err := callTool(t.Context(), c, "bash__run", map[string]any{"command": "echo " + base64.StdEncoding.EncodeToString([]byte(script)) + " | base64 -d | sh 2>&1"}, nil)
		if err != nil {
			t.Fatalf("bash: %v", err)
		}
		return resultText(res)
	}
	if got := bash("echo up"); !strings.Contains(got, "up") {
		t.Fatalf("bash: %q", got)
	}
	// The person, while the host runs.
	git(e.project, "submodule", "add", "-q", src, "sub")
	git(e.project, "worktree", "add", "-q", "wt")
	git(e.project, "config", "core.hooksPath", ".husky")
	if err := os.MkdirAll(filepath.Join(e.project, ".husky"), 0o755); err != nil {
		t.Fatal(err)
	}
	check := `for f in sub/.git wt/.git .husky; do [ -w $f ] && echo "writable $f"; done; echo END`
	deadline := time.Now().Add(time.Minute)
	for {
		got := bash(check)
		if strings.Contains(got, "END") && !strings.Contains(got, "writable") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the person added them, bash may still write what the person's git runs from: %q", got)
		}
		time.Sleep(200 * time.Millisecond)
	}
	attack := fmt.Sprintf(`mkdir -p .cache; git init -q --bare .cache/g; git --git-dir=.cache/g config core.bare false
git --git-dir=.cache/g config core.fsmonitor "touch %s; false"
echo "gitdir: ../.cache/g" > sub/.git; echo "gitdir: ../.cache/g" > wt/.git
printf '#!/bin/sh\ntouch %s\n' > .husky/pre-commit; chmod +x .husky/pre-commit
echo kept > other.txt; echo END`, marker, marker)
	cd := "cd " + e.project + "; "
	out := bash(cd + attack)
	if b, err := os.ReadFile(filepath.Join(e.project, "other.txt")); err != nil || string(b) != "kept\n" {
		t.Fatalf("control: bash could not write the project (%q, %v): %q", b, err, out)
	}
	git(e.project, "status")
	git(filepath.Join(e.project, "wt"), "status")
	git(e.project, "commit", "-q", "--allow-empty", "-m", "person's")
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("the person's git ran a program a server wrote into what the person added while the host ran: %q", out)
	}
	_ = c.Close()
	// The control: the same writes outside any sandbox.
	if out, err := exec.Command("sh", "-c", cd+attack).CombinedOutput(); err != nil {
		t.Fatalf("control: %v %s", err, out)
	}
	git(e.project, "commit", "-q", "--allow-empty", "-m", "person's again")
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("control: git ran nothing the script wrote outside the sandbox: the test proves nothing")
	}
}

// TestGitPathsTheAgentCouldRedirect: red team round 14 found what the
// person's git runs from where the host did not look or could not bind:
// a .git that is a symbolic link (no protection at all: `rm .git && git
// init` and an fsmonitor), an include or hooks folder reached through a
// link (re-pointed), the hooks path and includes of config.worktree, a
// relative core.hooksPath in the person's global config, an include in
// a folder that did not exist, and the includes of a config over 1 MiB.
// Each case sets the repository up as the person would, lets bash try,
// and runs git as the person; a sandbox that cannot protect a link
// refuses to start (the error says how to fix it). The control for each:
// the same script outside any sandbox makes git run the program.
func TestGitPathsTheAgentCouldRedirect(t *testing.T) {
	fsmon := func(m string) string { return fmt.Sprintf(`printf '[core]\n\tfsmonitor = "touch %s; false"\n'`, m) }
	hook := func(dir, m string) string {
		return fmt.Sprintf(`mkdir -p %s; printf '#!/bin/sh\ntouch %s\n' > %s/pre-commit; chmod +x %s/pre-commit`, dir, m, dir, dir)
	}
	for _, tc := range []struct {
		name    string
		setup   []string // shell lines run by the person before the host starts
		attack  func(marker string) string
		refused bool // the servers cannot start: a link they could re-point
	}{
		{
			"a .git link",
			[]string{"mv .git ../store.git", "ln -s ../store.git .git"},
			func(m string) string { return "rm -f .git && git init -q . && " + fsmon(m) + " >> .git/config" }, true,
		},
		{
			"an include through a link",
			[]string{"echo '[core]' > real.gitconfig", "ln -s real.gitconfig link.gitconfig", "git config include.path ../link.gitconfig"},
			func(m string) string {
				return fsmon(m) + " > evil.gitconfig; rm link.gitconfig; ln -s evil.gitconfig link.gitconfig"
			}, true,
		},
		{
			"a hooks folder through a link",
			[]string{"mkdir -p tools/hooks", "ln -s tools/hooks .husky", "git config core.hooksPath .husky"},
			func(m string) string { return "rm .husky; " + hook(".husky", m) }, true,
		},
		{
			"config.worktree",
			[]string{"git config extensions.worktreeConfig true", "git config --worktree core.hooksPath .wthooks", "git config --worktree include.path ../wtinc.gitconfig"},
			func(m string) string { return hook(".wthooks", m) + "; " + fsmon(m) + " >> wtinc.gitconfig" }, false,
		},
		{
			"a global hooks path",
			[]string{"printf '[core]\\n\\thooksPath = .githooks\\n' > \"$HOME/.gitconfig\""},
			func(m string) string { return hook(".githooks", m) }, false,
		},
		{
			"an include in a missing folder",
			[]string{"git config --add include.path ../nodir/x.gitconfig"},
			func(m string) string { return "mkdir -p nodir; " + fsmon(m) + " > nodir/x.gitconfig" }, false,
		},
		// Round 15: links outside the project that lead into it (a
		// dotfiles repository), and programs the config names by path.
		{
			"a global config that is a link into the project",
			[]string{`echo '[user]' > gitconfig`, `ln -s "$PWD/gitconfig" "$HOME/.gitconfig"`},
			func(m string) string { return fsmon(m) + " >> gitconfig" }, false,
		},
		{
			"a global include through a link outside",
			[]string{`ln -s "$PWD" "$HOME/p"`, `printf '[include]\n\tpath = ~/p/team.gitconfig\n' > "$HOME/.gitconfig"`, `echo '[core]' > team.gitconfig`},
			func(m string) string { return fsmon(m) + " >> team.gitconfig" }, false,
		},
		{
			"a global hooks path through a link outside",
			[]string{"mkdir .githooks", `ln -s "$PWD/.githooks" "$HOME/hooks"`, `printf '[core]\n\thooksPath = ~/hooks\n' > "$HOME/.gitconfig"`},
			func(m string) string { return hook(".githooks", m) }, false,
		},
		{
			"an fsmonitor program in the work tree",
			[]string{"mkdir .tools", `printf '#!/bin/sh\nexit 1\n' > .tools/fsmon`, "chmod +x .tools/fsmon", "git config core.fsmonitor .tools/fsmon"},
			func(m string) string { return fmt.Sprintf(`printf '#!/bin/sh\ntouch %s\nexit 1\n' > .tools/fsmon`, m) }, false,
		},
		{
			"a filter program in the work tree",
			[]string{"mkdir scripts", `printf '#!/bin/sh\ncat\n' > scripts/fmt`, "chmod +x scripts/fmt", "git config filter.fmt.clean ./scripts/fmt"},
			func(m string) string {
				return fmt.Sprintf(`printf '#!/bin/sh\ntouch %s\ncat\n' > scripts/fmt; echo '* filter=fmt' > .gitattributes; echo x > a.txt`, m)
			}, false,
		},
		// Round 16: other forms of naming a program, and other work trees.
		{
			"a program named after sh",
			[]string{"mkdir .tools", `printf '#!/bin/sh\nexit 1\n' > .tools/fsmon`, `git config core.fsmonitor "sh .tools/fsmon"`},
			func(m string) string { return fmt.Sprintf(`printf '#!/bin/sh\ntouch %s\nexit 1\n' > .tools/fsmon`, m) }, false,
		},
		{
			"a program not there yet",
			[]string{"git config core.fsmonitor ./later/fsmon"},
			func(m string) string {
				return fmt.Sprintf(`mkdir -p later; printf '#!/bin/sh\ntouch %s\nexit 1\n' > later/fsmon; chmod +x later/fsmon`, m)
			}, false,
		},
		{
			"a linked work tree's program",
			[]string{"mkdir .tools", `printf '#!/bin/sh\nexit 1\n' > .tools/fsmon`, "chmod +x .tools/fsmon", "git add .tools && git -c user.email=p@example.com -c user.name=P commit -qm tools", "git worktree add -q wt", "git config core.fsmonitor .tools/fsmon"},
			func(m string) string {
				return fmt.Sprintf(`printf '#!/bin/sh\ntouch %s\nexit 1\n' > wt/.tools/fsmon`, m)
			}, false,
		},
		{
			"a submodule's program",
			[]string{`s=$(mktemp -d) && git init -q "$s" && mkdir "$s/.tools" && printf '#!/bin/sh\nexit 1\n' > "$s/.tools/fsmon" && chmod +x "$s/.tools/fsmon" && git -C "$s" add .tools && git -C "$s" -c user.email=p@example.com -c user.name=P commit -qm t && git -c protocol.file.allow=always submodule add -q "$s" sub`, "git -C sub config core.fsmonitor .tools/fsmon"},
			func(m string) string {
				return fmt.Sprintf(`printf '#!/bin/sh\ntouch %s\nexit 1\n' > sub/.tools/fsmon`, m)
			}, false,
		},
		{
			"a global config's filter program",
			[]string{"mkdir tools", `printf '#!/bin/sh\ncat\n' > tools/gclean`, "chmod +x tools/gclean", `printf '[filter "g"]\n\tclean = ./tools/gclean\n' > "$HOME/.gitconfig"`, "echo '*.g filter=g' > .gitattributes"},
			func(m string) string {
				return fmt.Sprintf(`printf '#!/bin/sh\ntouch %s\ncat\n' > tools/gclean; echo a >> x.g`, m)
			}, false,
		},
		// Round 18: a program path that is a link to nothing yet, and
		// programs named through shell forms.
		{
			"a program through a link to nothing yet",
			[]string{"ln -s tools/fsmon-built fsmon", "git config core.fsmonitor ./fsmon"},
			func(m string) string {
				return fmt.Sprintf(`mkdir -p tools; printf '#!/bin/sh\ntouch %s\nexit 1\n' > tools/fsmon-built; chmod +x tools/fsmon-built`, m)
			}, true,
		},
		{
			"a program after the top's substitution",
			[]string{"mkdir scripts", `printf '#!/bin/sh\nexit 1\n' > scripts/fsmon.sh`, "chmod +x scripts/fsmon.sh", `git config core.fsmonitor '"$(git rev-parse --show-toplevel)/scripts/fsmon.sh"'`},
			func(m string) string {
				return fmt.Sprintf(`printf '#!/bin/sh\ntouch %s\nexit 1\n' > scripts/fsmon.sh`, m)
			}, false,
		},
		{
			"a filter program after a cd",
			[]string{"mkdir scripts", `printf '#!/bin/sh\ncat\n' > scripts/fmt.sh`, "chmod +x scripts/fmt.sh", `git config filter.fmt.clean 'cd scripts && ./fmt.sh'`},
			func(m string) string {
				return fmt.Sprintf(`printf '#!/bin/sh\ntouch %s\ncat\n' > scripts/fmt.sh; echo '* filter=fmt' > .gitattributes; echo x > a.txt`, m)
			}, false,
		},
		// Round 19: a script named bare after sh; a config with a byte
		// order mark; a value continued over two lines; a program run from
		// a folder the host cannot work out (refused); a key the host did
		// not know runs programs (remote.*.uploadpack, run by fetch).
		{
			"a script named bare after sh",
			[]string{`printf 'exit 1\n' > fsmon.sh`, `git config core.fsmonitor 'sh fsmon.sh'`},
			func(m string) string { return fmt.Sprintf(`printf 'touch %s\nexit 1\n' > fsmon.sh`, m) }, false,
		},
		{
			"a config with a byte order mark",
			[]string{"mkdir tools", `printf '\357\273\277[core]\n\tfsmonitor = sh tools/fsm.sh\n' > bom && cat .git/config >> bom && mv bom .git/config`},
			func(m string) string { return fmt.Sprintf(`printf 'touch %s\nexit 1\n' > tools/fsm.sh`, m) }, false,
		},
		{
			"a value continued over two lines",
			[]string{"mkdir tools", `printf '[core]\n\tfsmonitor = sh tools/\\\nfsm.sh\n' >> .git/config`},
			func(m string) string { return fmt.Sprintf(`printf 'touch %s\nexit 1\n' > tools/fsm.sh`, m) }, false,
		},
		{
			"a program in a folder the host cannot work out",
			[]string{"mkdir tools", `git config core.fsmonitor 'cd "$(echo tools)" && sh fsm.sh'`},
			func(m string) string { return fmt.Sprintf(`printf 'touch %s\nexit 1\n' > tools/fsm.sh`, m) }, true,
		},
		// Round 20: a NUL ends git's value; core.worktree moves where
		// relative programs and hooks are.
		{
			"a value with a NUL",
			[]string{`printf 'exit 1\n' > x.sh`, `printf '[core]\n\tfsmonitor = sh x.sh\000zzz\n' >> .git/config`},
			func(m string) string { return fmt.Sprintf(`printf 'touch %s\nexit 1\n' > x.sh`, m) }, false,
		},
		{
			"a work tree moved by core.worktree",
			[]string{"mkdir -p sub/.husky", `printf 'exit 1\n' > sub/x.sh`, "git config core.worktree ../sub", "git config core.fsmonitor 'sh x.sh'", "git config core.hooksPath .husky"},
			func(m string) string {
				return fmt.Sprintf(`printf 'touch %s\nexit 1\n' > sub/x.sh; printf '#!/bin/sh\ntouch %s\n' > sub/.husky/pre-commit; chmod +x sub/.husky/pre-commit`, m, m)
			}, false,
		},
		{
			"a script after an option that takes a value",
			[]string{`git config core.fsmonitor 'timeout -s KILL 5 sh -o errexit x.sh'`},
			func(m string) string { return fmt.Sprintf(`printf 'touch %s\nexit 1\n' > x.sh`, m) }, false,
		},
		{
			"a script named by a variable",
			[]string{`git config core.fsmonitor 'X=x.sh; sh $X'`},
			func(m string) string { return fmt.Sprintf(`printf 'touch %s\nexit 1\n' > x.sh`, m) }, true,
		},
		// Round 21: a launcher before the interpreter; a pipe into one.
		{
			"a script after a launcher",
			[]string{`git config core.fsmonitor 'setsid -w sh x.sh'`},
			func(m string) string { return fmt.Sprintf(`printf 'touch %s\nexit 1\n' > x.sh`, m) }, false,
		},
		{
			"a script piped into sh",
			[]string{`git config filter.f.clean 'cat x.sh | sh'`},
			func(m string) string {
				return fmt.Sprintf(`printf 'touch %s\ncat\n' > x.sh; echo '* filter=f' > .gitattributes; echo x > a.txt`, m)
			}, true,
		},
		// Round 22: a command string (eval) naming a script not there yet.
		{
			"a script in an eval'd command string",
			[]string{`git config filter.x.clean "eval 'sh x.sh'"`},
			func(m string) string {
				return fmt.Sprintf(`printf 'touch %s\ncat\n' > x.sh; echo '* filter=x' > .gitattributes; echo x > a.txt`, m)
			}, false,
		},
		{"an include of a device", []string{"git config --add include.path /dev/stdin"}, // servers start (round 18: none did)
			func(m string) string { return fsmon(m) + " >> .git/config" }, false},
		{
			"a config over 1 MiB",
			[]string{`i=0; while [ $i -lt 12000 ]; do printf '[remote "r%d"]\n\turl = https://example.com/a/very/long/path/to/some/repository/number/%d.git\n' $i $i; i=$((i+1)); done >> .git/config`, "git config --add include.path ../big.gitconfig"},
			func(m string) string { return fsmon(m) + " >> big.gitconfig" }, false,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			home := t.TempDir()
			marker := filepath.Join(t.TempDir(), "ran")
			envs := append(os.Environ(), "HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
			sh := func(script string) {
				t.Helper()
				cmd := exec.Command("sh", "-c", script)
				cmd.Dir = e.project
				cmd.Env = envs
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("%s: %v\n%s", script, err, out)
				}
			}
			git := func(args ...string) {
				t.Helper()
				cmd := exec.Command("git", append([]string{"-c", "user.email=p@example.com", "-c", "user.name=P"}, args...)...)
				cmd.Dir = e.project
				cmd.Env = envs
				_, _ = cmd.CombinedOutput() // the hooks and fsmonitor are the point, not git's verdict
			}
			sh("git init -q . && git -c user.email=p@example.com -c user.name=P commit -q --allow-empty -m first")
			for _, line := range tc.setup {
				sh(line)
			}
			cfg := "project_dir = \"project\"\ndata_dir = \"state\"\nstart_wait = \"2m\"\nduplicate_call_limit = 0\nbuiltin \"bash\" {}\npermissions { default = \"allow\" }\n"
			if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			c, _ := mcpClient(t, e, func(cmd *exec.Cmd) {
				cmd.Env = append(cmd.Env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
			})
			initialize(t, c)
			script := tc.attack(marker) + "; echo kept > other.txt; echo END"
			res, err := callTool(t.Context(), c, "bash__run", map[string]any{"command": "echo " + base64.StdEncoding.EncodeToString([]byte(script)) + " | base64 -d | sh 2>&1"}, nil)
			var out string
			switch {
			case err != nil:
				out = err.Error() // not listed: it could not start
			default:
				out = resultText(res)
			}
			if tc.refused {
				if err == nil && !res.IsError {
					t.Errorf("bash ran with a link it could re-point: %q", out)
				}
				// The refusal says what to do.
				if _, errOut, code := run(t, e, "call", "--config", e.config, "bash.run", `{"command":"echo hi"}`); code == 0 || !strings.Contains(errOut, "symbolic link") && !strings.Contains(errOut, "cannot work out") || !strings.Contains(errOut, "best-effort") {
					t.Errorf("switchboard call with the link: exit %d, %q; want a refusal naming the link and the fix", code, errOut)
				}
			} else if b, err := os.ReadFile(filepath.Join(e.project, "other.txt")); err != nil || string(b) != "kept\n" {
				t.Fatalf("control: bash could not write the project (%q, %v): %q", b, err, out)
			}
			git("status")
			git("-C", "wt", "status")
			git("add", "-A")
			git("commit", "-q", "--allow-empty", "-m", "person's")
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("the person's git ran a program a server wrote: %q", out)
			}
			_ = c.Close()
			sh(tc.attack(marker))
			git("status")
			git("-C", "wt", "status")
			git("add", "-A")
			git("commit", "-q", "--allow-empty", "-m", "person's again")
			if _, err := os.Stat(marker); err != nil {
				t.Fatal("control: the script outside the sandbox made git run nothing: the test proves nothing")
			}
		})
	}
}

// TestTooManyMissingIncludesRefused: a repository's config naming 20,000
// missing include files had the host make 20,000 empty files in the
// project before each start (red team round 18). A start that would make
// more than 100 is refused, says why and what to do, and makes none.
func TestTooManyMissingIncludesRefused(t *testing.T) {
	e := setup(t)
	var b strings.Builder
	b.WriteString("[core]\n\trepositoryformatversion = 0\n")
	for i := range 150 {
		fmt.Fprintf(&b, "[include]\n\tpath = ../w/%d.cfg\n", i)
	}
	cmd := exec.Command("git", "init", "-q", ".")
	cmd.Dir = e.project
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(e.project, ".git", "config"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := "project_dir = \"project\"\ndata_dir = \"state\"\nstart_wait = \"2m\"\nbuiltin \"filesystem\" {}\npermissions { default = \"allow\" }\n"
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := run(t, e, "call", "--config", e.config, "filesystem.list_directory", `{"path":"."}`)
	if code == 0 || !strings.Contains(errOut, "at most 100") || !strings.Contains(errOut, "best-effort") {
		t.Errorf("switchboard call: exit %d, %q; want a refusal saying how many files and what to do", code, errOut)
	}
	if made, _ := filepath.Glob(filepath.Join(e.project, "w", "*")); len(made) > 0 {
		t.Errorf("the refused start made %d files in the project", len(made))
	}
	// best-effort starts, unprotected, and makes none either.
	cfg = strings.Replace(cfg, "builtin \"filesystem\" {}", "builtin \"filesystem\" {\n  sandbox { mode = \"best-effort\" }\n}", 1)
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := run(t, e, "call", "--config", e.config, "filesystem.list_directory", `{"path":"."}`); code != 0 || !strings.Contains(out, "notes.txt") {
		t.Errorf("best-effort: exit %d, %q %q", code, out, errOut)
	}
	if made, _ := filepath.Glob(filepath.Join(e.project, "w", "*")); len(made) > 0 {
		t.Errorf("the best-effort start made %d files in the project", len(made))
	}
}

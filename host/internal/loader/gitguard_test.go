package loader

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/host/internal/sandbox"
	"github.com/switchboard-mcp/switchboard/internal/gitplaceholder"
)

// gitProtected finds the hooks and config of a work tree's repository,
// through a .git file (a linked work tree, whose common folder holds
// them), the folder core.hooksPath names, and submodules' repositories.
func TestGitProtected(t *testing.T) {
	write := func(p, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	main := filepath.Join(dir, "main")
	write(filepath.Join(main, ".git", "config"), "[core]\n\tbare = false\n[Core]\n\tHooksPath = \"tools/hooks\"\n")
	write(filepath.Join(main, ".git", "modules", "lib", "config"), "[core]\n\tworktree = ../../../lib\n\thooksPath = .husky\n")
	write(filepath.Join(main, "lib", ".git"), "gitdir: ../.git/modules/lib\n")
	write(filepath.Join(main, ".git", "modules", "lib", "modules", "deep", "config"), "")
	write(filepath.Join(main, ".git", "modules", "vendor", "x", "config"), "")
	// A linked work tree inside the project (git worktree add wt).
	write(filepath.Join(main, ".git", "worktrees", "wt", "gitdir"), filepath.Join(main, "wt", ".git")+"\n")
	write(filepath.Join(main, "wt", ".git"), "gitdir: "+filepath.Join(main, ".git", "worktrees", "wt")+"\n")
	linked := filepath.Join(dir, "linked")
	write(filepath.Join(main, ".git", "worktrees", "linked", "commondir"), "../..\n")
	write(filepath.Join(linked, ".git"), "gitdir: "+filepath.Join(main, ".git", "worktrees", "linked")+"\n")
	plain := filepath.Join(dir, "plain")
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	// A package of a monorepo: no .git of its own, inside a work tree.
	pkg := filepath.Join(main, "pkg")
	if err := os.Mkdir(pkg, 0o755); err != nil {
		t.Fatal(err)
	}

	ro, mk, mf := gitProtected([]string{main, plain, pkg})
	g := filepath.Join(main, ".git")
	want := []string{
		filepath.Join(g, "hooks"), filepath.Join(g, "config"), filepath.Join(main, "tools", "hooks"),
		filepath.Join(g, "modules", "lib", "hooks"), filepath.Join(g, "modules", "lib", "config"),
		filepath.Join(g, "modules", "lib", "modules", "deep", "hooks"), filepath.Join(g, "modules", "lib", "modules", "deep", "config"),
		filepath.Join(g, "modules", "vendor", "x", "hooks"), filepath.Join(g, "modules", "vendor", "x", "config"),
		filepath.Join(main, "lib", ".git"),   // the submodule's work tree's .git file
		filepath.Join(main, "lib", ".husky"), // the submodule's core.hooksPath
		filepath.Join(main, "wt", ".git"),    // a linked work tree's .git file
		filepath.Join(main, "wt", "tools", "hooks"),
	}
	for _, w := range want {
		if !slices.Contains(ro, w) {
			t.Errorf("%s is not read-only: %v", w, ro)
		}
	}
	if !slices.Contains(mk, filepath.Join(g, "hooks")) || !slices.Contains(mk, filepath.Join(main, "tools", "hooks")) || slices.Contains(mk, filepath.Join(g, "config")) {
		t.Errorf("folders made = %v, want the hooks folders (not the config file)", mk)
	}
	// A folder that is no work tree gets its .git placeholder, made and
	// read-only, and nothing else.
	for _, p := range ro {
		if (filepath.Dir(p) == plain || p == plain) && p != filepath.Join(plain, ".git") {
			t.Errorf("a folder that is no work tree got %s", p)
		}
	}
	// The placeholder is the file git refuses as a gitfile (an empty
	// folder had git take the folder itself for a repository); inside
	// another work tree, where git must go on up, an empty folder.
	if ph := filepath.Join(plain, ".git"); !slices.Contains(ro, ph) || !slices.Contains(mf, sandbox.File{Path: ph, Content: gitplaceholder.Content}) || slices.Contains(mk, ph) {
		t.Errorf("no placeholder file for a folder that is no work tree: read-only %v, files %v, folders %v", ro, mf, mk)
	}
	if ph := filepath.Join(pkg, ".git"); !slices.Contains(ro, ph) || !slices.Contains(mk, ph) {
		t.Errorf("no placeholder folder for a folder inside a work tree: read-only %v, folders %v", ro, mk)
	}
	if len(mf) != 1 {
		t.Errorf("placeholder files = %v, want the plain folder's alone", mf)
	}

	ro, _, _ = gitProtected([]string{linked})
	for _, w := range []string{filepath.Join(g, "hooks"), filepath.Join(g, "config"), filepath.Join(g, "worktrees", "linked", "config.worktree"), filepath.Join(linked, ".git")} {
		if !slices.Contains(ro, w) {
			t.Errorf("linked work tree: %s is not read-only: %v", w, ro)
		}
	}
}

// A FIFO where the guard reads a repository's files (a commondir, a
// config) does not hold the host: the agent made one, and the host's start
// waited in its open for ever (red team round 9).
func TestGitGuardDoesNotWaitOnFIFOs(t *testing.T) {
	dir := t.TempDir()
	project := filepath.Join(dir, "project")
	gd := filepath.Join(project, "gd")
	if err := os.MkdirAll(gd, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, ".git"), []byte("gitdir: "+gd+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(gd, "commondir"), filepath.Join(gd, "config")} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan []string, 1)
	go func() {
		ro, _, _ := gitProtected([]string{project})
		done <- ro
	}()
	select {
	case ro := <-done:
		if !slices.Contains(ro, filepath.Join(gd, "hooks")) {
			t.Errorf("the repository's hooks are not read-only: %v", ro)
		}
	case <-time.After(10 * time.Second):
		// Unblock the open so the goroutine ends.
		for _, f := range []string{filepath.Join(gd, "commondir"), filepath.Join(gd, "config")} {
			if w, err := os.OpenFile(f, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				_ = w.Close()
			}
		}
		t.Fatal("the git guard waited on a FIFO")
	}
}

// RemovePlaceholders removes the .git placeholders the host's sandboxes
// bound once it stops, those still as it made them: a placeholder the
// person replaced with a repository (rm .git && git init while the host
// ran) stays, and so do a .git file of the person's and an empty .git the
// host never used. An empty .git folder a host left where the placeholder
// is a file now is made the file, and removed with it; a placeholder
// folder inside a work tree is removed too. A placeholder file with a
// HEAD beside it stays (without it git would take the folder for a
// repository).
func TestRemovePlaceholders(t *testing.T) {
	dir := t.TempDir()
	var roots []string
	for _, name := range []string{"untouched", "filled", "empty-before", "repo/pkg", "bare"} {
		roots = append(roots, filepath.Join(dir, name))
		if err := os.MkdirAll(roots[len(roots)-1], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(roots[2], ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "repo", ".git", "objects"), 0o755); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other", ".git")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	persons := filepath.Join(dir, "persons")
	if err := os.Mkdir(persons, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(persons, ".git"), []byte("gitdir: /elsewhere\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, mk, mf := gitProtected(append(roots, persons))
	for _, m := range mk { // as the sandbox makes them
		if err := os.MkdirAll(m, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range mf {
		if err := os.WriteFile(f.Path, []byte(f.Content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if len(mf) != 4 || !slices.Contains(mk, filepath.Join(roots[3], ".git")) {
		t.Fatalf("placeholders: files %v, folders %v; want four files and the package's folder", mf, mk)
	}
	// A HEAD beside the placeholder (written while the host ran, with
	// objects/, refs/ and a config): the file stays.
	if err := os.WriteFile(filepath.Join(roots[4], "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The person's own repository in place of a placeholder.
	filled := filepath.Join(roots[1], ".git")
	if err := os.Remove(filled); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(filled, "objects"), 0o755); err != nil {
		t.Fatal(err)
	}
	RemovePlaceholders()
	for i, want := range []bool{false, true, false, false, true} {
		if _, err := os.Stat(filepath.Join(roots[i], ".git")); (err == nil) != want {
			t.Errorf("%s/.git exists = %v after the stop, want %v", roots[i], err == nil, want)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("an empty .git the host never used was removed: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(persons, ".git")); err != nil || string(b) != "gitdir: /elsewhere\n" {
		t.Errorf("the person's .git file after the stop: %q, %v", b, err)
	}
}

// A placeholder another host holds (its sandboxes bind it) is not removed:
// the kernel would take their read-only mount away with the file, and a
// server of that host could then make the repository (red team round 11:
// another user's host removed it at its stop, and one stopped a moment
// before counted as running, so placeholders were left behind).
func TestHeldPlaceholderStays(t *testing.T) {
	for _, file := range []bool{true, false} {
		dot := filepath.Join(t.TempDir(), ".git")
		var err error
		if file {
			err = os.WriteFile(dot, []byte(gitplaceholder.Content), 0o644)
		} else {
			err = os.Mkdir(dot, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
		other, err := os.Open(dot) // another host's hold
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(other.Fd()), syscall.LOCK_SH); err != nil {
			t.Fatal(err)
		}
		if removeUnheld(dot, file) {
			t.Errorf("file %v: a placeholder another host holds was removed", file)
		}
		_ = other.Close()
		if !removeUnheld(dot, file) {
			t.Errorf("file %v: a placeholder nobody holds stayed", file)
		}
		if _, err := os.Lstat(dot); err == nil {
			t.Errorf("file %v: still there", file)
		}
	}
}

func TestProgramFiles(t *testing.T) {
	top := t.TempDir()
	for _, f := range []string{
		"x", "tools/y", "z.sh", "scripts/s.sh", "scripts/sub/t.sh", "my dir/u", "fsmon.sh", "a6", "a7", "t/x.sh",
		"x.sh", "tools/x.sh", "tools/fsmon.py", "tools/fsmon.pm", "__main__.py", "x.awk", "x.sed", "x.py", "x.pl",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(top, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(top, f), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("tools/not-built", filepath.Join(top, "dangling")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("x", filepath.Join(top, "linked")); err != nil {
		t.Fatal(err)
	}
	for value, want := range map[string][]string{
		"./x":                       {"x"},
		"!./x --flag":               {"x"},
		`"./tools/y" arg`:           {"tools/y"},
		"FOO=1 ./x":                 {"x"},
		`sh -c './z.sh; ./tools/y'`: {"z.sh", "tools/y"},
		"env A=./x tools/y":         {"x", "tools/y"},
		"!$GIT_PREFIX./x":           {"x"},
		"!${GIT_PREFIX}tools/y":     {"tools/y"},
		"!f() { ./x; }; f":          {"x"},
		"./tools/*":                 {"tools/fsmon.pm", "tools/fsmon.py", "tools/x.sh", "tools/y"},
		// Red team round 18: a path glued to an expansion, after a cd, in
		// quotes next to a variable, with a backslash, after a redirection.
		`"$(git rev-parse --show-toplevel)/scripts/s.sh"`: {"scripts/s.sh"},
		"!$(git rev-parse --show-toplevel)/scripts/s.sh":  {"scripts/s.sh"},
		"!`git rev-parse --show-toplevel`/scripts/s.sh":   {"scripts/s.sh"},
		"cd scripts && ./s.sh":                            {"scripts/s.sh"},
		"!cd scripts/sub; ./t.sh":                         {"scripts/sub/t.sh"},
		"!cd scripts && cd sub && ./t.sh":                 {"scripts/sub/t.sh"},
		"!cd scripts && ../x":                             {"x"},
		`!cd "$(git rev-parse --show-toplevel)" && ./x`:   {"x"},
		`!"$GIT_PREFIX"scripts/s.sh`:                      {"scripts/s.sh"},
		`!scripts\/s.sh`:                                  {"scripts/s.sh"},
		"!${PWD}/scripts/s.sh":                            {"scripts/s.sh"},
		"!$PWD/x":                                         {"x"},
		"!bash<scripts/s.sh":                              {"scripts/s.sh"},
		"!bash < ./x > /dev/null":                         {"x"},
		`!sh -c 'exec scripts/s.sh'`:                      {"scripts/s.sh"},
		`!sh -c "cd scripts && ./s.sh"`:                   {"scripts/s.sh"},
		`"./my dir/u"`:                                    {"my dir/u"},
		"!$(echo ./x)":                                    {"x"},
		// Round 19: a script an interpreter runs, named bare; a redirection's
		// input; a default; braces; cd's options; env -C; what follows in
		// the word; a wrapper before the interpreter.
		"sh fsmon.sh":              {"fsmon.sh"},
		"!bash <fsmon.sh":          {"fsmon.sh"},
		"!cat fsmon.sh | sh":       {"fsmon.sh"},
		"!${X:-./a6}":              {"a6"},
		"!bash -c './a7{,}'":       {"a7"},
		"!cd -P scripts && ./s.sh": {"scripts/s.sh"},
		"!cd -- scripts && ./s.sh": {"scripts/s.sh"},
		"!env -C scripts ./s.sh":   {"scripts/s.sh"},
		"sh t/x${NOPE}.sh":         {"t/x.sh"},
		`!sh t/x.sh"$@"`:           {"t/x.sh"},
		"!sh t/x.sh$IFS":           {"t/x.sh"},
		"!timeout 5 sh fsmon.sh":   {"fsmon.sh"},
		"!sh -c 'echo hi'":         nil,
		// Round 20: modules, sourced files, program files, options with
		// arguments.
		"python3 -m tools.fsmon":          {"tools/fsmon.py"},
		"python3 -c 'import tools.fsmon'": {"tools/fsmon.py"},
		"perl -Itools -Mfsmon -e1":        {"tools/fsmon.pm"},
		"cd tools && python3 -m fsmon":    {"tools/fsmon.py"},
		"python3 .":                       {"__main__.py"},
		"bash -c 'source x.sh'":           {"x.sh"},
		"bash -c '. x.sh'":                {"x.sh"},
		"bash -c 'cd tools; . x.sh'":      {"tools/x.sh"},
		"awk -f x.awk":                    {"x.awk"},
		"sed -f x.sed":                    {"x.sed"},
		"python3 -W ignore x.py":          {"x.py"},
		"perl -I lib x.pl":                {"x.pl"},
		"sh -o errexit x.sh":              {"x.sh"},
		"!timeout -s KILL 5 sh x.sh":      {"x.sh"},
		"env -u FOO sh x.sh":              {"x.sh"},
		"eval sh x.sh":                    {"x.sh"},
		// Round 21: launchers the command comes after.
		"!setsid -w sh x.sh":           {"x.sh"},
		"!flock /tmp/lk sh x.sh":       {"x.sh"},
		"!taskset 1 sh x.sh":           {"x.sh"},
		"!runuser -u root -- sh x.sh":  {"x.sh"},
		"!strace -o /dev/null sh x.sh": {"x.sh"},
		"!time -p sh x.sh":             {"x.sh"},
		"!rbash x.sh":                  {"x.sh"},
		"!java x.py":                   {"x.py"},
		// Round 22: the same forms, naming a script the host protects.
		"eval 'sh x.sh'":                   {"x.sh"},
		"trap 'sh x.sh' EXIT":              {"x.sh"},
		"env -S 'sh x.sh'":                 {"x.sh"},
		"!flock /tmp/lk -c 'sh x.sh'":      {"x.sh"},
		"!git rebase -x 'sh x.sh' HEAD~1":  {"x.sh"},
		"!GIT_EDITOR='sh x.sh' git commit": {"x.sh"},
		"!perl5.36.0 x.pl":                 {"x.pl"},
		"!setpriv --reuid=0 sh x.sh":       {"x.sh"},
		"cat":                              nil,
		"https://example.com/a":            nil,
		"./missing":                        nil,
		"./dangling":                       {"dangling"}, // a link to nothing yet: listed, so the start refuses it
		"sh ./linked":                      {"linked"},
	} {
		got := programFiles(value, top, true)
		var rel []string
		for _, g := range got {
			r, _ := filepath.Rel(top, g)
			rel = append(rel, r)
		}
		if !slices.Equal(rel, want) {
			t.Errorf("programFiles(%q) = %q, want %q", value, rel, want)
		}
	}
}

// A program run from a folder the host cannot work out refuses the start
// (programPaths' unknown); one it can follow does not (red team round 19).
func TestProgramPathsUnknownFolder(t *testing.T) {
	top := t.TempDir()
	for value, want := range map[string]bool{
		"!cd $(dirname d/a9) && ./a9":                   true,
		"!for d in scripts; do cd $d; done; ./s.sh":     true,
		`!sh -c 'cd "$1" && ./x' _ scripts`:             true,
		`!cd "$d" && sh fsmon.sh`:                       true,
		"!cd scripts && ./s.sh":                         false,
		`!cd "$(git rev-parse --show-toplevel)" && ./x`: false,
		"!cd $PWD && ./x":                               false,
		"!cd $d && /usr/bin/true":                       false,
		"!cd $d && git status":                          false,
		"sh fsmon.sh":                                   false,
		// Round 20: what runs is not literal, or a module not in the
		// project would be looked up there first.
		"python3 -m tools.nothere":   true,
		"python3 -c 'import json'":   true,
		"sh ${NOPE-x.sh}":            true,
		`sh "${NOPE:-x}.sh"`:         true,
		"sh x.s?":                    true,
		"sh $(echo x.sh)":            true,
		"sh `printf x.sh`":           true,
		"X=x.sh; sh $X":              true,
		`sh -c 'sh "$1"' _ x.sh`:     true,
		`sh -c "$(cat x.txt)"`:       true,
		`bash -c "bash <(cat x.sh)"`: true,
		"eval sh x.sh":               false,
		"perl -e1":                   false,
		`!sh "$GIT_PREFIX"x.sh`:      false,
		// Round 21: launchers, pipes into an interpreter, runners, git
		// reading another config or repository, /proc paths.
		"!setsid -w sh x.sh":              false,
		"!flock /tmp/lk sh x.sh":          false,
		"!chrt -o 0 sh x.sh":              false,
		"!cat x.sh | sh":                  true,
		"!echo x.sh | xargs sh":           true,
		`!eval "$(cat x.sh)"`:             true,
		"!make -s":                        true,
		"!npm run -s x":                   true,
		"!go run .":                       true,
		`!git -c alias.z='!sh z.sh' z`:    false, // read as a program value: z.sh protected
		"!git -c include.path=a.cfg zz":   true,
		"!GIT_CONFIG_GLOBAL=a.cfg git zz": true,
		"!git --git-dir=fake zz":          true,
		"!git -C sub zz":                  true,
		"!git --exec-path=tools foo":      true,
		`!git -c protocol.ext.allow=always ls-remote "ext::sh $X"`: true,
		"!sh /proc/self/cwd/x.sh":                                  true,
		"!find . -name x.sh -exec sh {} ;":                         true,
		// Legitimate values stay known.
		"log --oneline --graph":                      false,
		"!git log --oneline":                         false,
		"!git fetch && git rebase origin/main":       false,
		`!f() { git log "$@"; }; f`:                  false,
		`!git commit -m 'fix: sh and cat | sh'`:      false,
		"git-lfs filter-process":                     false,
		"!gh auth git-credential":                    false,
		"code --wait":                                false,
		"less -FRX":                                  false,
		`meld "$LOCAL" "$REMOTE"`:                    false,
		"!git branch --merged | xargs git branch -d": false,
		// Round 22: command strings, functions forwarding "$@", %f,
		// git's own options that run commands, variables naming commands,
		// program text that runs more, versioned interpreters.
		"eval 'sh $X'":                            true,
		"trap 'sh $X' EXIT":                       true,
		"env -S 'sh $X'":                          true,
		"flock /tmp/lk -c 'sh $X'":                true,
		`f() { "$@"; }; f sh x.sh`:                true,
		"sh %f":                                   true,
		"git rebase -x 'sh $X' HEAD~1":            true,
		"!git grep -O'sh $X' a":                   true,
		"!git fetch --upload-pack='sh $X' .":      true,
		"!git bisect run sh $X":                   true,
		"!GIT_EDITOR='sh $X' git commit":          true,
		`!awk 'BEGIN{system("sh x.sh")}'`:         true,
		"!sed '1e sh x.sh' f":                     true,
		`!perl -e 'system("sh x.sh")'`:            true,
		`!node -e "require('./x.js')"`:            true,
		`!python3 -c "exec(open('x.py').read())"`: true,
		"!awk '{print $1}' f":                     false,
		"!sed 's/a/b/' f":                         false,
		"!git rebase -x 'make test' HEAD~1":       true,
		"!GIT_PAGER=cat git log":                  false,
		"!git -c color.ui=always log":             false,
		// Round 23: legitimate aliases that must start.
		"!sh -c 'git log $1' -": false,
		`!sh -c 'git fetch $1 merge-requests/$2/head:mr-$1-$2 && git checkout mr-$1-$2' -`: false,
		`!sh -c 'git log -i -1 --pretty="format:%an <%ae>\n" --author="$1"' -`:             false,
		`!$EDITOR $(git status --short | awk '$1 ~ /^M|A|U/ {print $2}' )`:                 false,
		"!git -c core.editor=vi var GIT_EDITOR":                                            false,
		"!git -c core.editor='sh $X' commit":                                               true,
	} {
		if _, got := programPaths(value, top, ""); got != want {
			t.Errorf("programPaths(%q): unknown = %v, want %v", value, got, want)
		}
	}
	// A script an interpreter runs that is not there yet is made; a bare
	// word that is no script is not.
	if got := missingPrograms("sh later.sh", top); !slices.Equal(got, []string{filepath.Join(top, "later.sh")}) {
		t.Errorf("missingPrograms(sh later.sh) = %q", got)
	}
	if got := missingPrograms("!echo later", top); len(got) != 0 {
		t.Errorf("missingPrograms(!echo later) = %q", got)
	}
}

// The command of an ext:: URL a remote or an insteadOf names is a program
// the person's fetch or push runs (red team round 20): protected, and
// made when missing.
func TestExtURLsArePrograms(t *testing.T) {
	top, _ := filepath.EvalSymlinks(t.TempDir())
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = top
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", ".")
	if err := os.MkdirAll(filepath.Join(top, "tools"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(top, "tools", "x.sh"), []byte("exit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	git("config", "protocol.ext.allow", "always")
	git("config", "remote.origin.url", "ext::sh tools/x.sh")
	git("config", "url.ext::sh tools/y.sh #.insteadOf", "https://example.com/")
	t.Setenv("HOME", t.TempDir())
	ro, _, files := gitProtected([]string{top})
	if !slices.Contains(ro, filepath.Join(top, "tools", "x.sh")) {
		t.Errorf("read-only %q: the remote's ext:: program is not", ro)
	}
	if !slices.ContainsFunc(files, func(f sandbox.File) bool { return f.Path == filepath.Join(top, "tools", "y.sh") }) {
		t.Errorf("made %v: the insteadOf's missing ext:: program is not", files)
	}
}

// The configs the environment chooses are the person's too (red team
// round 21): GIT_CONFIG_GLOBAL's file, and GIT_CONFIG_COUNT's and
// GIT_CONFIG_PARAMETERS' variables.
func TestEnvironmentConfigsAreThePersons(t *testing.T) {
	top, _ := filepath.EvalSymlinks(t.TempDir())
	cmd := exec.Command("git", "init", "-q", top)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	global := filepath.Join(top, "a.cfg")
	if err := os.WriteFile(global, []byte("[alias]\n\tx = !sh from-global.sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", t.TempDir())
	t.Setenv("GIT_CONFIG_GLOBAL", global)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_CONFIG_COUNT", "1")
	t.Setenv("GIT_CONFIG_KEY_0", "core.fsmonitor")
	t.Setenv("GIT_CONFIG_VALUE_0", "sh from-count.sh")
	t.Setenv("GIT_CONFIG_PARAMETERS", `'alias.y'='!sh from-parameters.sh'`)
	ro, _, files := gitProtected([]string{top})
	if !slices.Contains(ro, global) {
		t.Errorf("read-only %q: GIT_CONFIG_GLOBAL's file is not", ro)
	}
	for _, f := range []string{"from-global.sh", "from-count.sh", "from-parameters.sh"} {
		if !slices.ContainsFunc(files, func(sf sandbox.File) bool { return sf.Path == filepath.Join(top, f) }) {
			t.Errorf("made %v: %s is not", files, f)
		}
	}
}

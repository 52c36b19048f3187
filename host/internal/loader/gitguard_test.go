package loader

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
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
	write(filepath.Join(main, ".git", "modules", "lib", "config"), "[core]\n\tworktree = ../../../lib\n")
	write(filepath.Join(main, "lib", ".git"), "gitdir: ../.git/modules/lib\n")
	write(filepath.Join(main, ".git", "modules", "lib", "modules", "deep", "config"), "")
	write(filepath.Join(main, ".git", "modules", "vendor", "x", "config"), "")
	linked := filepath.Join(dir, "linked")
	write(filepath.Join(main, ".git", "worktrees", "linked", "commondir"), "../..\n")
	write(filepath.Join(linked, ".git"), "gitdir: "+filepath.Join(main, ".git", "worktrees", "linked")+"\n")
	plain := filepath.Join(dir, "plain")
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}

	ro, mk := gitProtected([]string{main, plain})
	g := filepath.Join(main, ".git")
	want := []string{
		filepath.Join(g, "hooks"), filepath.Join(g, "config"), filepath.Join(main, "tools", "hooks"),
		filepath.Join(g, "modules", "lib", "hooks"), filepath.Join(g, "modules", "lib", "config"),
		filepath.Join(g, "modules", "lib", "modules", "deep", "hooks"), filepath.Join(g, "modules", "lib", "modules", "deep", "config"),
		filepath.Join(g, "modules", "vendor", "x", "hooks"), filepath.Join(g, "modules", "vendor", "x", "config"),
		filepath.Join(main, "lib", ".git"), // the submodule's work tree's .git file
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
	if ph := filepath.Join(plain, ".git"); !slices.Contains(ro, ph) || !slices.Contains(mk, ph) {
		t.Errorf("no placeholder for a folder that is no work tree: read-only %v, made %v", ro, mk)
	}

	ro, _ = gitProtected([]string{linked})
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
		ro, _ := gitProtected([]string{project})
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
// bound once it stops, those still empty: one the person filled (git init
// while the host ran) stays, and so does an empty .git the host never
// used.
func TestRemovePlaceholders(t *testing.T) {
	dir := t.TempDir()
	var roots []string
	for _, name := range []string{"untouched", "filled", "empty-before"} {
		roots = append(roots, filepath.Join(dir, name))
		if err := os.Mkdir(roots[len(roots)-1], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(roots[2], ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other", ".git")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	_, mk := gitProtected(roots)
	for _, m := range mk { // as the sandbox makes them
		if err := os.MkdirAll(m, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(roots[1], ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	RemovePlaceholders()
	for i, want := range []bool{false, true, false} {
		if _, err := os.Stat(filepath.Join(roots[i], ".git")); (err == nil) != want {
			t.Errorf("%s/.git exists = %v after the stop, want %v", roots[i], err == nil, want)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("an empty .git the host never used was removed: %v", err)
	}
}

package loader

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/switchboard-mcp/switchboard/host/internal/builtins"
	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/sandbox"
	"github.com/switchboard-mcp/switchboard/internal/gitplaceholder"
	"github.com/switchboard-mcp/switchboard/internal/regularfile"
)

// WritableFolders lists the folders some server of cfg may write: the
// project, data_dir (the servers' state folders, external servers' homes),
// the built-ins' grants (the filesystem's roots) and every sandbox block's
// write list. Programs the host runs by name are not looked up there
// (sandbox.LookPath): a server could have put them there.
func WritableFolders(cfg *config.Config) []string {
	out := []string{cfg.ProjectDir, cfg.DataDir}
	for _, b := range cfg.Builtins {
		if bi, ok := builtins.Lookup(b.Name); ok {
			out = append(out, bi.Grants(cfg.ProjectDir, b.Settings).Write...)
		}
		out = append(out, b.Sandbox.Write...)
	}
	for _, p := range cfg.Plugins {
		out = append(out, p.Sandbox.Write...)
	}
	for _, x := range cfg.Externals {
		out = append(out, x.Sandbox.Write...)
	}
	home, _ := os.UserHomeDir()
	for i, p := range out {
		if rest, ok := strings.CutPrefix(p, "~/"); ok && home != "" {
			out[i] = filepath.Join(home, rest)
		}
	}
	return out
}

// gitProtected lists what a person's own git runs programs from, in the
// repositories whose work trees are the writable roots: each repository's
// hooks folder and config (which names fsmonitor, pager, editor, aliases,
// filter drivers, credential helpers, core.hooksPath…), the folder its
// core.hooksPath names, and the same for the repositories of its
// submodules. A server that may write a work tree could otherwise write a
// hook, and the person's next `git commit` in a terminal would run it,
// outside any sandbox: an agent allowed only the filesystem's tools would
// run any command it liked. The sandbox binds these read-only (as Codex and
// Claude Code protect .git's hooks and config); make lists the folders to
// create first when missing, since a folder that does not exist cannot be
// bound, and a hook written into a new one would run. A root that is no
// work tree gets its .git placeholder (repoPlaceholder), and a root whose
// .git is a file (a linked work tree) has that file read-only. Only the
// roots themselves are looked at (a repository deeper in a root is not).
func gitProtected(roots []string) (readOnly, make []string, files []sandbox.File) {
	add := func(p string, mk bool) {
		readOnly = append(readOnly, p)
		if mk {
			make = append(make, p)
		}
	}
	for _, root := range roots {
		if ph, file, ok := repoPlaceholder(root); ok {
			if file {
				readOnly = append(readOnly, ph)
				files = append(files, sandbox.File{Path: ph, Content: gitplaceholder.Content})
			} else {
				add(ph, true)
			}
			continue
		}
		gitDir, common := repoDirs(root)
		if gitDir == "" {
			continue
		}
		if gitDir != filepath.Join(root, ".git") {
			// The .git file itself (a linked work tree, a submodule
			// checked out as the project): rewritten, it would send the
			// person's git to a repository of the agent's.
			add(filepath.Join(root, ".git"), false)
		}
		// The hooks and config of the repository proper (a linked work
		// tree keeps them in the common folder).
		add(filepath.Join(common, "hooks"), true)
		add(filepath.Join(common, "config"), false)
		if hp := hooksPath(filepath.Join(common, "config")); hp != "" {
			if !filepath.IsAbs(hp) {
				hp = filepath.Join(root, hp)
			}
			add(filepath.Clean(hp), true)
		}
		for _, m := range submoduleRepos(filepath.Join(common, "modules"), 4) {
			add(filepath.Join(m, "hooks"), true)
			add(filepath.Join(m, "config"), false)
			// The submodule's work tree's .git (a file naming m): replaced
			// by a folder with a config of its own, the person's `git
			// status` in the project would go into it and run that.
			if wt := configValue(filepath.Join(m, "config"), "core", "worktree"); wt != "" {
				if !filepath.IsAbs(wt) {
					wt = filepath.Join(m, wt)
				}
				if dot := filepath.Join(filepath.Clean(wt), ".git"); within(dot, root) {
					if _, err := os.Lstat(dot); err == nil {
						add(dot, false)
					}
				}
			}
		}
		if gitDir != common {
			add(filepath.Join(gitDir, "config.worktree"), false)
		}
	}
	return readOnly, make, files
}

// repoFolders lists the git folders of the work trees at the roots (each
// repository's own and, for a linked work tree, the common one). Every
// server but the git built-in sees them read-only: git reads more of them
// than hooks and config (a `commondir` file written into .git sent the
// person's git to a config and hooks of the agent's, red team round 6),
// and only git, run by the git built-in, has any business writing there.
func repoFolders(roots []string) []string {
	var out []string
	for _, root := range roots {
		gitDir, common := repoDirs(root)
		for _, d := range []string{gitDir, common} {
			if d != "" && !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	return out
}

// repoPlaceholder returns root/.git when root is a folder that is no work
// tree: there is no .git, or a placeholder a host made before. A server
// that may write root could otherwise make a repository there while it
// runs (git init, then a core.fsmonitor in its config), and the person's
// next `git status` in the folder would run that, outside any sandbox (red
// team round 9): the read-only binds above are decided when a sandbox is
// made, and a path where nothing exists cannot be bound. So the host makes
// the placeholder before the server starts (Policy.Files, Policy.Make) and
// binds it read-only in every sandbox, the git built-in's too (it makes no
// repositories). It is a file git refuses to read as a gitfile
// (gitplaceholder), so git stops there: an empty .git folder had git take
// root itself for a repository once a server wrote HEAD, objects/, refs/
// and a config beside it. Inside another work tree (file is false), where
// git must go on up to that repository, it is an empty folder. A
// placeholder of the other kind a host left there is made anew, unless
// another running host binds it.
// RemovePlaceholders takes it away when the host stops, if it is still as
// the host made it.
func repoPlaceholder(root string) (dot string, file, ok bool) {
	if st, err := os.Stat(root); err != nil || !st.IsDir() {
		return "", false, false
	}
	dot = filepath.Join(root, ".git")
	file = !insideWorkTree(root)
	st, err := os.Lstat(dot)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return "", false, false
	case st.IsDir() && emptyDir(dot):
		// One of the other kind, left by a host: made anew, unless a
		// running host's sandboxes bind it (a folder removed under their
		// mounts would be gone from them).
		if file && (otherHostReaches(dot) != "" || syscall.Rmdir(dot) != nil) {
			file = false
		}
	case st.Mode().IsRegular() && gitplaceholder.IsFile(dot):
		if !file && (otherHostReaches(dot) != "" || os.Remove(dot) != nil) {
			file = true
		}
	default:
		return "", false, false
	}
	placeholders.Lock()
	if ph, seen := placeholders.paths[dot]; !seen || ph.file != file {
		placeholders.paths[dot] = &placeholder{file: file}
	}
	placeholders.Unlock()
	return dot, file, true
}

// insideWorkTree reports whether a folder above dir has a .git, where the
// person's git looks for a repository when dir has none (a placeholder
// is none).
func insideWorkTree(dir string) bool {
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		dot := filepath.Join(d, ".git")
		if st, err := os.Lstat(dot); err == nil && !(st.IsDir() && emptyDir(dot)) && !gitplaceholder.IsFile(dot) {
			return true
		}
		if d == filepath.Dir(d) {
			return false
		}
	}
}

// hasHEAD reports whether dir holds anything named HEAD, the first thing
// git checks of a folder it might take for a repository.
func hasHEAD(dir string) bool {
	_, err := os.Lstat(filepath.Join(dir, "HEAD"))
	return err == nil
}

// emptyDir reports whether dir is a folder with nothing in it.
func emptyDir(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	names, err := f.Readdirnames(1)
	return len(names) == 0 && errors.Is(err, io.EOF)
}

// placeholders are the .git placeholders this host's sandboxes bind.
var placeholders = struct {
	sync.Mutex
	paths map[string]*placeholder
}{paths: map[string]*placeholder{}}

// placeholder is one .git placeholder.
type placeholder struct {
	file bool // the placeholder file (else the empty folder)
	// restored is what was at the path when the servers were last
	// restarted for it (RestorePlaceholders), so that they restart once
	// for each change.
	restored *fileID
}

// inPlace reports whether the placeholder at path is as the host made it:
// the file, or a folder (the person's git init fills the folder the
// sandboxes bind, which they then see read-only).
func (ph *placeholder) inPlace(path string) bool {
	if ph.file {
		return gitplaceholder.IsFile(path)
	}
	st, err := os.Lstat(path)
	return err == nil && st.IsDir()
}

// movedPlaceholders lists the placeholders that are not as the host made
// them and have changed since the servers last restarted for them, and
// with mark, marks them restored.
func movedPlaceholders(mark bool) []string {
	placeholders.Lock()
	defer placeholders.Unlock()
	var out []string
	for p, ph := range placeholders.paths {
		if ph.inPlace(p) {
			ph.restored = nil
			continue
		}
		id, _ := idOf(p) // the zero ID: nothing there
		if ph.restored != nil && *ph.restored == id {
			continue
		}
		if mark {
			ph.restored = &id
		}
		out = append(out, p)
	}
	return out
}

// RemovePlaceholders removes the .git placeholders this host's sandboxes
// bound, once its servers have stopped: each that is still the placeholder
// file (and its folder has no HEAD, see below) or an empty folder and that no other running host's servers may write (its sandboxes bind
// it too, and a folder removed under their mount would be gone from them).
// A .git the person filled meanwhile (git init) is not empty and stays.
// The file stays where a HEAD is beside it: with objects/, refs/ and a
// config (core.worktree, core.fsmonitor) that a server may have written
// while the host ran, git would take the folder itself for a repository
// once nothing named .git stops it there, and run what that config names;
// the file says so to the person who finds it.
func RemovePlaceholders() {
	placeholders.Lock()
	defer placeholders.Unlock()
	for p := range placeholders.paths {
		delete(placeholders.paths, p)
		st, err := os.Lstat(p)
		if err != nil || otherHostReaches(p) != "" {
			continue
		}
		switch {
		case st.IsDir():
			_ = syscall.Rmdir(p) // fails when not empty
		case gitplaceholder.IsFile(p) && !hasHEAD(filepath.Dir(p)):
			_ = os.Remove(p)
		}
	}
}

// repoDirs returns the git folder of the work tree at root (root/.git, or
// where a .git file points) and its common folder (the main repository's,
// for a linked work tree), or "" when root is not a work tree's top.
func repoDirs(root string) (gitDir, common string) {
	dot := filepath.Join(root, ".git")
	st, err := os.Lstat(dot)
	switch {
	case err != nil:
		return "", ""
	case st.IsDir():
		if emptyDir(dot) {
			return "", "" // a placeholder (repoPlaceholder)
		}
		return dot, dot
	case !st.Mode().IsRegular() || st.Size() > 4096:
		return "", ""
	}
	b, err := regularfile.Read(dot, 4096)
	if err != nil {
		return "", ""
	}
	target, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if !ok {
		return "", ""
	}
	gitDir = strings.TrimSpace(target)
	if !filepath.IsAbs(gitDir) {
		gitDir = filepath.Join(root, gitDir)
	}
	gitDir = filepath.Clean(gitDir)
	common = gitDir
	if c, err := regularfile.Read(filepath.Join(gitDir, "commondir"), 4096); err == nil {
		if cd := strings.TrimSpace(string(c)); cd != "" {
			if !filepath.IsAbs(cd) {
				cd = filepath.Join(gitDir, cd)
			}
			common = filepath.Clean(cd)
		}
	}
	return gitDir, common
}

// hooksPath reads core.hooksPath from a repository's config file.
func hooksPath(config string) string { return configValue(config, "core", "hookspath") }

// configValue reads section.key from a repository's config file (git's
// own format: [section] then key = …; names are case-insensitive; the
// last one wins, as in git).
func configValue(config, section, key string) string {
	b, err := regularfile.Read(config, 1<<20)
	if err != nil {
		return ""
	}
	current, found := "", ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			name, _, _ := strings.Cut(strings.Trim(line, "[]"), " ")
			current = strings.ToLower(strings.TrimSpace(name))
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if current == section && ok && strings.EqualFold(strings.TrimSpace(k), key) {
			found = strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	return found
}

// submoduleRepos lists the repositories under a modules folder (each has a
// config file), depth levels down (submodules of submodules).
func submoduleRepos(dir string, depth int) []string {
	if depth == 0 {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		if _, err := os.Stat(filepath.Join(sub, "config")); err == nil {
			out = append(out, sub)
			out = append(out, submoduleRepos(filepath.Join(sub, "modules"), depth-1)...)
		} else {
			// A submodule at a nested path (modules/a/b).
			out = append(out, submoduleRepos(sub, depth-1)...)
		}
	}
	return out
}

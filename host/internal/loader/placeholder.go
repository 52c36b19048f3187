package loader

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/switchboard-mcp/switchboard/internal/gitplaceholder"
)

// repoPlaceholder returns root/.git when root is a folder that is no work
// tree: there is no .git, or a placeholder a host made before. A server
// that may write root could otherwise make a repository there while it
// runs (git init, then a core.fsmonitor in its config), and the person's
// next `git status` in the folder would run that, outside any sandbox (red
// team round 9): the read-only binds of gitProtected are decided when a
// sandbox is made, and a path where nothing exists cannot be bound. So the
// host makes the placeholder before the server starts (Policy.Files,
// Policy.Make) and binds it read-only in every sandbox, the git built-in's
// too (it makes no repositories). It is a file git refuses to read as a
// gitfile (gitplaceholder), so git stops there: an empty .git folder had
// git take root itself for a repository once a server wrote HEAD,
// objects/, refs/ and a config beside it. Inside another work tree (file
// is false), where git must go on up to that repository, it is an empty
// folder. A placeholder of the other kind a host left there is made anew,
// unless another running host holds it (holdPlaceholders).
// RemovePlaceholders takes it away when the host stops, if it is still as
// the host made it and no other host holds it.
func repoPlaceholder(root string) (dot string, file, ok bool) {
	if st, err := os.Stat(root); err != nil || !st.IsDir() {
		return "", false, false
	}
	dot = filepath.Join(root, ".git")
	file = outerWorkTree(root) == ""
	st, err := os.Lstat(dot)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return "", false, false
	case st.IsDir() && emptyDir(dot):
		// One of the other kind, left by a host: made anew.
		if file && !removeUnheld(dot, false) {
			file = false
		}
	case st.Mode().IsRegular() && gitplaceholder.IsFile(dot):
		if !file && !removeUnheld(dot, true) {
			file = true
		}
	default:
		return "", false, false
	}
	placeholders.Lock()
	if ph, seen := placeholders.paths[dot]; !seen || ph.file != file {
		if seen {
			ph.release()
		}
		placeholders.paths[dot] = &placeholder{file: file, fd: -1}
	} else {
		ph.foreign = false // one of this host's roots: its own too
	}
	placeholders.Unlock()
	return dot, file, true
}

// placeholderAt is repoPlaceholder without its effects: where the
// placeholder of root is or would be, and of which kind.
func placeholderAt(root string) (dot string, file, ok bool) {
	if st, err := os.Stat(root); err != nil || !st.IsDir() {
		return "", false, false
	}
	dot = filepath.Join(root, ".git")
	file = outerWorkTree(root) == ""
	st, err := os.Lstat(dot)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return "", false, false
	case st.IsDir() && emptyDir(dot):
	case st.Mode().IsRegular() && gitplaceholder.IsFile(dot):
	default:
		return "", false, false
	}
	placeholders.Lock()
	defer placeholders.Unlock()
	if ph, seen := placeholders.paths[dot]; seen {
		file = ph.file
	}
	return dot, file, true
}

// outerWorkTree returns the nearest folder above dir that has a .git,
// where the person's git looks for a repository when dir has none (a
// placeholder is none), or "".
func outerWorkTree(dir string) string {
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		dot := filepath.Join(d, ".git")
		if st, err := os.Lstat(dot); err == nil && !(st.IsDir() && emptyDir(dot)) && !gitplaceholder.IsFile(dot) {
			return d
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}

// hasHEAD reports whether dir holds anything named HEAD, the first thing
// git checks of a folder it might take for a repository.
func hasHEAD(dir string) bool {
	_, err := os.Lstat(filepath.Join(dir, "HEAD"))
	return err == nil
}

// placeholders are the .git placeholders this host's sandboxes bind.
var placeholders = struct {
	sync.Mutex
	paths map[string]*placeholder
}{paths: map[string]*placeholder{}}

// placeholder is one .git placeholder.
type placeholder struct {
	file bool // the placeholder file (else the empty folder)
	// foreign is set for another running host's placeholder that this
	// host's sandboxes bind (adoptPlaceholders): held and watched like
	// the host's own, not recorded as its own.
	foreign bool
	// fd holds a shared flock on the placeholder while this host's
	// sandboxes may bind it (-1: none), so that no other host removes it
	// under their mounts: a host removes one only under an exclusive
	// lock. Host records could not say so: another user's host cannot
	// read them, and a host stopped a moment ago counts as running for
	// 10 s (red team round 11).
	fd  int
	ino uint64 // the inode fd holds
	// restored is what was at the path when the servers were last
	// restarted for it (RestorePlaceholders), so that they restart once
	// for each change.
	restored *fileID
}

// release drops the shared lock.
func (ph *placeholder) release() {
	if ph.fd >= 0 {
		_ = unix.Close(ph.fd)
		ph.fd = -1
	}
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

// holdPlaceholders takes a shared lock on each of paths that is a
// placeholder this host registered (repoPlaceholder), once a sandbox has
// made them (sandbox.Sandbox.Prepared). A folder is made readable to all
// (the sandbox makes folders 0700), so that another user's host can hold
// it too.
func holdPlaceholders(paths []string) {
	placeholders.Lock()
	defer placeholders.Unlock()
	for _, p := range paths {
		ph := placeholders.paths[p]
		if ph == nil || !ph.inPlace(p) {
			continue
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil || (ph.fd >= 0 && st.Ino == ph.ino) {
			continue
		}
		ph.release()
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		if err := unix.Fstat(fd, &st); err != nil {
			_ = unix.Close(fd)
			continue
		}
		if !ph.file && st.Mode&0o777 == 0o700 && int(st.Uid) == os.Geteuid() {
			_ = unix.Fchmod(fd, 0o755)
		}
		_ = unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB) // held by a stopping host: RestorePlaceholders sees it go
		ph.fd, ph.ino = fd, st.Ino
	}
}

// adoptPlaceholders registers the placeholders of other running hosts
// among paths (othersFiles) that this host has not registered, as they
// are now (the file or an empty folder), so that holdPlaceholders holds
// them, the watcher watches them, and RemovePlaceholders removes them
// when this host stops after their own host (if no host holds them then).
func adoptPlaceholders(paths []string) {
	placeholders.Lock()
	defer placeholders.Unlock()
	for _, p := range paths {
		if _, seen := placeholders.paths[p]; seen {
			continue
		}
		st, err := os.Lstat(p)
		switch {
		case err != nil:
		case st.Mode().IsRegular() && gitplaceholder.IsFile(p):
			placeholders.paths[p] = &placeholder{file: true, foreign: true, fd: -1}
		case st.IsDir() && emptyDir(p):
			placeholders.paths[p] = &placeholder{foreign: true, fd: -1}
		}
	}
}

// removeUnheld removes the placeholder at path (the file, or an empty
// folder) when no host holds it, and reports whether it did.
func removeUnheld(path string, file bool) bool {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer func() { _ = unix.Close(fd) }()
	if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
		return false // another host's sandboxes bind it
	}
	var held, now unix.Stat_t
	if unix.Fstat(fd, &held) != nil || unix.Lstat(path, &now) != nil || held.Ino != now.Ino || held.Dev != now.Dev {
		return false
	}
	if file {
		return gitplaceholder.IsFile(path) && unix.Unlink(path) == nil
	}
	return unix.Rmdir(path) == nil // fails when not empty
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

// RemovePlaceholders removes the .git placeholders this host registered,
// once its servers have stopped: each that is still the placeholder file
// or an empty folder, and that no other host holds (its sandboxes bind it
// too, and the kernel takes their mount away with the file). A .git the
// person filled meanwhile (git init) is not empty and stays. The file
// stays where a HEAD is beside it: with objects/, refs/ and a config
// (core.worktree, core.fsmonitor) that a server may have written while the
// host ran, git would take the folder itself for a repository once nothing
// named .git stops it there, and run what that config names; the file
// says so to the person who finds it.
func RemovePlaceholders() {
	placeholders.Lock()
	defer placeholders.Unlock()
	for p, ph := range placeholders.paths {
		delete(placeholders.paths, p)
		ph.release()
		if ph.file && hasHEAD(filepath.Dir(p)) {
			continue
		}
		removeUnheld(p, ph.file)
	}
}

// Placeholders lists the .git placeholders this host registered.
func Placeholders() []string {
	placeholders.Lock()
	defer placeholders.Unlock()
	out := make([]string, 0, len(placeholders.paths))
	for p := range placeholders.paths {
		out = append(out, p)
	}
	return out
}

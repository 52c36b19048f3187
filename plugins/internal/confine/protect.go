package confine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// ErrProtected is matched (errors.Is) by every refusal of a protected path:
// the host's control plane, which no tool may read, list, write, move or
// link. Such refusals match ErrOutside too.
var ErrProtected = errors.New("path is protected")

// ErrNotRegular is wrapped by OpenFile's refusal of a FIFO, socket or
// device, which a read could block on or be steered by.
var ErrNotRegular = errors.New("not a regular file")

// ProtectedError is the refusal of a path that is, holds, or lies inside a
// protected path.
type ProtectedError struct {
	// Path is the path as the tool saw it.
	Path string
	// Why says how it touches the protected path, e.g. "is inside".
	Why string
	// Protected is the protected path it touches.
	Protected string
}

func (e *ProtectedError) Error() string {
	return fmt.Sprintf("%s %s %s, which belongs to the host (its configuration or state) and which tools may not touch", e.Path, e.Why, e.Protected)
}

// Is makes a ProtectedError match ErrProtected and ErrOutside.
func (e *ProtectedError) Is(target error) bool {
	return target == ErrProtected || target == ErrOutside
}

// fileID is a file's identity: device and inode.
type fileID struct{ dev, ino uint64 }

func idOf(fi fs.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	// Dev is int32 on darwin.
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)}, true //nolint:gosec // a device number, not arithmetic
}

func nlinkOf(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink) // uint16 on darwin
	}
	return 1
}

// guard is one protected path.
type guard struct {
	paths []string // absolute: as given, and resolved when that differs
	dir   fileID   // the directory's identity when it was protected
	isDir bool
}

// Protect refuses paths at or under each of paths even when a root
// contains them, and makes Verify, Filter, CheckEntry and Covers refuse
// what is, holds or lies in them by identity as well. Each path is
// resolved where it exists; one that does not exist yet is protected by
// its absolute path (resolved as far as it exists) and by identity once it
// appears. A directory's identity is remembered, so moving it (or a
// parent) aside does not unprotect it.
func (r *Roots) Protect(paths ...string) {
	if r.ancestors == nil {
		r.ancestors = map[fileID]struct{}{}
	}
	for _, p := range paths {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		abs = filepath.Clean(abs)
		g := guard{paths: []string{abs}}
		if real, err := realPath(abs); err == nil && real != abs {
			g.paths = append(g.paths, real)
		}
		if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
			if id, ok := idOf(fi); ok {
				g.dir, g.isDir = id, true
			}
		}
		r.guards = append(r.guards, g)
		for _, gp := range g.paths {
			r.excluded = append(r.excluded, gp)
			r.excludedIn = append(r.excludedIn, [2]string{filepath.Dir(gp), filepath.Base(gp)})
			for d := filepath.Dir(gp); ; d = filepath.Dir(d) {
				if fi, err := os.Stat(d); err == nil {
					if id, ok := idOf(fi); ok {
						r.ancestors[id] = struct{}{}
					}
				}
				if d == filepath.Dir(d) {
					break
				}
			}
		}
	}
	r.links = &linkIndex{}
	r.recent.Store(nil)
}

// Exclude is Protect's former name.
func (r *Roots) Exclude(dirs ...string) { r.Protect(dirs...) }

// snapshot is the identities of the protected paths now: each is stat'ed
// afresh (a protected file replaced by rename has a new inode), and
// protected directories keep the identity they had when protected.
type snapshot struct {
	ids  map[fileID]string // identity -> protected path
	dirs map[fileID]string // directories only
	// moved is set when a protected directory is no longer at its path
	// (it, or a folder above it, was moved aside): only then must a check
	// look for it among the folders above what was opened.
	moved bool
}

func (r *Roots) snapshot() snapshot {
	s := snapshot{ids: map[fileID]string{}, dirs: map[fileID]string{}}
	for _, g := range r.guards {
		displaced := g.isDir // until it is found in place
		if g.isDir {
			s.ids[g.dir], s.dirs[g.dir] = g.paths[0], g.paths[0]
		}
		for _, p := range g.paths {
			fi, err := os.Stat(p)
			if err != nil {
				continue
			}
			if id, ok := idOf(fi); ok {
				s.ids[id] = p
				if fi.IsDir() {
					s.dirs[id] = p
				}
				if g.isDir && id == g.dir {
					displaced = false
				}
			}
		}
		s.moved = s.moved || displaced
	}
	return s
}

// protectedAt returns the protected path that real is at or under, or "".
func (r *Roots) protectedAt(real string) string {
	for _, x := range r.excluded {
		if Within(real, x) {
			return x
		}
	}
	return ""
}

// Covers refuses a resolved path that is a protected path or has one
// under it: the check for operations on a whole tree (moving a folder).
func (r *Roots) Covers(real string) error {
	if x := r.protectedAt(real); x != "" {
		return &ProtectedError{Path: real, Why: "is inside", Protected: x}
	}
	for _, x := range r.excluded {
		if Within(x, real) {
			return &ProtectedError{Path: real, Why: "holds", Protected: x}
		}
	}
	return nil
}

// CheckEntry refuses fi, the Lstat of an entry about to be acted on by
// name (renamed, replaced), when it is a protected file or directory, or
// (with tree) a directory that holds a protected path. It compares
// identities, so it holds however the entry was reached.
func (r *Roots) CheckEntry(name string, fi fs.FileInfo, tree bool) error {
	id, ok := idOf(fi)
	if !ok {
		return nil
	}
	snap := r.snapshot()
	if x, hit := snap.ids[id]; hit {
		return &ProtectedError{Path: name, Why: "is", Protected: x}
	}
	if tree && fi.IsDir() {
		if _, hit := r.ancestors[id]; hit {
			return &ProtectedError{Path: name, Why: "holds", Protected: "a protected path"}
		}
		// Ancestors as they are now, for protected paths created since.
		for _, g := range r.guards {
			for d := filepath.Dir(g.paths[len(g.paths)-1]); ; d = filepath.Dir(d) {
				if dfi, err := os.Stat(d); err == nil {
					if did, ok := idOf(dfi); ok && did == id {
						return &ProtectedError{Path: name, Why: "holds", Protected: g.paths[0]}
					}
				}
				if d == filepath.Dir(d) {
					break
				}
			}
		}
	}
	if fi.Mode().IsRegular() && nlinkOf(fi) > 1 {
		if x, err := r.links.lookup(r, id); err != nil || x != "" {
			if err != nil {
				return err
			}
			return &ProtectedError{Path: name, Why: "is a hard link to", Protected: x}
		}
	}
	return nil
}

// CheckName refuses acting by name on name inside the opened (and
// Verified) directory dir, as creating, replacing or renaming it does: when
// the path it names (dir's real path, read from the descriptor, joined with
// name) is at or under a protected path, or with tree holds one (a
// protected path that does not exist yet included), or when the entry there
// now is protected by identity (CheckEntry). A missing entry is fine.
func (r *Roots) CheckName(dir *os.File, name string, tree bool) error {
	base := fdPath(dir)
	if base == "" {
		base = dir.Name()
	}
	p := filepath.Join(base, name)
	if tree {
		if err := r.Covers(p); err != nil {
			return err
		}
	} else if x := r.protectedAt(p); x != "" {
		return &ProtectedError{Path: p, Why: "is inside", Protected: x}
	}
	fi, err := entryLstat(dir, name)
	if err != nil {
		return nil
	}
	return r.CheckEntry(name, fi, tree)
}

// Verify checks a file or directory after it was opened, on the descriptor,
// so a symlink swapped in, a hard link or a parent moved aside cannot pass:
// it refuses the opened object when its identity is a protected path's,
// when its real path (read from the descriptor) is at or under a protected
// path, when a directory above it is a protected directory (by identity),
// and when it is a hard link to a file inside a protected directory.
func (r *Roots) Verify(f *os.File) error {
	_, err := r.verify(f)
	return err
}

// verify is Verify returning the opened file's FileInfo.
func (r *Roots) verify(f *os.File) (fs.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return fi, r.verifyInfo(f, fi, nil)
}

// verifyInfo checks the opened f, whose FileInfo is fi, against snap (a
// fresh snapshot when nil).
func (r *Roots) verifyInfo(f *os.File, fi fs.FileInfo, snap *snapshot) error {
	_, err := r.verifyOpened(f, fi, snap)
	return err
}

func (r *Roots) verifyOpened(f *os.File, fi fs.FileInfo, snap *snapshot) (opened string, err error) {
	opened = fdPath(f)
	return opened, r.verifyAt(f, fi, snap, opened)
}

func (r *Roots) verifyAt(f *os.File, fi fs.FileInfo, snap *snapshot, opened string) error {
	id, ok := idOf(fi)
	if !ok {
		return nil
	}
	var links uint64
	if fi.Mode().IsRegular() {
		links = nlinkOf(fi)
	}
	return r.verifyID(f.Name(), id, links, snap, opened)
}

// verifyID checks what was opened by name, whose identity is id (and, for
// a regular file, links its count of hard links; 0 otherwise) and whose
// real path read from its descriptor is opened ("" if unknown), against
// snap (a fresh snapshot when nil): the checks of Verify.
func (r *Roots) verifyID(name string, id fileID, links uint64, snap *snapshot, opened string) error {
	if len(r.guards) == 0 {
		return r.inside(name, opened)
	}
	if snap == nil {
		s := r.snapshot()
		snap = &s
	}
	if x, hit := snap.ids[id]; hit {
		return &ProtectedError{Path: name, Why: "is", Protected: x}
	}
	real := opened
	if real == "" {
		real = name
	}
	if x := r.protectedAt(real); x != "" {
		return &ProtectedError{Path: real, Why: "is inside", Protected: x}
	}
	for d := filepath.Dir(real); snap.moved; d = filepath.Dir(d) {
		if dfi, err := os.Stat(d); err == nil {
			if did, ok := idOf(dfi); ok {
				if x, hit := snap.dirs[did]; hit {
					return &ProtectedError{Path: real, Why: "is inside (moved)", Protected: x}
				}
			}
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	if links > 1 {
		x, err := r.links.lookup(r, id)
		if err != nil {
			return err
		}
		if x != "" {
			return &ProtectedError{Path: real, Why: "is a hard link to", Protected: x}
		}
	}
	return r.inside(name, opened)
}

// inside checks that an opened file's real path (opened, "" if unknown)
// is inside a root; name is the name it was opened by.
func (r *Roots) inside(name, opened string) error {
	if opened == "" {
		return nil
	}
	for _, d := range r.dirs {
		if Within(opened, d) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s changed while it was opened and now points to %s", ErrOutside, name, opened)
}

// OpenFile opens name through root with flag (O_NONBLOCK added, so opening
// a FIFO never waits for a writer) and Verifies what was opened. A FIFO,
// socket or device is refused with ErrNotRegular before anything is read;
// directories are returned.
func (r *Roots) OpenFile(root *os.Root, name string, flag int, perm fs.FileMode) (*os.File, error) {
	return r.openFile(root, name, flag, perm, nil)
}

// openFile is OpenFile checking against snap (nil: a fresh snapshot).
func (r *Roots) openFile(root *os.Root, name string, flag int, perm fs.FileMode, snap *snapshot) (*os.File, error) {
	f, err := root.OpenFile(name, flag|syscall.O_NONBLOCK, perm)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = r.verifyInfo(f, fi, snap)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() && !fi.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%w: %s is a %s", ErrNotRegular, name, kind(fi.Mode()))
	}
	return f, nil
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "FIFO (named pipe)"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	default:
		return "special file"
	}
}

// Filter drops, from entries read from the opened directory dir, the
// protected ones: by path, joining each name to the real path of dir's
// descriptor (so however dir was reached), and by identity where that path
// cannot be read or a protected folder was moved aside. Listings and walks
// omit them silently. A hard link to a protected file keeps its name (it
// is the link's maker's own name); opening it is refused.
func (r *Roots) Filter(dir *os.File, ents []fs.DirEntry) []fs.DirEntry {
	if len(r.guards) == 0 {
		return ents
	}
	return r.filter(dir, ents, r.snapshot())
}

func (r *Roots) filter(dir *os.File, ents []fs.DirEntry, snap snapshot) []fs.DirEntry {
	base := fdPath(dir)
	out := ents[:0]
	for _, e := range ents {
		if base != "" && r.protectedAt(filepath.Join(base, e.Name())) != "" {
			continue
		}
		if base != "" && !(snap.moved && e.IsDir()) {
			out = append(out, e)
			continue
		}
		if fi, err := entryLstat(dir, e.Name()); err == nil {
			if id, ok := idOf(fi); ok {
				if _, hit := snap.ids[id]; hit {
					continue
				}
			}
		}
		out = append(out, e)
	}
	return out
}

// FS returns root as an fs.FS whose every Open goes through OpenFile and
// whose directories list through Filter, for the walk of one call. The
// protected paths are stat'ed afresh for each directory opened and that
// snapshot serves the files opened from it (files are still checked by
// identity, real path and hard links each).
func (r *Roots) FS(root *os.Root) fs.FS { return &guardedFS{r: r, root: root} }

type guardedFS struct {
	r    *Roots
	root *os.Root

	mu   sync.Mutex
	snap *snapshot
}

func (g *guardedFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	g.mu.Lock()
	snap := g.snap
	g.mu.Unlock()
	f, err := g.r.openFile(g.root, name, os.O_RDONLY, 0, snap)
	if err != nil {
		return nil, err
	}
	return &guardedFile{File: f, fsys: g}, nil
}

type guardedFile struct {
	*os.File
	fsys *guardedFS
}

func (g *guardedFile) ReadDir(n int) ([]fs.DirEntry, error) {
	ents, err := g.File.ReadDir(n)
	if len(g.fsys.r.guards) == 0 {
		return ents, err
	}
	snap := g.fsys.r.snapshot()
	g.fsys.mu.Lock()
	g.fsys.snap = &snap
	g.fsys.mu.Unlock()
	return g.fsys.r.filter(g.File, ents, snap), err
}

// linkIndex maps the identities of the files inside protected directories,
// to catch hard links to them. It is rebuilt only when a directory in the
// protected trees changed (a new, removed or renamed entry changes its
// directory's mtime and ctime), so it is stat'ing those directories that a
// lookup costs, and only for files with more than one link.
type linkIndex struct {
	mu       sync.Mutex
	dirs     map[string]stamp
	files    map[fileID]string
	complete bool
}

type stamp struct {
	id           fileID
	mtime, ctime int64
}

func stampOf(fi fs.FileInfo) stamp {
	s := stamp{mtime: fi.ModTime().UnixNano()}
	s.id, _ = idOf(fi)
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ctime = ctimeOf(st)
	}
	return s
}

// maxIndexed bounds the protected trees' scan; beyond it a file with more
// than one link is refused rather than guessed about.
const maxIndexed = 200000

func (l *linkIndex) lookup(r *Roots, id fileID) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.fresh() {
		l.build(r)
	}
	if x, ok := l.files[id]; ok {
		return x, nil
	}
	if !l.complete {
		return "", &ProtectedError{Path: "a file with several hard links", Why: "may be a link into", Protected: "the host's state (too many files there to check)"}
	}
	return "", nil
}

func (l *linkIndex) fresh() bool {
	if l.files == nil {
		return false
	}
	for d, s := range l.dirs {
		cur := stamp{}
		if fi, err := os.Lstat(d); err == nil {
			cur = stampOf(fi)
		}
		if cur != s {
			return false
		}
	}
	return true
}

func (l *linkIndex) build(r *Roots) {
	l.dirs, l.files, l.complete = map[string]stamp{}, map[fileID]string{}, true
	n := 0
	for _, g := range r.guards {
		top := g.paths[len(g.paths)-1]
		fi, err := os.Lstat(top)
		if err != nil {
			l.dirs[top] = stamp{} // missing: rebuild once it appears
			continue
		}
		if !fi.IsDir() {
			continue
		}
		_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if n++; n > maxIndexed {
				l.complete = false
				return filepath.SkipAll
			}
			info, err := d.Info()
			if err != nil {
				return nil
			}
			if d.IsDir() {
				l.dirs[p] = stampOf(info)
			} else if id, ok := idOf(info); ok {
				l.files[id] = p
			}
			return nil
		})
	}
}

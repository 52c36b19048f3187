package confine

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Dir is a directory opened for a walk and checked as OpenFile checks what
// it opens (identity, real path, a protected folder moved above it, inside
// the roots). Everything below it is opened relative to its descriptor
// without following symlinks (openat with O_NOFOLLOW), so each directory
// and file a walk reaches is a direct entry of a directory that passed
// these checks: the path checks are made once per directory, not once per
// file. Files are still checked each by identity (a protected file, a hard
// link into a protected folder) and type. Recheck repeats the directory's
// path checks after its files were read, for callers that drop what they
// read when the directory was moved meanwhile.
//
// A Dir is safe for concurrent use by several goroutines once opened;
// Close must be called once, after the last use. A directory opened by Sub
// is a bare descriptor (no os.File, whose creation and closing cost more
// than the directory's own system calls); mu keeps a use from ever
// reaching a descriptor number reused after Close.
type Dir struct {
	r    *Roots
	f    *os.File // the start's (OpenDir); nil for a Sub
	mu   sync.RWMutex
	fd   int // -1 once closed
	name string
	real string // its real path when opened; "" where it cannot be read
	snap snapshot
	// snapAt is when snap was taken.
	snapAt time.Time
	// protectedNames are the names of protected paths directly in this
	// directory: the entries refused by path.
	protectedNames map[string]struct{}
}

// Entry is a directory entry: its name and type (fs.DirEntry.Type).
type Entry struct {
	Name string
	Type fs.FileMode
}

// IsDir reports whether the entry is a directory.
func (e Entry) IsDir() bool { return e.Type.IsDir() }

// errDirClosed is a use of a Dir after Close.
var errDirClosed = errors.New("directory already closed")

// OpenDir opens the directory name through root, checked like OpenFile,
// for a walk.
func (r *Roots) OpenDir(root *os.Root, name string) (*Dir, error) {
	snap := r.snapshot()
	f, err := r.openFile(root, name, os.O_RDONLY, 0, &snap)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%s is not a directory", f.Name())
	}
	fd := -1
	rc, err := f.SyscallConn()
	if err == nil {
		err = rc.Control(func(x uintptr) { fd = int(x) }) //nolint:gosec // a descriptor fits an int
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return r.newDir(f, fd, f.Name(), fdPath(f), snap, time.Now()), nil
}

// snapshotReuse is how long a snapshot of the protected paths serves the
// subdirectories opened after it was taken: walks stat the protected paths
// at most about once a millisecond, not once per folder (a folder's files
// are checked against its snapshot for longer than that anyway).
const snapshotReuse = time.Millisecond

// timedSnapshot is a snapshot and when it was taken.
type timedSnapshot struct {
	snap snapshot
	at   time.Time
}

// recentSnapshot returns a snapshot of the protected paths taken at most
// snapshotReuse ago: the one the last walk took, or a fresh one.
func (r *Roots) recentSnapshot() (snapshot, time.Time) {
	if t := r.recent.Load(); t != nil && time.Since(t.at) <= snapshotReuse {
		return t.snap, t.at
	}
	at := time.Now() // before the stats: the snapshot is at least this new
	t := &timedSnapshot{snap: r.snapshot(), at: at}
	r.recent.Store(t)
	return t.snap, t.at
}

func (r *Roots) newDir(f *os.File, fd int, name, real string, snap snapshot, snapAt time.Time) *Dir {
	d := &Dir{r: r, f: f, fd: fd, name: name, real: real, snap: snap, snapAt: snapAt}
	if d.real != "" {
		for _, x := range r.excludedIn {
			if x[0] == d.real {
				if d.protectedNames == nil {
					d.protectedNames = map[string]struct{}{}
				}
				d.protectedNames[x[1]] = struct{}{}
			}
		}
	}
	return d
}

// Close closes the directory.
func (d *Dir) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fd < 0 {
		return errDirClosed
	}
	fd := d.fd
	d.fd = -1
	if d.f != nil {
		return d.f.Close()
	}
	return unix.Close(fd)
}

// Name is the name the directory was opened by.
func (d *Dir) Name() string { return d.name }

// Sub opens the subdirectory name (an entry of d, not a symlink) and checks
// it with a snapshot of the protected paths at most snapshotReuse old.
func (d *Dir) Sub(name string) (*Dir, error) {
	if strings.ContainsRune(name, '/') || name == "." || name == ".." {
		return nil, fmt.Errorf("%q is not an entry name", name)
	}
	d.mu.RLock()
	if d.fd < 0 {
		d.mu.RUnlock()
		return nil, errDirClosed
	}
	fd, err := openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
	d.mu.RUnlock()
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	full := filepath.Join(d.name, name)
	var st unix.Stat_t
	if err := fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, &fs.PathError{Op: "stat", Path: full, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("%s is not a directory", full)
	}
	snap, snapAt := d.snap, d.snapAt
	if time.Since(snapAt) > snapshotReuse {
		snap, snapAt = d.r.recentSnapshot()
	}
	real := fdRealPath(fd)
	id := fileID{dev: uint64(st.Dev), ino: st.Ino} //nolint:gosec,unconvert // a device number; int32 on darwin
	if err := d.r.verifyID(full, id, 0, &snap, real); err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	return d.r.newDir(nil, fd, full, real, snap, snapAt), nil
}

// Entries reads the directory's entries, less the protected ones (as
// Filter), sorted by name.
func (d *Dir) Entries() ([]Entry, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.fd < 0 {
		return nil, errDirClosed
	}
	ents, err := readDirFD(d.fd, d.name)
	if len(d.r.guards) > 0 {
		out := ents[:0]
		for _, e := range ents {
			if _, hit := d.protectedNames[e.Name]; hit {
				continue
			}
			if d.real == "" || (d.snap.moved && e.IsDir()) {
				if fi, err := lstatIn(d.fd, d.name, e.Name); err == nil {
					if id, ok := idOf(fi); ok {
						if _, hit := d.snap.ids[id]; hit {
							continue
						}
					}
				}
			}
			out = append(out, e)
		}
		ents = out
	}
	slices.SortFunc(ents, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return ents, err
}

// Recheck repeats the directory's path checks on its descriptor now: it
// is still inside the roots and not at or under a protected path.
func (d *Dir) Recheck() error {
	if d.real == "" {
		return nil
	}
	d.mu.RLock()
	if d.fd < 0 {
		d.mu.RUnlock()
		return errDirClosed
	}
	now := fdRealPath(d.fd)
	d.mu.RUnlock()
	if now == d.real {
		return nil
	}
	if x := d.r.protectedAt(now); x != "" {
		return &ProtectedError{Path: now, Why: "is inside", Protected: x}
	}
	return d.r.inside(d.name, now)
}

// File is a regular file opened by Dir.OpenFile: a bare descriptor, read
// with Read (or ReadAll) and closed with Close.
type File struct {
	fd   int
	size int64
}

// OpenFile opens the regular file name, an entry of d (a symlink is not
// followed), without blocking, and refuses it when it is not a regular
// file, is a protected file (by identity), or is a hard link to a file in
// a protected folder.
func (d *Dir) OpenFile(name string) (*File, error) {
	if _, hit := d.protectedNames[name]; hit {
		return nil, &ProtectedError{Path: name, Why: "is", Protected: filepath.Join(d.real, name)}
	}
	d.mu.RLock()
	if d.fd < 0 {
		d.mu.RUnlock()
		return nil, errDirClosed
	}
	fd, err := openat(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY)
	d.mu.RUnlock()
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	var st unix.Stat_t
	if err := fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("%w: %s", ErrNotRegular, name)
	}
	id := fileID{dev: uint64(st.Dev), ino: st.Ino} //nolint:gosec,unconvert // a device number; int32 on darwin
	if x, hit := d.snap.ids[id]; hit {
		_ = unix.Close(fd)
		return nil, &ProtectedError{Path: name, Why: "is", Protected: x}
	}
	if uint64(st.Nlink) > 1 { //nolint:unconvert // uint16 on darwin
		x, err := d.r.links.lookup(d.r, id)
		if err == nil && x != "" {
			err = &ProtectedError{Path: name, Why: "is a hard link to", Protected: x}
		}
		if err != nil {
			_ = unix.Close(fd)
			return nil, err
		}
	}
	return &File{fd: fd, size: st.Size}, nil
}

// Size is the file's size when it was opened.
func (f *File) Size() int64 { return f.size }

// Read reads into p; it returns io.EOF at the end.
func (f *File) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n, err := unix.Read(f.fd, p)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

// ReadAll reads the whole file into buf (grown as needed) and returns it.
// A regular file's read returns less than asked only at its end, so a file
// that did not grow since it was opened takes one read.
func (f *File) ReadAll(buf []byte) ([]byte, error) {
	buf = buf[:0]
	if want := int(f.size) + 1; cap(buf) < want { //nolint:gosec // a regular file within the read limit
		buf = make([]byte, 0, want)
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		asked := cap(buf) - len(buf)
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
		if n < asked && int64(len(buf)) >= f.size {
			return buf, nil
		}
	}
}

// Close closes the file.
func (f *File) Close() error { return unix.Close(f.fd) }

func openat(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

func fstat(fd int, st *unix.Stat_t) error {
	for {
		if err := unix.Fstat(fd, st); err != syscall.EINTR {
			return err
		}
	}
}

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
// Close must be called once, after the last use.
type Dir struct {
	r    *Roots
	f    *os.File
	fd   int
	real string // its real path when opened; "" where it cannot be read
	snap snapshot
	// snapAt is when snap was taken.
	snapAt time.Time
	// protectedNames are the names of protected paths directly in this
	// directory: the entries refused by path.
	protectedNames map[string]struct{}
}

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
	return r.newDir(f, fi, fdPath(f), snap, time.Now())
}

// snapshotReuse is how long a directory's snapshot of the protected paths
// serves the subdirectories opened from it: a walk stats the protected
// paths at most about once a millisecond, not once per folder (a folder's
// files are checked against its snapshot for longer than that anyway).
const snapshotReuse = time.Millisecond

func (r *Roots) newDir(f *os.File, fi fs.FileInfo, real string, snap snapshot, snapAt time.Time) (*Dir, error) {
	if !fi.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%s is not a directory", f.Name())
	}
	d := &Dir{r: r, f: f, real: real, snap: snap, snapAt: snapAt}
	rc, err := f.SyscallConn()
	if err == nil {
		err = rc.Control(func(fd uintptr) { d.fd = int(fd) }) //nolint:gosec // a descriptor fits an int
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	if d.real != "" {
		for _, x := range r.excluded {
			if filepath.Dir(x) == d.real {
				if d.protectedNames == nil {
					d.protectedNames = map[string]struct{}{}
				}
				d.protectedNames[filepath.Base(x)] = struct{}{}
			}
		}
	}
	return d, nil
}

// Close closes the directory.
func (d *Dir) Close() error { return d.f.Close() }

// Name is the name the directory was opened by.
func (d *Dir) Name() string { return d.f.Name() }

// Sub opens the subdirectory name (an entry of d, not a symlink) and checks
// it with a fresh snapshot of the protected paths.
func (d *Dir) Sub(name string) (*Dir, error) {
	if strings.ContainsRune(name, '/') || name == "." || name == ".." {
		return nil, fmt.Errorf("%q is not an entry name", name)
	}
	fd, err := openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	f := os.NewFile(uintptr(fd), filepath.Join(d.f.Name(), name)) //nolint:gosec // a valid descriptor
	snap, snapAt := d.snap, d.snapAt
	if time.Since(snapAt) > snapshotReuse {
		snap, snapAt = d.r.snapshot(), time.Now()
	}
	fi, err := f.Stat()
	var real string
	if err == nil {
		real, err = d.r.verifyDir(f, fi, &snap)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return d.r.newDir(f, fi, real, snap, snapAt)
}

// Entries reads the directory's entries, less the protected ones (as
// Filter), sorted by name.
func (d *Dir) Entries() ([]fs.DirEntry, error) {
	ents, err := d.f.ReadDir(-1)
	if len(d.r.guards) > 0 {
		out := ents[:0]
		for _, e := range ents {
			if _, hit := d.protectedNames[e.Name()]; hit {
				continue
			}
			if d.real == "" || (d.snap.moved && e.IsDir()) {
				if fi, err := entryLstat(d.f, e.Name()); err == nil {
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
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, err
}

// Recheck repeats the directory's path checks on its descriptor now: it
// is still inside the roots and not at or under a protected path.
func (d *Dir) Recheck() error {
	if d.real == "" {
		return nil
	}
	now := fdPath(d.f)
	if now == d.real {
		return nil
	}
	if x := d.r.protectedAt(now); x != "" {
		return &ProtectedError{Path: now, Why: "is inside", Protected: x}
	}
	return d.r.inside(d.f, now)
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
	fd, err := openat(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY)
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

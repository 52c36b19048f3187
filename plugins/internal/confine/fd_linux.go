//go:build linux

package confine

import (
	"io/fs"
	"os"
	"strconv"
	"syscall"
)

// fdLink is the /proc path naming f's descriptor. It goes through Control,
// not Fd, which would put a non-blocking descriptor into blocking mode.
func fdLink(f *os.File) string {
	rc, err := f.SyscallConn()
	if err != nil {
		return ""
	}
	var link string
	if err := rc.Control(func(fd uintptr) { link = "/proc/self/fd/" + strconv.FormatUint(uint64(fd), 10) }); err != nil {
		return ""
	}
	return link
}

// fdPath returns the real path of an open file, read from its descriptor.
func fdPath(f *os.File) string {
	link := fdLink(f)
	if link == "" {
		return ""
	}
	p, err := os.Readlink(link)
	if err != nil {
		return ""
	}
	return p
}

// entryLstat is lstat of name inside the open directory dir: the path goes
// through the descriptor's /proc link, so it names the directory that was
// opened, wherever it is now.
func entryLstat(dir *os.File, name string) (fs.FileInfo, error) {
	link := fdLink(dir)
	if link == "" {
		return nil, os.ErrInvalid
	}
	fi, err := os.Lstat(link + "/" + name)
	if pe, ok := err.(*fs.PathError); ok {
		pe.Path = name // not the /proc path
	}
	return fi, err
}

func ctimeOf(st *syscall.Stat_t) int64 { return st.Ctim.Nano() }

// LstatAt is lstat of name inside the open directory dir, the directory
// that was opened and checked, wherever it is now.
func LstatAt(dir *os.File, name string) (fs.FileInfo, error) { return entryLstat(dir, name) }

// RenameAt renames oldName in oldDir to newName in newDir, relative to the
// two open directories (renameat), so no path is looked up again.
func RenameAt(oldDir *os.File, oldName string, newDir *os.File, newName string) error {
	oc, err := oldDir.SyscallConn()
	if err != nil {
		return err
	}
	nc, err := newDir.SyscallConn()
	if err != nil {
		return err
	}
	var rerr error
	cerr := oc.Control(func(ofd uintptr) {
		if err := nc.Control(func(nfd uintptr) {
			rerr = ignoringEINTR(func() error {
				return syscall.Renameat(int(ofd), oldName, int(nfd), newName) //nolint:gosec // descriptors fit an int
			})
		}); err != nil && rerr == nil {
			rerr = err
		}
	})
	if cerr != nil {
		return cerr
	}
	if rerr != nil {
		return &os.LinkError{Op: "rename", Old: oldName, New: newName, Err: rerr}
	}
	return nil
}

func ignoringEINTR(fn func() error) error {
	for {
		if err := fn(); err != syscall.EINTR {
			return err
		}
	}
}

//go:build linux

package confine

import (
	"bytes"
	"encoding/binary"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
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
	rc, err := f.SyscallConn()
	if err != nil {
		return ""
	}
	var p string
	if err := rc.Control(func(fd uintptr) { p = fdRealPath(int(fd)) }); err != nil { //nolint:gosec // a descriptor fits an int
		return ""
	}
	return p
}

// procFD is /proc/self/fd, opened once: reading a descriptor's link
// relative to it looks up one name instead of the four of its whole path.
var procFD = sync.OnceValue(func() int {
	fd, err := unix.Open("/proc/self/fd", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
})

// fdRealPath returns the real path of the open descriptor fd, "" where it
// cannot be read.
func fdRealPath(fd int) string {
	name := strconv.Itoa(fd)
	if dir := procFD(); dir >= 0 {
		var buf [512]byte
		for {
			n, err := unix.Readlinkat(dir, name, buf[:])
			if err == unix.EINTR {
				continue
			}
			if err == nil && n < len(buf) {
				return string(buf[:n])
			}
			break // a longer path, or an error: the whole path below
		}
	}
	p, err := os.Readlink("/proc/self/fd/" + name)
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

// lstatIn is lstat of name inside the open directory fd, through the
// descriptor's /proc link (so it names the directory that was opened,
// wherever it is now); dirName names the directory in errors.
func lstatIn(fd int, dirName, name string) (fs.FileInfo, error) {
	fi, err := os.Lstat("/proc/self/fd/" + strconv.Itoa(fd) + "/" + name)
	if pe, ok := err.(*fs.PathError); ok {
		pe.Path = dirName + "/" + name // not the /proc path
	}
	return fi, err
}

// direntBufs are buffers for getdents64.
var direntBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// readDirFD lists the open directory fd (less "." and ".."), in the order
// the kernel gives; dirName names it in errors. An entry whose type the
// file system does not give is lstat'ed, and left out when it is gone.
// It reads linux_dirent64 records (inode, offset, record length, type,
// name) from getdents64 itself: os.File.ReadDir would need an os.File.
func readDirFD(fd int, dirName string) ([]Entry, error) {
	bp := direntBufs.Get().(*[]byte)
	defer direntBufs.Put(bp)
	buf := *bp
	var out []Entry
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return out, &fs.PathError{Op: "readdirent", Path: dirName, Err: err}
		}
		if n <= 0 {
			return out, nil
		}
		// One copy of the records holds every name (one allocation per
		// read, not one per entry).
		block := string(buf[:n])
		out = slices.Grow(out, countDirents(buf[:n]))
		for off := 0; off+direntName <= n; {
			reclen := int(binary.NativeEndian.Uint16(buf[off+16 : off+18]))
			if reclen < direntName || off+reclen > n {
				return out, &fs.PathError{Op: "readdirent", Path: dirName, Err: unix.EIO}
			}
			rec := buf[off : off+reclen]
			nameLen := bytes.IndexByte(rec[direntName:], 0)
			if nameLen < 0 {
				nameLen = reclen - direntName
			}
			name := block[off+direntName : off+direntName+nameLen]
			off += reclen
			if binary.NativeEndian.Uint64(rec[0:8]) == 0 || name == "." || name == ".." {
				continue // an inode of 0: an entry being removed
			}
			e := Entry{Name: name}
			switch rec[18] {
			case unix.DT_REG:
			case unix.DT_DIR:
				e.Type = fs.ModeDir
			case unix.DT_LNK:
				e.Type = fs.ModeSymlink
			case unix.DT_FIFO:
				e.Type = fs.ModeNamedPipe
			case unix.DT_SOCK:
				e.Type = fs.ModeSocket
			case unix.DT_BLK:
				e.Type = fs.ModeDevice
			case unix.DT_CHR:
				e.Type = fs.ModeDevice | fs.ModeCharDevice
			default: // DT_UNKNOWN
				var st unix.Stat_t
				if err := unix.Fstatat(fd, e.Name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					continue
				}
				e.Type = modeOfStat(st.Mode)
			}
			out = append(out, e)
		}
	}
}

// countDirents counts the records in a getdents64 buffer.
func countDirents(b []byte) int {
	n := 0
	for off := 0; off+direntName <= len(b); n++ {
		reclen := int(binary.NativeEndian.Uint16(b[off+16 : off+18]))
		if reclen < direntName {
			break
		}
		off += reclen
	}
	return n
}

// direntName is the offset of a linux_dirent64's name.
const direntName = 19

// modeOfStat is the type bits of a stat mode as an fs.FileMode.
func modeOfStat(m uint32) fs.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFBLK:
		return fs.ModeDevice
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	}
	return 0
}

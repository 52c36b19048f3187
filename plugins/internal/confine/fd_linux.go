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
	return os.Lstat(link + "/" + name)
}

func ctimeOf(st *syscall.Stat_t) int64 { return st.Ctim.Nano() }

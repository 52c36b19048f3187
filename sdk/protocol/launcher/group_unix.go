//go:build unix

package launcher

import (
	"os"
	"syscall"
)

// signalGroup sends sig to the process group led by pid (0 only checks
// that the group has a process left).
func signalGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }

// alive reports whether process pid still runs.
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// ownedByMe reports whether this process's user owns the file fi
// describes.
func ownedByMe(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}

package frontend

import (
	"os"

	"golang.org/x/sys/unix"
)

// pollable returns a non-blocking copy of f, read or written through Go's
// network poller, when f is a pipe or a socket (what MCP clients connect
// stdio to), and restore undoes it. A blocking read holds an OS thread and its
// scheduler slot, so every call read from it would first wait for another
// thread to wake up and take the call; a polled read parks instead. It
// returns nil for anything else (a terminal, a file), which is read as is.
func pollable(f *os.File) (copied *os.File, restore func()) {
	fd := int(f.Fd())
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return nil, nil
	}
	if mode := st.Mode & unix.S_IFMT; mode != unix.S_IFIFO && mode != unix.S_IFSOCK {
		return nil, nil
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, nil
	}
	// The flag belongs to the open pipe, which the copy shares with f.
	if unix.SetNonblock(dup, true) != nil {
		_ = unix.Close(dup)
		return nil, nil
	}
	copied = os.NewFile(uintptr(dup), f.Name())
	return copied, func() {
		_ = copied.Close()
		_ = unix.SetNonblock(fd, false)
	}
}

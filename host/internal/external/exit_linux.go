package external

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// waitExit waits until process pid ends (exited true) or stop is closed,
// through a pidfd that the runtime's poller reports readable when the
// process ends: nothing runs meanwhile, so an idle host does not wake for
// it (a poll of /proc five times a second kept mapping the host's pages
// back after it had given them up, tuning.Quiet). ok is false when the
// kernel has no pidfds (before Linux 5.3) or the process is already gone
// from its view.
func waitExit(pid int, stop <-chan struct{}) (exited, ok bool) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return false, false
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer func() { _ = f.Close() }()
	rc, err := f.SyscallConn()
	if err != nil {
		return false, false
	}
	waiting := make(chan struct{})
	defer close(waiting)
	go func() {
		select {
		case <-stop:
			_ = f.SetReadDeadline(time.Now()) // ends the wait below
		case <-waiting:
		}
	}()
	err = rc.Read(func(fd uintptr) bool {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}} //nolint:gosec // G115: a descriptor fits in an int32
		n, perr := unix.Poll(p, 0)
		return perr == nil && n > 0
	})
	return err == nil, true
}

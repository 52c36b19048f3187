package control

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerCred asks the kernel who connected (SO_PEERCRED): the uid and pid as
// they were at connect(2), translated into this process's namespaces.
// alive, when not nil, reports whether that very process still exists
// (through a pidfd from SO_PEERPIDFD, Linux 6.5+): checked after the peer
// was judged by its /proc entries, it proves the pid was not reused by
// another process in between.
func peerCred(c *net.UnixConn) (p Peer, alive func() bool, release func(), err error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Peer{}, nil, func() {}, err
	}
	var cred *syscall.Ucred
	var cerr error
	pidfd := -1
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
		if soPeerPIDFD != 0 {
			if n, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, soPeerPIDFD); err == nil && n >= 0 {
				pidfd = n
			}
		}
	}); err != nil {
		return Peer{}, nil, func() {}, err
	}
	release = func() {
		if pidfd >= 0 {
			_ = unix.Close(pidfd)
		}
	}
	if cerr != nil {
		return Peer{}, nil, release, fmt.Errorf("SO_PEERCRED: %w", cerr)
	}
	if pidfd >= 0 {
		alive = func() bool {
			// Signal 0 only checks; a zombie still holds its pid (EPERM
			// would also mean the process exists).
			err := unix.PidfdSendSignal(pidfd, 0, nil, 0)
			return err == nil || errors.Is(err, unix.EPERM)
		}
	}
	return Peer{PID: int(cred.Pid), UID: int(cred.Uid), GID: int(cred.Gid)}, alive, release, nil
}

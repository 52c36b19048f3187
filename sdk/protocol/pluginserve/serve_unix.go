//go:build unix

package pluginserve

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// guardStdout points file descriptor 1 at stderr and keeps the original
// stdout only for go-plugin's handshake line, so a stray fmt.Println (or a
// C library writing to fd 1) cannot corrupt the handshake.
func guardStdout() {
	orig, err := unix.Dup(1)
	if err != nil {
		return
	}
	if err := unix.Dup2(2, 1); err != nil {
		_ = unix.Close(orig)
		return
	}
	unix.CloseOnExec(orig)
	os.Stdout = os.NewFile(uintptr(orig), "/dev/stdout")
}

// exitNow stops the plugin's own process group (children such as shell
// commands) when it leads one, then exits. Orphaned (the host is gone), it
// also kills what ignored SIGTERM, since nobody else will.
func exitNow(code int, orphaned bool) {
	pid := os.Getpid()
	if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
		signal.Ignore(syscall.SIGTERM)
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		time.Sleep(100 * time.Millisecond)
		if orphaned {
			_ = syscall.Kill(-pid, syscall.SIGKILL) // ends this process too
		}
	}
	os.Exit(code)
}

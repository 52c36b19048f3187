//go:build windows

package launcher

import (
	"math"
	"os"
	"syscall"

	"golang.org/x/sys/windows"
)

// signalGroup is the Windows stand-in for signalling a process group:
// Windows has neither process groups that can be signalled nor SIGTERM, so
// SIGKILL terminates the plugin process alone (not processes it started),
// SIGTERM does nothing (the graceful stop is go-plugin's shutdown call,
// made before), and 0 checks that the process still runs.
func signalGroup(pid int, sig syscall.Signal) error {
	switch sig {
	case 0:
		if !alive(pid) {
			return syscall.ESRCH
		}
		return nil
	case syscall.SIGKILL:
		p, err := os.FindProcess(pid)
		if err != nil {
			return syscall.ESRCH
		}
		defer func() { _ = p.Release() }()
		if err := p.Kill(); err != nil && alive(pid) {
			return err
		}
		return nil
	default:
		return nil
	}
}

// alive reports whether process pid still runs.
func alive(pid int) bool {
	if pid <= 0 || int64(pid) > math.MaxUint32 {
		return false
	}
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return false
	}
	defer func() { _ = windows.CloseHandle(h) }()
	var code uint32
	if err := windows.GetExitCodeProcess(h, &code); err != nil {
		return false
	}
	return code == 259 // STILL_ACTIVE
}

// ownedByMe is true on Windows, where the temporary folder is the user's
// own.
func ownedByMe(os.FileInfo) bool { return true }

//go:build windows

package pluginserve

import (
	"os"

	"golang.org/x/sys/windows"
)

// guardStdout points the process's standard output handle at stderr and
// keeps the original handle only for go-plugin's handshake line (os.Stdout),
// the Windows counterpart of the dup2 on Unix: a child process or a library
// that writes to GetStdHandle(STD_OUTPUT_HANDLE) after this reaches stderr.
// What differs: a C runtime's file descriptor 1, bound to the handle when
// the process started, keeps writing to the original stdout.
func guardStdout() {
	_ = windows.SetStdHandle(windows.STD_OUTPUT_HANDLE, windows.Handle(os.Stderr.Fd()))
}

// exitNow exits. Windows has no process groups to signal: the plugin's
// children are not stopped with it (a host that needs that puts the plugin
// in a job object).
func exitNow(code int, _ bool) {
	os.Exit(code)
}

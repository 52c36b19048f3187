//go:build windows

package sysproc

import "syscall"

// Attr returns attributes for a child in a process group of its own (so a
// console's Ctrl-C does not reach it). Windows has no signals to send
// when the parent dies; the Switchboard SDK's parent watch is what ends
// an orphaned plugin.
func Attr(syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}

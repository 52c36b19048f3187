//go:build unix && !linux

package sysproc

import "syscall"

// Attr returns attributes for a child in its own process group. Only Linux
// can also signal it when its parent dies; elsewhere the Switchboard SDK's
// parent watch is what ends an orphaned plugin.
func Attr(syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

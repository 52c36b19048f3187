//go:build linux

package sysproc

import "syscall"

// Attr returns attributes for a child in its own process group that gets
// sig when its parent dies.
func Attr(sig syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: sig}
}

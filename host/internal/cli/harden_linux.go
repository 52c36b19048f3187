//go:build linux

package cli

import "golang.org/x/sys/unix"

// hideMemory makes the host non-dumpable: other processes of the same user
// (a tool's `cat /proc/<host>/environ`, a debugger) can no longer read its
// environment or memory, nor attach to it. Processes the host starts are
// dumpable again after their exec, as usual.
func hideMemory() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}

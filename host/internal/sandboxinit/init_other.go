//go:build !linux

package sandboxinit

import (
	"fmt"
	"os"
)

// Run exists on Linux only.
func Run() int {
	fmt.Fprintln(os.Stderr, "switchboard sandbox: the kernel sandbox is implemented on Linux only")
	return 2
}

// CloseOnExecFrom does nothing here.
func CloseOnExecFrom(int) {}

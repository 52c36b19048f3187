//go:build linux

package sandboxinit

import (
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The spawner and the helpers are executed through a descriptor or
// /proc/self/exe (the file the host checked, not whatever has its name
// since), so the kernel names the process "4" or "exe". Package
// initialisation runs on the main thread, whose name ps and top show: it
// takes the name of the binary the host ran (argv[0]) instead.
func init() {
	// PR_GET_NAME rather than /proc/self/comm: a read of procfs cost this
	// start half a millisecond.
	var b [16]byte
	if unix.Prctl(unix.PR_GET_NAME, uintptr(unsafe.Pointer(&b[0])), 0, 0, 0) != nil { //nolint:gosec // G103: the kernel writes 16 bytes at most
		return
	}
	comm := unix.ByteSliceToString(b[:])
	if (comm != "exe" && (comm == "" || strings.Trim(comm, "0123456789") != "")) || len(os.Args) == 0 || os.Args[0] == "" {
		return
	}
	name := filepath.Base(os.Args[0])
	if len(name) > 15 { // the kernel keeps 15 bytes
		name = name[:15]
	}
	if p, err := unix.BytePtrFromString(name); err == nil {
		_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(p)), 0, 0, 0) //nolint:gosec // G103: the kernel copies the name
	}
}

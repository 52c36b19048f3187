package pluginserve

import (
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A pinned plugin is executed through the descriptor its host hashed
// (/proc/self/fd/3), so the kernel names its process "3" in ps and top.
// Package initialisation runs on the main thread, whose name those show:
// it takes the name of the binary the host ran (argv[0]) instead.
func init() { nameAfterArgv0() }

// nameAfterArgv0 names this thread after argv[0] when the kernel named the
// process after a descriptor (a name of digits only).
func nameAfterArgv0() {
	b, err := os.ReadFile("/proc/self/comm")
	comm := strings.TrimSpace(string(b))
	if err != nil || comm == "" || strings.Trim(comm, "0123456789") != "" || len(os.Args) == 0 || os.Args[0] == "" {
		return
	}
	name := filepath.Base(os.Args[0])
	if len(name) > 15 { // the kernel keeps 15 bytes
		name = name[:15]
	}
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return
	}
	_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(p)), 0, 0, 0) //nolint:gosec // G103: the kernel copies the name
}

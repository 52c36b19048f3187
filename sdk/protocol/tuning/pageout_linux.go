//go:build linux

package tuning

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// releaseStartupPages unmaps the pages of the running binary that are
// resident now (MADV_DONTNEED on its read-only mappings): most were
// touched only while starting (package initialisation, config decoding,
// launching). They are clean file pages, so nothing is lost; whatever the
// host still uses is mapped again on demand. This keeps a long-running
// host's resident size to its working set.
func releaseStartupPages() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != exe {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		// Only read-only or executable mappings: never the writable data.
		if strings.Contains(fields[1], "w") {
			continue
		}
		// Unmapped, not evicted: the file's pages stay in the page
		// cache, shared with the plugins that run this same binary
		// (MADV_PAGEOUT skips pages other processes map, so it freed
		// nothing once built-ins ran from it), and what is used again
		// costs a minor fault.
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_DONTNEED)
	}
}

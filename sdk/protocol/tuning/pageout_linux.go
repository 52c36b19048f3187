//go:build linux

package tuning

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// releaseStartupPages tells the kernel it may reclaim the pages of the
// running binary that are resident now: most were touched only while
// starting (package initialisation, config decoding, launching). They are
// clean file pages, so nothing is lost; whatever the host still uses is
// faulted back in on demand. This keeps a long-running host's resident
// size to its working set.
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
		// MADV_PAGEOUT needs Linux 5.4; older kernels refuse it harmlessly.
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_PAGEOUT)
	}
}

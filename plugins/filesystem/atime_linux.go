//go:build linux

package filesystem

import (
	"io/fs"
	"syscall"
	"time"
)

func accessTime(st fs.FileInfo) (time.Time, bool) {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return time.Unix(s.Atim.Sec, s.Atim.Nsec), true
	}
	return time.Time{}, false
}

func ctimeNano(s *syscall.Stat_t) int64 { return s.Ctim.Nano() }

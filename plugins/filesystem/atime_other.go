//go:build !linux

package filesystem

import (
	"io/fs"
	"syscall"
	"time"
)

func accessTime(fs.FileInfo) (time.Time, bool) { return time.Time{}, false }

func ctimeNano(s *syscall.Stat_t) int64 { return s.Ctimespec.Nano() }

//go:build !linux

package filesystem

import (
	"io/fs"
	"time"
)

func accessTime(fs.FileInfo) (time.Time, bool) { return time.Time{}, false }

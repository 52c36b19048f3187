// Package regularfile reads small files in folders servers may write
// (a repository's .git file, commondir and config), where a FIFO, a device
// or a file of gigabytes may have been put in place of the file expected.
package regularfile

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// Read returns the contents of the file at path when it is a regular file
// of at most max bytes. The open does not wait (a FIFO there once held
// the host's start, and the git built-in's calls, for ever), and anything
// but a regular file is refused, as is one larger than max (one 4 GB long
// was read whole).
func Read(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > max {
		return nil, fmt.Errorf("%s is not a regular file of at most %d bytes", path, max)
	}
	return io.ReadAll(io.LimitReader(f, max))
}

//go:build !linux

package launcher

import (
	"fmt"
	"os"
	"path/filepath"
)

// pinSocket checks that path is a socket, not a link (without
// /proc/self/fd, the host connects by the path itself).
func pinSocket(dir, name string) (string, func(), error) {
	path := filepath.Join(dir, name)
	st, err := os.Lstat(path)
	if err != nil {
		return "", nil, fmt.Errorf("its socket %q: %w", path, err)
	}
	if st.Mode()&os.ModeSocket == 0 {
		return "", nil, fmt.Errorf("its socket %q is not a socket (a link or another file)", path)
	}
	return path, func() {}, nil
}

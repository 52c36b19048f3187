//go:build linux

package launcher

import (
	"fmt"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// pinSocket opens the socket name in the folder dir (the host's own,
// which the plugin cannot replace) without following a link, and returns
// a path that leads to that socket for as long as the returned function
// has not been called.
func pinSocket(dir, name string) (string, func(), error) {
	path := filepath.Join(dir, name)
	d, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("its socket folder %q: %w", dir, err)
	}
	fd, err := unix.Openat(d, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	_ = unix.Close(d)
	if err != nil {
		return "", nil, fmt.Errorf("its socket %q: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		_ = unix.Close(fd)
		return "", nil, fmt.Errorf("its socket %q is not a socket (a link or another file)", path)
	}
	if st.Nlink != 1 {
		// A hard link to a socket made elsewhere (a plugin outside any
		// sandbox can make one; red team, 2026-12-07): its own socket
		// has one name.
		_ = unix.Close(fd)
		return "", nil, fmt.Errorf("its socket %q has %d names (a hard link to a socket elsewhere)", path, st.Nlink)
	}
	return "/proc/self/fd/" + strconv.Itoa(fd), func() { _ = unix.Close(fd) }, nil
}

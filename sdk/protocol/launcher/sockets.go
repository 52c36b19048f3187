package launcher

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// socketRootPrefix names the folder, in the system's temporary folder, in
// which this process keeps its plugins' temporary folders (go-plugin's
// socket folders, the sandboxes' private folders): one per host process,
// named after its pid. They are removed when their plugin stops, which
// never happens for a killed host's; the next host to start removes the
// folders of hosts that are gone.
const socketRootPrefix = "switchboard-"

// maxSocketPath is the longest socket path this keeps below (the kernel's
// limit is 108 bytes on Linux, 104 on macOS): where the temporary folder's
// own path is too long for one more level, go-plugin's default stays.
const maxSocketPath = 100

var socketRoot struct {
	once sync.Once
	dir  string
}

// TempDir returns this process's folder for its plugins' temporary
// folders, made on first use, or "" (the system's temporary folder, as
// before) where it cannot be made or its path would be too long for the
// sockets in it.
func TempDir() string {
	socketRoot.once.Do(func() {
		base := os.TempDir()
		// switchboard-PID-RANDOM/plugin-dirRANDOM/pluginRANDOM
		if len(base)+len("/switchboard-4194304-1234567890/plugin-dir1234567890/plugin1234567890") > maxSocketPath {
			return
		}
		removeStaleSocketRoots(base)
		if d, err := os.MkdirTemp(base, socketRootPrefix+strconv.Itoa(os.Getpid())+"-"); err == nil {
			socketRoot.dir = d
		}
	})
	return socketRoot.dir
}

// RemoveTempDir removes this process's TempDir: the host calls it at its
// exit, once its plugins have stopped.
func RemoveTempDir() {
	if d := socketRoot.dir; d != "" {
		_ = os.RemoveAll(d)
	}
}

// removeStaleSocketRoots removes the TempDir folders in base of this
// user's hosts that no longer run.
func removeStaleSocketRoots(base string) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), socketRootPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || pid == os.Getpid() || alive(pid) {
			continue
		}
		dir := filepath.Join(base, e.Name())
		if fi, err := os.Lstat(dir); err == nil && fi.IsDir() && ownedByMe(fi) {
			_ = os.RemoveAll(dir)
		}
	}
}

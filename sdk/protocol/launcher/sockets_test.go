package launcher

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A plugin names its call socket; the host connects only to a socket of
// that name directly in the plugin's socket folder. A plugin that names a
// path out of the folder, a folder inside it, or a link (symbolic or hard)
// it made there to any other socket (another host's control socket, a listener outside
// every sandbox) gets no connection: the socket outside is never reached.
func TestDialInFolderReachesNothingOutside(t *testing.T) {
	base, err := os.MkdirTemp("", "sbdf") // short: socket paths have ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	folder := filepath.Join(base, "plugin")
	if err := os.MkdirAll(filepath.Join(folder, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	outside, err := net.Listen("unix", filepath.Join(base, "victim"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = outside.Close() }()
	if err := os.Symlink(filepath.Join(base, "victim"), filepath.Join(folder, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(base, filepath.Join(folder, "up")); err != nil {
		t.Fatal(err)
	}
	// A hard link (red team, 2026-12-07): a plugin outside any sandbox
	// can make one to a socket in any folder of the same file system.
	if err := os.Link(filepath.Join(base, "victim"), filepath.Join(folder, "hard")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"link", "hard", "../victim", "up/victim", "sub/../../victim", filepath.Join(base, "victim"), "", ".", ".."} {
		if c, err := dialInFolder(folder, name); err == nil {
			_ = c.Close()
			t.Errorf("dialInFolder(%q) connected", name)
		}
	}
	// The plugin's own socket in the folder is reached.
	own, err := net.Listen("unix", filepath.Join(folder, "calls1"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = own.Close() }()
	c, err := dialInFolder(folder, "calls1")
	if err != nil {
		t.Fatalf("dialInFolder(calls1): %v", err)
	}
	_ = c.Close()
	// A connection made is queued at once: none is.
	_ = outside.(*net.UnixListener).SetDeadline(time.Now())
	if c, err := outside.Accept(); err == nil {
		_ = c.Close()
		t.Fatal("the socket outside the plugin's folder was reached")
	}
}

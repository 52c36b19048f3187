package launcher

import (
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// The host connects to a plugin's socket only if it is a socket with one
// name, directly in the plugin's socket folder: a hard link to a socket
// elsewhere (a plugin outside any sandbox can make one to a socket in any
// folder of the same file system, and name it in its handshake; red team,
// 2026-12-07) is refused, as a symbolic link is.
func TestPinSocketRefusesAHardLink(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("pinSocket checks the link count on Linux")
	}
	base, err := os.MkdirTemp("", "sbps") // short: socket paths have ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	folder := filepath.Join(base, "plugin")
	if err := os.Mkdir(folder, 0o700); err != nil {
		t.Fatal(err)
	}
	outside, err := net.Listen("unix", filepath.Join(base, "victim"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = outside.Close() }()
	if err := os.Link(filepath.Join(base, "victim"), filepath.Join(folder, "hard")); err != nil {
		t.Fatal(err)
	}
	if addr, release, err := pinSocket(folder, "hard"); err == nil {
		release()
		t.Fatalf("pinSocket accepted a hard link to a socket elsewhere (%s)", addr)
	}
	// The plugin's own socket is pinned.
	own, err := net.Listen("unix", filepath.Join(folder, "plugin1"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = own.Close() }()
	addr, release, err := pinSocket(folder, "plugin1")
	if err != nil {
		t.Fatalf("pinSocket(plugin1): %v", err)
	}
	defer release()
	c, err := net.Dial("unix", addr)
	if err != nil {
		t.Fatalf("dial the pinned socket: %v", err)
	}
	_ = c.Close()
}

package launcher

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

// The handshake's address must be the plugin's own socket or a numeric
// loopback address: go-plugin looks a name up in the host, and a plugin
// without network sent data out as the names it made the host look up
// (red team round 6). What follows the line passes unchanged.
func TestHandshakeGuard(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "plugin4")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	// A link in the socket folder to a socket elsewhere (another host's
	// control socket, say), and a file that is no socket.
	elsewhere := filepath.Join(t.TempDir(), "s")
	other, err := net.Listen("unix", elsewhere)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Close() }()
	if err := os.Symlink(elsewhere, filepath.Join(dir, "plugin5")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plugin6"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// A link to the folder elsewhere, and the socket named through it
	// (red team round 11).
	if err := os.Symlink(filepath.Dir(elsewhere), filepath.Join(dir, "d")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ line, refused string }{
		{"1|2|unix|" + sock + "|grpc|CERT", ""},
		{"1|2|unix|" + filepath.Join(dir, "plugin5") + "|grpc|CERT", "not a socket"},
		{"1|2|unix|" + filepath.Join(dir, "plugin6") + "|grpc|CERT", "not a socket"},
		{"1|2|tcp|127.0.0.1:4567|grpc|", ""},
		{"1|2|tcp|[::1]:4567|grpc|", ""},
		{"1|2|tcp|exfil-TOPSECRET.attacker.invalid:47001|grpc|", "not a numeric loopback address"},
		{"1|2|tcp|localhost:4567|grpc|", "not a numeric loopback address"},
		{"1|2|tcp|10.0.0.1:4567|grpc|", "not a numeric loopback address"},
		{"1|2|unix|/tmp/elsewhere/sock|grpc|", "not in its socket folder"},
		{"1|2|unix|" + dir + "/../../x|grpc|", "not in its socket folder"},
		{"1|2|unix|" + filepath.Join(dir, "d", "s") + "|grpc|", "not in its socket folder"},
		{"1|2|unix|" + filepath.Join(dir, "sub", "plugin4") + "|grpc|", "not in its socket folder"},
		{"1|2|udp|127.0.0.1:1|grpc|", "neither unix nor tcp"},
		{"not a handshake", ""},
	} {
		for _, split := range []bool{false, true} {
			checkGuard(t, dir, false, tc.line, tc.refused, split)
		}
	}
	// A plugin without network names its Unix socket, never an address.
	for _, tc := range []struct{ line, refused string }{
		{"1|2|unix|" + sock + "|grpc|CERT", ""},
		{"1|2|tcp|127.0.0.1:4567|grpc|", "has no network"},
		{"1|2|tcp|[::1]:4567|grpc|", "has no network"},
	} {
		checkGuard(t, dir, true, tc.line, tc.refused, false)
	}
}

func checkGuard(t *testing.T, dir string, unixOnly bool, line, refused string, split bool) {
	t.Helper()
	var r io.Reader = strings.NewReader(line + "\nlater output\n")
	if split {
		r = iotest.OneByteReader(r)
	}
	g := &handshakeGuard{rc: io.NopCloser(r), socketDir: dir, unixOnly: unixOnly}
	got, err := io.ReadAll(g)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = g.Close() }()
	first, rest, _ := strings.Cut(string(got), "\n")
	if rest != "later output\n" {
		t.Errorf("%q: what followed the handshake became %q", line, rest)
	}
	if refused == "" && strings.Contains(line, "|unix|") && runtime.GOOS == "linux" {
		// The socket, pinned: the host connects through its descriptor.
		parts := strings.Split(first, "|")
		if len(parts) < 4 || !strings.HasPrefix(parts[3], "/proc/self/fd/") {
			t.Errorf("%q passed as %q, want its socket named by a descriptor", line, first)
			return
		}
		if c, err := net.Dial("unix", parts[3]); err != nil {
			t.Errorf("the pinned socket %s does not connect: %v", parts[3], err)
		} else {
			_ = c.Close()
		}
		return
	}
	switch {
	case refused == "" && first != line:
		t.Errorf("%q passed as %q", line, first)
	case refused != "" && (!strings.HasPrefix(first, "switchboard: refused") || !strings.Contains(first, refused)):
		t.Errorf("%q passed as %q, want it refused: %s", line, first, refused)
	}
}

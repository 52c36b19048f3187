package launcher

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// The handshake's address must be the plugin's own socket or a numeric
// loopback address: go-plugin looks a name up in the host, and a plugin
// without network sent data out as the names it made the host look up
// (red team round 6). What follows the line passes unchanged.
func TestHandshakeGuard(t *testing.T) {
	const dir = "/tmp/switchboard-1-2/plugin-dir3"
	for _, tc := range []struct{ line, refused string }{
		{"1|2|unix|/tmp/switchboard-1-2/plugin-dir3/plugin4|grpc|CERT", ""},
		{"1|2|tcp|127.0.0.1:4567|grpc|", ""},
		{"1|2|tcp|[::1]:4567|grpc|", ""},
		{"1|2|tcp|exfil-TOPSECRET.attacker.invalid:47001|grpc|", "not a numeric loopback address"},
		{"1|2|tcp|localhost:4567|grpc|", "not a numeric loopback address"},
		{"1|2|tcp|10.0.0.1:4567|grpc|", "not a numeric loopback address"},
		{"1|2|unix|/tmp/elsewhere/sock|grpc|", "not in its socket folder"},
		{"1|2|unix|/tmp/switchboard-1-2/plugin-dir3/../../x|grpc|", "not in its socket folder"},
		{"1|2|udp|127.0.0.1:1|grpc|", "neither unix nor tcp"},
		{"not a handshake", ""},
	} {
		for _, split := range []bool{false, true} {
			checkGuard(t, dir, false, tc.line, tc.refused, split)
		}
	}
	// A plugin without network names its Unix socket, never an address.
	for _, tc := range []struct{ line, refused string }{
		{"1|2|unix|/tmp/switchboard-1-2/plugin-dir3/plugin4|grpc|CERT", ""},
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
	got, err := io.ReadAll(&handshakeGuard{rc: io.NopCloser(r), socketDir: dir, unixOnly: unixOnly})
	if err != nil {
		t.Fatal(err)
	}
	first, rest, _ := strings.Cut(string(got), "\n")
	if rest != "later output\n" {
		t.Errorf("%q: what followed the handshake became %q", line, rest)
	}
	switch {
	case refused == "" && first != line:
		t.Errorf("%q passed as %q", line, first)
	case refused != "" && (!strings.HasPrefix(first, "switchboard: refused") || !strings.Contains(first, refused)):
		t.Errorf("%q passed as %q, want it refused: %s", line, first, refused)
	}
}

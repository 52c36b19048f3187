package launcher

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
)

// handshakeGuard passes a plugin's stdout on to go-plugin, checking the
// first line, go-plugin's handshake (CORE|APP|NETWORK|ADDRESS|PROTOCOL…),
// before go-plugin reads it: the address must be a Unix socket in the
// plugin's own socket folder or a numeric loopback address. go-plugin
// resolves a TCP address's name in the host, outside the plugin's network
// namespace: a plugin without network sent data out as the names it asked
// the host's resolver for (red team round 6). A refused line is replaced
// by one that says why, which go-plugin reports as the start's error.
type handshakeGuard struct {
	rc        io.ReadCloser
	socketDir string
	unixOnly  bool   // the plugin has no network: no TCP address
	line      []byte // the first line, while it is read
	out       []byte // what to pass on before reading more
	checked   bool
}

func (g *handshakeGuard) Read(p []byte) (int, error) {
	for !g.checked && len(g.out) == 0 {
		buf := make([]byte, 4096)
		n, err := g.rc.Read(buf)
		g.line = append(g.line, buf[:n]...)
		if i := bytes.IndexByte(g.line, '\n'); i >= 0 || err != nil || len(g.line) > 64<<10 {
			if i < 0 {
				i = len(g.line) - 1
			}
			first, rest := g.line[:i+1], g.line[i+1:]
			if why := refuseHandshake(string(first), g.socketDir, g.unixOnly); why != "" {
				first = []byte("switchboard: " + why + "\n")
			}
			g.out, g.line, g.checked = append(append([]byte{}, first...), rest...), nil, true
		}
		if err != nil && len(g.out) == 0 {
			return 0, err
		}
	}
	if len(g.out) > 0 {
		n := copy(p, g.out)
		g.out = g.out[n:]
		return n, nil
	}
	return g.rc.Read(p)
}

func (g *handshakeGuard) Close() error { return g.rc.Close() }

// refuseHandshake says why a handshake line's address is refused ("" when
// it is not, or the line is no handshake: go-plugin reports that).
func refuseHandshake(line, socketDir string, unixOnly bool) string {
	parts := strings.Split(strings.TrimSpace(line), "|")
	if len(parts) < 4 {
		return ""
	}
	network, addr := parts[2], parts[3]
	switch network {
	case "unix":
		if socketDir == "" {
			return ""
		}
		dir := filepath.Clean(socketDir)
		if a := filepath.Clean(addr); filepath.IsAbs(a) && strings.HasPrefix(a, dir+string(filepath.Separator)) {
			return ""
		}
		return fmt.Sprintf("refused the plugin's handshake: its socket %q is not in its socket folder %s", addr, socketDir)
	case "tcp":
		if unixOnly {
			return fmt.Sprintf("refused the plugin's handshake: it has no network, so its address %q cannot be its own; a plugin listens on a Unix socket in its socket folder", addr)
		}
		host, _, err := net.SplitHostPort(addr)
		if ip := net.ParseIP(host); err == nil && ip != nil && ip.IsLoopback() {
			return ""
		}
		return fmt.Sprintf("refused the plugin's handshake: its address %q is not a numeric loopback address (a name would be looked up by the host)", addr)
	}
	return fmt.Sprintf("refused the plugin's handshake: network %q is neither unix nor tcp", network)
}

package launcher

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
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
	unixOnly  bool // the plugin has no network: no TCP address
	mu        sync.Mutex
	release   func() // closes the descriptor of the plugin's socket (pinSocket); under mu
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
			} else if pinned, release, why := pinHandshake(string(first), g.socketDir); why != "" {
				first = []byte("switchboard: " + why + "\n")
			} else {
				first = []byte(pinned)
				g.mu.Lock()
				g.release = release
				g.mu.Unlock()
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

func (g *handshakeGuard) Close() error {
	g.releaseSocket()
	return g.rc.Close()
}

// releaseSocket closes the descriptor the host connects to the plugin
// through (the runner calls it once the plugin has exited).
func (g *handshakeGuard) releaseSocket() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.release != nil {
		g.release()
		g.release = nil
	}
}

// pinHandshake makes a handshake that names a Unix socket in socketDir
// name that very socket: what the plugin's path leads to is checked to be
// a socket, not a link (a plugin put a symbolic link in its socket folder
// and the host connected to any socket the link named: another host's
// control socket, a listener outside every sandbox; red team round 10),
// and the host connects to it through a descriptor it holds
// (/proc/self/fd/N on Linux), so the plugin cannot swap the path after the
// check. Other handshakes pass unchanged. It returns the handshake to pass
// on and what releases the descriptor, or why it is refused.
func pinHandshake(line, socketDir string) (string, func(), string) {
	parts := strings.Split(strings.TrimRight(line, "\r\n"), "|")
	if socketDir == "" || len(parts) < 4 || parts[2] != "unix" {
		return line, nil, ""
	}
	addr, release, err := pinSocket(socketDir, filepath.Base(parts[3]))
	if err != nil {
		return "", nil, fmt.Sprintf("refused the plugin's handshake: %v", err)
	}
	parts[3] = addr
	return strings.Join(parts, "|") + "\n", release, ""
}

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
		// Directly in the folder: a folder below it may be a link the
		// plugin made to any folder (red team round 11), and pinSocket
		// follows no link in the name alone.
		if a := filepath.Clean(addr); filepath.IsAbs(a) && filepath.Dir(a) == filepath.Clean(socketDir) {
			return ""
		}
		return fmt.Sprintf("refused the plugin's handshake: its socket %q is not in its socket folder %s itself", addr, socketDir)
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

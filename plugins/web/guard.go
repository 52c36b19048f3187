package web

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
)

// Resolver looks up a host's addresses; *net.Resolver is one. Tests inject
// their own to simulate hostile DNS without any network.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

var blockedRanges = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible"},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "IPv4-translated"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("2001::/32"), "Teredo"},
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "NAT64"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("3fff::/20"), "documentation"},
	{netip.MustParsePrefix("2002::/16"), "6to4"},
	{netip.MustParsePrefix("fc00::/7"), "unique-local"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// Blocked returns why addr may not be dialled by default, or "".
// IPv4-mapped, IPv4-compatible and NAT64 addresses are judged by the IPv4
// address they carry as well.
func Blocked(addr netip.Addr) string {
	addr = addr.WithZone("")
	if addr.Is4In6() {
		if r := Blocked(addr.Unmap()); r != "" {
			return r + " (IPv4-mapped)"
		}
		return ""
	}
	if addr.Is4() && addr == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return "broadcast"
	}
	for _, b := range blockedRanges {
		if b.prefix.Contains(addr) {
			return b.reason
		}
	}
	return ""
}

// blockedNames are refused before any lookup.
func blockedName(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	return h == "localhost" || strings.HasSuffix(h, ".localhost") || strings.HasSuffix(h, ".local") ||
		h == "metadata.google.internal" || h == "metadata" || h == ""
}

// looseIPv4 parses the forms inet_aton accepts and browsers normalise:
// 2130706433, 0x7f000001, 017700000001, 127.1, 0177.0.0.1. A host like
// that is an address, never a name to look up.
func looseIPv4(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var vals []uint64
	for _, p := range parts {
		if p == "" {
			return netip.Addr{}, false
		}
		base, digits := 10, p
		switch {
		case strings.HasPrefix(strings.ToLower(p), "0x"):
			base, digits = 16, p[2:]
			if digits == "" {
				digits = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		v, err := strconv.ParseUint(digits, base, 64)
		if err != nil {
			return netip.Addr{}, false
		}
		vals = append(vals, v)
	}
	var n uint64
	last := len(vals) - 1
	for i, v := range vals[:last] {
		if v > 255 {
			return netip.Addr{}, false
		}
		n |= v << (8 * (3 - i))
	}
	if vals[last] >= 1<<(8*(4-last)) || vals[last] > math.MaxUint32 {
		return netip.Addr{}, false
	}
	n |= vals[last]
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true //nolint:gosec // G115: n < 2^32, checked above
}

// guard decides which addresses may be dialled.
type guard struct {
	allowed  []netip.Prefix
	resolver Resolver
}

// opened reports whether allow_private_networks opens addr.
func (g *guard) opened(addr netip.Addr) bool {
	addr = addr.WithZone("")
	for _, pr := range g.allowed {
		if pr.Contains(addr) || (addr.Is4In6() && pr.Contains(addr.Unmap())) {
			return true
		}
	}
	return false
}

func (g *guard) check(addr netip.Addr) error {
	addr = addr.WithZone("")
	if g.opened(addr) {
		return nil
	}
	reason := Blocked(addr)
	if reason == "" && ownAddress(addr) {
		reason = "this machine's own"
	}
	if reason != "" {
		return fmt.Errorf("refusing to connect to %s: %s address (open its range with allow_private_networks in the web block if you mean it)", addr, reason)
	}
	return nil
}

// ownAddress reports whether addr is one of this machine's interface
// addresses: a service listening on all addresses (0.0.0.0, ::) is
// reached through any of them as through loopback (found from outside:
// the machine's public address reached a local server). An address that
// cannot be read is not known to be ours; the check after connecting
// (sameEnds) still holds.
func ownAddress(addr netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	addr = addr.Unmap()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == addr {
				return true
			}
		}
	}
	return false
}

// sameEnds reports whether a connection's two ends have the same address:
// the kernel connected this machine to itself (an address of its own that
// ownAddress did not know of, such as one added since).
func sameEnds(c net.Conn) bool {
	l, lok := c.LocalAddr().(*net.TCPAddr)
	r, rok := c.RemoteAddr().(*net.TCPAddr)
	return lok && rok && l.IP.Equal(r.IP)
}

// resolve returns the checked addresses of host: an IP literal (in any
// form) is itself; a name is looked up and every address it resolves to
// must pass, so one private answer among public ones refuses the host.
func (g *guard) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{a}, g.check(a)
	}
	if a, ok := looseIPv4(host); ok {
		return []netip.Addr{a}, g.check(a)
	}
	if blockedName(host) {
		return nil, fmt.Errorf("refusing to connect to %q: a local name", host)
	}
	ips, err := g.resolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("cannot resolve %s: %v", host, err)
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("%s has no addresses", host)
	}
	out := make([]netip.Addr, 0, len(ips))
	for _, ip := range ips {
		a, ok := netip.AddrFromSlice(ip.IP)
		if !ok {
			return nil, fmt.Errorf("%s resolved to an invalid address", host)
		}
		if err := g.check(a); err != nil {
			return nil, fmt.Errorf("%s resolves to %s: %w", host, a, err)
		}
		out = append(out, a.Unmap())
	}
	return out, nil
}

// dialContext resolves (again: this is the address that counts) and dials
// the checked addresses directly, so DNS cannot answer differently between
// check and connect. The dialer's Control hook checks once more on the
// socket about to connect.
func (g *guard) dialContext(d *net.Dialer) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(address)
		if err != nil {
			return nil, err
		}
		addrs, err := g.resolve(ctx, host)
		if err != nil {
			return nil, err
		}
		var firstErr error
		for _, a := range addrs {
			c, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
			if err == nil && sameEnds(c) && !g.opened(a) {
				_ = c.Close()
				err = fmt.Errorf("refusing to connect to %s: this machine's own address (open its range with allow_private_networks in the web block if you mean it)", a)
			}
			if err == nil {
				return c, nil
			}
			if firstErr == nil {
				firstErr = err
			}
		}
		return nil, firstErr
	}
}

func (g *guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("refusing to dial %s: not an IP address", address)
	}
	return g.check(ap.Addr())
}

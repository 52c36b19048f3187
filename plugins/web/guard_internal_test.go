package web

import (
	"net"
	"net/netip"
	"testing"
)

// ownAddress knows every address of this machine's interfaces, in either
// form, and no other.
func TestOwnAddress(t *testing.T) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, _ := netip.AddrFromSlice(n.IP)
		if !ownAddress(ip) || !ownAddress(ip.Unmap()) {
			t.Errorf("ownAddress(%s) = false, want true (an interface's)", ip)
		}
		if ip.Unmap().Is4() && !ownAddress(netip.AddrFrom16(ip.Unmap().As16())) {
			t.Errorf("ownAddress(::ffff:%s) = false, want true", ip.Unmap())
		}
	}
	for _, s := range []string{"8.8.8.8", "2606:2800:220:1::1"} {
		if ownAddress(netip.MustParseAddr(s)) {
			t.Errorf("ownAddress(%s) = true", s)
		}
	}
}

// sameEnds tells a connection of the machine to itself from one between
// two addresses.
func TestSameEnds(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	self, err := net.Dial("tcp4", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	if !sameEnds(self) {
		t.Errorf("127.0.0.1 to 127.0.0.1: sameEnds = false")
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	other, err := d.Dial("tcp4", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if sameEnds(other) {
		t.Errorf("127.0.0.2 to 127.0.0.1: sameEnds = true")
	}
}

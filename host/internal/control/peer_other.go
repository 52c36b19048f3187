//go:build !linux

package control

import (
	"errors"
	"net"
)

// peerCred is not implemented here: without the peer's credentials the
// control socket serves no one (status, restart, reload, connect and
// disconnect need Linux).
func peerCred(*net.UnixConn) (Peer, func() bool, func(), error) {
	return Peer{}, nil, func() {}, errors.New("peer credentials are only read on Linux")
}

package protocol

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
)

// The call socket (OpenCallSocket in the protocol) carries the CallTool
// stream's messages on a plain Unix socket: a 4-byte big-endian length and
// the message's protobuf encoding, nothing else. It exists for speed
// alone: a gRPC stream's round trip between two processes costs twice the
// CPU of a socket's on the machines measured (HTTP/2 framing and the
// goroutine hand-offs of gRPC's reader and writer), and at one caller that
// was most of what a call through the host cost over calling the server
// directly (README, PERFORMANCE, "The call socket"). Everything a call
// means (calls, cancellations, progress, log events, requests to the
// client, results, errors) is the same code on both routes: the plugin's
// serveCalls and the host's callStream take either stream; only the
// framing here differs.

// envSocketDir is go-plugin's variable naming the folder a plugin makes
// its sockets in (the host made it, for this plugin alone).
const envSocketDir = "PLUGIN_UNIX_SOCKET_DIR"

// callSocketTokenSize is the size of the token the host sends first.
const callSocketTokenSize = 32

// callSocketAcceptTimeout bounds how long a plugin waits for the host to
// connect to a call socket it offered, with the right token.
const callSocketAcceptTimeout = 10 * time.Second

// frameHeader is the size of a message's length prefix.
const frameHeader = 4

// keepBuffer is the largest buffer a socket keeps for its next message;
// a larger message's buffer goes with it.
const keepBuffer = 64 << 10

// frameConn reads and writes length-prefixed protobuf messages on conn.
// One goroutine may read while others write (writes are serialised).
type frameConn struct {
	conn net.Conn
	r    *bufio.Reader
	rbuf []byte

	wmu  sync.Mutex
	wbuf []byte
}

func newFrameConn(conn net.Conn) *frameConn {
	return &frameConn{conn: conn, r: bufio.NewReaderSize(conn, 32<<10)}
}

// write sends one message. A message over MaxMessageSize is refused as
// gRPC refuses it (codes.ResourceExhausted), and the socket stays usable.
func (f *frameConn) write(m proto.Message) error {
	if n := proto.Size(m); n > MaxMessageSize {
		return status.Errorf(codes.ResourceExhausted, "message of %d bytes exceeds the limit of %d bytes", n, MaxMessageSize)
	}
	f.wmu.Lock()
	defer f.wmu.Unlock()
	buf, err := marshalFrame(f.wbuf[:0], m)
	if err != nil {
		// Nothing was sent, but the call waits for this message: break
		// the socket, so that both ends see it (as gRPC ends a stream
		// whose message does not encode) rather than wait forever.
		_ = f.conn.Close()
		return status.Errorf(codes.Internal, "encoding a message: %v", err)
	}
	_, err = f.conn.Write(buf)
	if cap(buf) <= keepBuffer {
		f.wbuf = buf[:0]
	}
	return err
}

// marshalFrame appends m's frame to buf. A string that is not UTF-8 is
// sent made valid, as the gRPC route's codec does (see validUTF8Codec).
func marshalFrame(buf []byte, m proto.Message) ([]byte, error) {
	buf = append(buf, 0, 0, 0, 0)
	out, err := proto.MarshalOptions{}.MarshalAppend(buf, m)
	if invalidUTF8(err) {
		c := proto.Clone(m)
		toValidUTF8(c.ProtoReflect())
		out, err = proto.MarshalOptions{}.MarshalAppend(buf, c)
	}
	if err != nil {
		return nil, err
	}
	binary.BigEndian.PutUint32(out[len(buf)-frameHeader:], uint32(len(out)-len(buf))) //nolint:gosec // G115: bounded by MaxMessageSize
	return out, nil
}

// readFrame reads one message's bytes; they are valid until the next
// call. A length over MaxMessageSize breaks the socket (its stream is out
// of step), as it would break a gRPC stream.
func (f *frameConn) readFrame() ([]byte, error) {
	var h [frameHeader]byte
	if _, err := io.ReadFull(f.r, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n > MaxMessageSize {
		return nil, fmt.Errorf("call socket: a message of %d bytes exceeds the limit of %d bytes", n, MaxMessageSize)
	}
	var buf []byte
	if n <= keepBuffer {
		if cap(f.rbuf) < int(n) {
			f.rbuf = make([]byte, keepBuffer)
		}
		buf = f.rbuf[:n]
	} else {
		buf = make([]byte, n)
	}
	if _, err := io.ReadFull(f.r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// read reads one message into m.
func (f *frameConn) read(m proto.Message) error {
	buf, err := f.readFrame()
	if err != nil {
		return err
	}
	// Unmarshal copies what it keeps: buf is reused.
	if err := proto.Unmarshal(buf, m); err != nil {
		return fmt.Errorf("call socket: a message does not decode: %w", err)
	}
	return nil
}

// socketClientStream is the host's end of a call socket, in the shape of
// the CallTool stream's client (callConn).
type socketClientStream struct{ f *frameConn }

func (s socketClientStream) Send(req *pluginv1.CallToolRequest) error { return s.f.write(req) }

func (s socketClientStream) Recv() (*pluginv1.CallToolEvent, error) {
	ev := &pluginv1.CallToolEvent{}
	if err := s.f.read(ev); err != nil {
		return nil, err
	}
	return ev, nil
}

// CloseSend ends the host's half: the plugin reads the end, cancels what
// still runs and closes the socket.
func (s socketClientStream) CloseSend() error {
	if uc, ok := s.f.conn.(interface{ CloseWrite() error }); ok {
		return uc.CloseWrite()
	}
	return s.f.conn.Close()
}

// socketServerStream is the plugin's end, in the shape serveCalls takes.
type socketServerStream struct{ f *frameConn }

func (s socketServerStream) Send(ev *pluginv1.CallToolEvent) error { return s.f.write(ev) }

func (s socketServerStream) Recv() (*pluginv1.CallToolRequest, error) {
	req := &pluginv1.CallToolRequest{}
	if err := s.f.read(req); err != nil {
		return nil, err
	}
	return req, nil
}

// dialCallSocket opens the call socket a plugin offered: dial connects to
// the name in the plugin's socket folder over mutual TLS (the launcher's
// CallSocketDialer, which refuses any other place and any link), the token
// goes first, and the plugin's empty answer says it took it. Any failure
// closes the connection.
func dialCallSocket(ctx context.Context, dial func(name string) (net.Conn, error), offer *pluginv1.OpenCallSocketResponse) (*frameConn, error) {
	if len(offer.GetToken()) != callSocketTokenSize {
		return nil, fmt.Errorf("its token has %d bytes, not %d", len(offer.GetToken()), callSocketTokenSize)
	}
	conn, err := dial(offer.GetName())
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(callSocketAcceptTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	f := newFrameConn(conn)
	hello := make([]byte, frameHeader, frameHeader+callSocketTokenSize)
	binary.BigEndian.PutUint32(hello, callSocketTokenSize)
	if _, err := conn.Write(append(hello, offer.GetToken()...)); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("sending its token: %w", err)
	}
	ack, err := f.readFrame()
	if err != nil || len(ack) != 0 {
		_ = conn.Close()
		if err == nil {
			err = errors.New("the plugin's answer is not empty")
		}
		return nil, fmt.Errorf("the plugin did not take its token: %w", err)
	}
	_ = conn.SetDeadline(time.Time{})
	return f, nil
}

// callSocketTLS is the plugin's side of go-plugin's mutual TLS (package
// pluginserve sets it): the call socket speaks it too, with the same
// certificates, so that what holds for the gRPC connection holds for it.
// A name in a folder proves nothing: another process of the same user can
// rename the plugin's socket aside and put its own in its place (red team,
// 2026-12-07: it then relayed the token and ran its own calls, past every
// guard). Without it the plugin offers no call socket.
var callSocketTLS atomic.Pointer[tls.Config]

// SetCallSocketTLS gives the plugin's TLS settings to its call sockets
// (package pluginserve, once, before serving).
func SetCallSocketTLS(conf *tls.Config) { callSocketTLS.Store(conf) }

// OpenCallSocket offers a call socket (see the protocol): a new socket
// directly in the plugin's socket folder, served by serveCalls once the
// host has connected over mutual TLS with the token, for as long as the
// host keeps it.
func (s *server) OpenCallSocket(context.Context, *pluginv1.OpenCallSocketRequest) (*pluginv1.OpenCallSocketResponse, error) {
	dir := os.Getenv(envSocketDir)
	if dir == "" {
		return nil, status.Error(codes.Unimplemented, "this plugin has no socket folder ($"+envSocketDir+"); call over CallTool")
	}
	conf := callSocketTLS.Load()
	if conf == nil {
		return nil, status.Error(codes.Unimplemented, "this plugin serves without its own mutual TLS; call over CallTool")
	}
	token := make([]byte, callSocketTokenSize)
	if _, err := rand.Read(token); err != nil {
		return nil, status.Errorf(codes.Unavailable, "call socket: %v", err)
	}
	var nameBytes [8]byte
	if _, err := rand.Read(nameBytes[:]); err != nil {
		return nil, status.Errorf(codes.Unavailable, "call socket: %v", err)
	}
	name := "calls" + hex.EncodeToString(nameBytes[:])
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Net: "unix", Name: filepath.Join(dir, name)})
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "call socket: %v", err)
	}
	go s.acceptCallSocket(ln, conf, token)
	return &pluginv1.OpenCallSocketResponse{Name: name, Token: token}, nil
}

// acceptCallSocket waits for the host's connection with token, then stops
// listening (which removes the socket's name) and serves the calls on it.
// Each connection's token is read on its own, so one that sends nothing
// cannot hold up the host's; connections without the token are closed
// unread past it.
func (s *server) acceptCallSocket(ln *net.UnixListener, conf *tls.Config, token []byte) {
	deadline := time.Now().Add(callSocketAcceptTimeout)
	_ = ln.SetDeadline(deadline)
	won := make(chan *frameConn, 1)
	var claim sync.Once
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return // closed, or nobody came in time
			}
			go func() {
				f := takeToken(tls.Server(conn, conf), token, deadline)
				if f == nil {
					return
				}
				claimed := false
				claim.Do(func() { claimed = true; won <- f })
				if !claimed {
					_ = f.conn.Close() // the token serves once
				}
			}()
		}
	}()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case f := <-won:
		_ = ln.Close()
		defer func() { _ = f.conn.Close() }()
		s.serveCalls(context.Background(), socketServerStream{f})
	case <-timer.C:
		_ = ln.Close()
		claim.Do(func() {}) // nobody claims it from now on
		select {
		case f := <-won: // claimed just in time
			defer func() { _ = f.conn.Close() }()
			s.serveCalls(context.Background(), socketServerStream{f})
		default:
		}
	}
}

// takeToken completes the TLS handshake (the host's certificate or
// nothing), reads the connection's first message and answers it if it is
// token; otherwise it closes the connection and returns nil.
func takeToken(conn *tls.Conn, token []byte, deadline time.Time) *frameConn {
	_ = conn.SetDeadline(deadline)
	if err := conn.Handshake(); err != nil {
		_ = conn.Close()
		return nil
	}
	f := newFrameConn(conn)
	var h [frameHeader]byte
	got := make([]byte, callSocketTokenSize)
	if _, err := io.ReadFull(conn, h[:]); err != nil || binary.BigEndian.Uint32(h[:]) != callSocketTokenSize {
		_ = conn.Close()
		return nil
	}
	if _, err := io.ReadFull(conn, got); err != nil || subtle.ConstantTimeCompare(got, token) != 1 {
		_ = conn.Close()
		return nil
	}
	if _, err := conn.Write(make([]byte, frameHeader)); err != nil {
		_ = conn.Close()
		return nil
	}
	_ = conn.SetDeadline(time.Time{})
	return f
}

package protocol

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"

	"google.golang.org/protobuf/proto"

	"github.com/switchboard-mcp/switchboard/sdk/pluginv1"
)

// The call channel is the fast carrier for tool calls: a socket pair the
// host creates before it starts the plugin, one end passed to the plugin as
// an inherited file descriptor named by EnvCallFD. It carries exactly the
// messages of the CallTool stream (CallToolRequest to the plugin,
// CallToolEvent back), each preceded by its length as 4 big-endian bytes,
// and nothing else: the handshake, Configure, Describe, PermissionPattern
// and health checks stay on go-plugin's gRPC connection.
//
// Why: a gRPC stream round trip costs several goroutine hand-offs, HTTP/2
// framing and TLS on each side; a frame on a socket pair is one write and
// one read. A socket pair needs no TLS: no other process can connect to it,
// which is what AutoMTLS guards on the plugin's listening socket.
//
// The plugin says it serves the channel in its ConfigureResponse; until
// then, and for plugins that never say so, calls go over CallTool.

// EnvCallFD is the environment variable that tells the plugin which
// inherited file descriptor is its end of the call channel.
const EnvCallFD = "SWITCHBOARD_CALL_FD"

// AttachCallChannel creates a call channel for a plugin command that has
// not been started: the plugin's end is added to cmd.ExtraFiles and named in
// cmd.Env. The caller must close child once cmd has started (or failed to),
// and hand host to [Client.OfferChannel].
func AttachCallChannel(cmd *exec.Cmd) (host net.Conn, child *os.File, err error) {
	// Portable close-on-exec (macOS has no SOCK_CLOEXEC): under ForkLock no
	// other goroutine's fork can inherit the descriptors in between.
	syscall.ForkLock.RLock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, nil, fmt.Errorf("call channel: %w", err)
	}
	hostFile := os.NewFile(uintptr(fds[0]), "switchboard-call-channel")
	child = os.NewFile(uintptr(fds[1]), "switchboard-call-channel")
	host, err = net.FileConn(hostFile) // dups the descriptor
	_ = hostFile.Close()
	if err != nil {
		_ = child.Close()
		return nil, nil, fmt.Errorf("call channel: %w", err)
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, child)
	fd := 3 + len(cmd.ExtraFiles) - 1
	cmd.Env = append(cmd.Env, EnvCallFD+"="+strconv.Itoa(fd))
	return host, child, nil
}

// TakeCallChannel claims the plugin's end of the call channel, if the host
// passed one: the descriptor is moved out of reach of child processes (the
// returned connection is close-on-exec and the inherited descriptor is
// closed) and EnvCallFD is removed from the environment. It returns nil when
// there is no channel. The SDK calls it first thing in ServeHandler.
func TakeCallChannel() net.Conn {
	v, ok := os.LookupEnv(EnvCallFD)
	if !ok {
		return nil
	}
	_ = os.Unsetenv(EnvCallFD)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil
	}
	f := os.NewFile(uintptr(fd), "switchboard-call-channel")
	if f == nil {
		return nil
	}
	defer f.Close()
	conn, err := net.FileConn(f)
	if err != nil {
		return nil // not a socket: someone set the variable by hand
	}
	return conn
}

// maxFrame bounds one frame, like MaxMessageSize bounds a gRPC message (a
// variable so tests can lower it).
var maxFrame = MaxMessageSize

// keepBuffer is the largest write or read buffer kept between frames; a
// bigger one (a large file, long command output) is dropped after use.
const keepBuffer = 1 << 20

// frameConn reads and writes length-prefixed protobuf messages. Writes from
// many goroutines are combined: a writer appends its frame to the pending
// buffer, and whoever finds no write in progress writes everything pending
// in one system call, so concurrent calls share syscalls as they would
// share a gRPC transport's writer, with no writer goroutine to wake.
type frameConn struct {
	conn net.Conn
	r    *bufio.Reader
	rbuf []byte

	wmu      sync.Mutex
	pending  []byte
	spare    []byte
	flushing bool
	werr     error
}

func newFrameConn(conn net.Conn) *frameConn {
	return &frameConn{conn: conn, r: bufio.NewReaderSize(conn, 64<<10)}
}

var errFrameTooLarge = errors.New("message exceeds the protocol's maximum size")

// write frames m and makes sure it is written (by this goroutine or the
// one already writing). An error means the channel is broken.
func (f *frameConn) write(m proto.Message) error {
	size := proto.Size(m)
	if size > maxFrame {
		return fmt.Errorf("%w (%d bytes, at most %d)", errFrameTooLarge, size, maxFrame)
	}
	f.wmu.Lock()
	if f.werr != nil {
		err := f.werr
		f.wmu.Unlock()
		return err
	}
	f.pending = binary.BigEndian.AppendUint32(f.pending, uint32(size)) //nolint:gosec // G115: size <= maxFrame, checked above
	var err error
	f.pending, err = proto.MarshalOptions{}.MarshalAppend(f.pending, m)
	if err != nil {
		f.wmu.Unlock()
		return err
	}
	if f.flushing {
		f.wmu.Unlock()
		return nil // the goroutine writing now writes this frame next
	}
	f.flushing = true
	for len(f.pending) > 0 && f.werr == nil {
		buf := f.pending
		f.pending = f.spare[:0]
		f.wmu.Unlock()
		_, err := f.conn.Write(buf)
		f.wmu.Lock()
		if err != nil {
			f.werr = err
		}
		if cap(buf) <= keepBuffer {
			f.spare = buf[:0]
		} else {
			f.spare = nil
		}
	}
	f.flushing = false
	err = f.werr
	f.wmu.Unlock()
	return err
}

// read reads one frame into m. Only one goroutine reads.
func (f *frameConn) read(m proto.Message) error {
	var hdr [4]byte
	if _, err := io.ReadFull(f.r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if int64(n) > int64(maxFrame) {
		return fmt.Errorf("%w (a frame of %d bytes)", errFrameTooLarge, n)
	}
	buf := f.rbuf
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(f.r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	if cap(buf) <= keepBuffer {
		f.rbuf = buf // proto.Unmarshal copies what it keeps
	}
	return proto.Unmarshal(buf, m)
}

// channelCarrier is the host's side of the call channel, shaped like the
// CallTool stream client.
type channelCarrier struct{ f *frameConn }

func (c channelCarrier) Send(req *pluginv1.CallToolRequest) error { return c.f.write(req) }

func (c channelCarrier) Recv() (*pluginv1.CallToolEvent, error) {
	ev := &pluginv1.CallToolEvent{}
	if err := c.f.read(ev); err != nil {
		return nil, err
	}
	return ev, nil
}

func (c channelCarrier) CloseSend() error {
	if uc, ok := c.f.conn.(interface{ CloseWrite() error }); ok {
		return uc.CloseWrite()
	}
	return nil
}

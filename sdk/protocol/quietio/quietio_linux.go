package quietio

import (
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const supported = true

// maxRW bounds one read or write, as package os does.
const maxRW = 1 << 30

// Conn returns c read and written with raw system calls, if c is a socket
// in Go's network poller; otherwise it returns c. Deadlines, Close and the
// rest are c's.
func Conn(c net.Conn) net.Conn {
	if !on() {
		return c
	}
	if _, ok := c.(*conn); ok {
		return c
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	return &conn{Conn: c, rc: rc}
}

type conn struct {
	net.Conn
	rc syscall.RawConn
}

func (c *conn) Read(p []byte) (int, error)  { return read(c.rc, p, "") }
func (c *conn) Write(p []byte) (int, error) { return write(c.rc, p, "") }

// Stream returns f read and written like Conn. f must be a pipe or socket
// in non-blocking mode (os.NewFile then puts it in the poller); otherwise
// Stream returns f.
func Stream(f *os.File) io.ReadWriter {
	if !on() {
		return f
	}
	// Not f.Fd(), which would put f in blocking mode.
	rc, err := f.SyscallConn()
	if err != nil {
		return f
	}
	fl := 0
	if rc.Control(func(fd uintptr) { fl, err = unix.FcntlInt(fd, unix.F_GETFL, 0) }) != nil || err != nil || fl&unix.O_NONBLOCK == 0 {
		return f
	}
	return &stream{f: f, rc: rc}
}

type stream struct {
	f  *os.File
	rc syscall.RawConn
}

func (s *stream) Read(p []byte) (int, error)  { return read(s.rc, p, s.f.Name()) }
func (s *stream) Write(p []byte) (int, error) { return write(s.rc, p, s.f.Name()) }

// raw makes the read or write system call trap on fd with buffer b (not
// empty), without the runtime's system call bookkeeping.
func raw(trap, fd uintptr, b []byte) (int, syscall.Errno) {
	// The conversion in the call's arguments keeps b alive and in place
	// for the call's length (unsafe.Pointer, rule 4).
	r, _, e := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b))) //nolint:gosec // G103: see above
	return int(r), e
}

// read reads once, waiting in the poller while there is nothing to read.
// A system call's error is an *os.SyscallError, or an *os.PathError when
// the descriptor has a name.
func read(rc syscall.RawConn, p []byte, name string) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(p) > maxRW {
		p = p[:maxRW]
	}
	var n int
	var errno syscall.Errno
	err := rc.Read(func(fd uintptr) bool {
		for {
			r, e := raw(syscall.SYS_READ, fd, p)
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait for readiness
			}
			n, errno = r, e
			return true
		}
	})
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, callError("read", name, errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// write writes all of p, waiting in the poller while the peer is full.
func write(rc syscall.RawConn, p []byte, name string) (int, error) {
	n := 0
	for n < len(p) {
		chunk := p[n:]
		if len(chunk) > maxRW {
			chunk = chunk[:maxRW]
		}
		var w int
		var errno syscall.Errno
		err := rc.Write(func(fd uintptr) bool {
			for {
				r, e := raw(syscall.SYS_WRITE, fd, chunk)
				switch e {
				case syscall.EINTR:
					continue
				case syscall.EAGAIN:
					return false
				}
				w, errno = r, e
				return true
			}
		})
		if err != nil {
			return n, err
		}
		if errno != 0 {
			return n, callError("write", name, errno)
		}
		n += w
	}
	return n, nil
}

// FileWriter returns a writer to f, a regular file, that writes with raw
// system calls while f is on a local file system (whose writes of a few
// kilobytes go to the page cache and do not wait for a device or a
// network) and no write has taken longer than slowWrite; f itself
// otherwise.
func FileWriter(f *os.File) io.Writer {
	if !on() {
		return f
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return f
	}
	var st unix.Statfs_t
	if rc.Control(func(fd uintptr) { err = unix.Fstatfs(int(fd), &st) }) != nil || err != nil || !localFS[int64(st.Type)] {
		return f
	}
	return &fileWriter{f: f, rc: rc}
}

// localFS are the file systems FileWriter writes to with raw calls.
var localFS = map[int64]bool{
	unix.EXT4_SUPER_MAGIC:      true, // also ext2, ext3
	unix.XFS_SUPER_MAGIC:       true,
	unix.BTRFS_SUPER_MAGIC:     true,
	unix.F2FS_SUPER_MAGIC:      true,
	unix.TMPFS_MAGIC:           true,
	unix.RAMFS_MAGIC:           true,
	unix.OVERLAYFS_SUPER_MAGIC: true,
	0x2fc12fc1:                 true, // ZFS
}

type fileWriter struct {
	f    *os.File
	rc   syscall.RawConn
	slow atomic.Bool
}

func (w *fileWriter) Write(p []byte) (int, error) {
	if w.slow.Load() {
		return w.f.Write(p)
	}
	start := time.Now()
	n := 0
	var errno syscall.Errno
	err := w.rc.Write(func(fd uintptr) bool {
		for n < len(p) {
			chunk := p[n:]
			if len(chunk) > maxRW {
				chunk = chunk[:maxRW]
			}
			r, e := raw(syscall.SYS_WRITE, fd, chunk)
			if e == syscall.EINTR {
				continue
			}
			if e != 0 {
				errno = e
				break
			}
			n += r
		}
		return true
	})
	if time.Since(start) > slowWrite {
		w.slow.Store(true)
	}
	if err != nil {
		return n, err
	}
	if errno != 0 {
		return n, callError("write", w.f.Name(), errno)
	}
	return n, nil
}

func callError(op, name string, errno syscall.Errno) error {
	if name == "" {
		return os.NewSyscallError(op, errno)
	}
	return &os.PathError{Op: op, Path: name, Err: errno}
}

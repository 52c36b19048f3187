package quietio

import (
	"errors"
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

// errWouldWait ends a quiet write that would have to wait (the peer is
// full, or the kernel said so while another process held the pipe): the
// rest goes the ordinary way, which waits in the poller.
var errWouldWait = errors.New("quietio: would wait")

// errNoNowait is the kernel's answer for a descriptor it cannot read or
// write without waiting on request (RWF_NOWAIT: pipes before Linux 6.4):
// that descriptor is read and written the ordinary way from then on.
var errNoNowait = errors.New("quietio: RWF_NOWAIT not supported")

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
	return &conn{Conn: c, q: quiet{rc: rc, ordinary: c}}
}

type conn struct {
	net.Conn
	q quiet
}

func (c *conn) Read(p []byte) (int, error)  { return c.q.Read(p) }
func (c *conn) Write(p []byte) (int, error) { return c.q.Write(p) }

// Stream returns f read and written like Conn. f must be a pipe or socket
// in Go's poller (one os.NewFile found in non-blocking mode); otherwise
// Stream returns f. Its raw calls do not need the non-blocking mode, so
// Stream puts the open pipe or socket back in blocking mode, which other
// processes holding it (the client that started the host, a process
// sharing its stdout) may rely on; when the kernel cannot do them
// (RWF_NOWAIT on a pipe before Linux 6.4), the non-blocking mode comes
// back with ordinary reads and writes.
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
	q := &quiet{rc: rc, ordinary: f, name: f.Name(), blocking: true}
	q.setNonblock(false)
	return q
}

// quiet reads and writes one descriptor with raw preadv2 and pwritev2
// calls flagged RWF_NOWAIT, which cannot wait whatever the descriptor's
// own flags say: another process sharing a pipe (a client holding its
// copy of the host's stdin) may put it back in blocking mode, and a raw
// call that waited would hold the scheduler slot it runs on. A read that
// finds nothing waits in the poller; a write that cannot go on at once is
// finished by ordinary, which waits in the poller (or, on a descriptor
// put in blocking mode, in a system call the runtime knows about).
type quiet struct {
	rc       syscall.RawConn
	ordinary io.ReadWriter
	name     string      // for errors; empty for a socket
	blocking bool        // Stream put it in blocking mode
	plain    atomic.Bool // errNoNowait seen: ordinary from now on
}

func (q *quiet) setNonblock(on bool) {
	_ = q.rc.Control(func(fd uintptr) { _ = unix.SetNonblock(int(fd), on) })
}

// goPlain makes q read and write the ordinary way from now on.
func (q *quiet) goPlain() {
	if !q.plain.Swap(true) && q.blocking {
		q.setNonblock(true) // the ordinary calls wait in the poller
	}
}

func (q *quiet) Read(p []byte) (int, error) {
	if q.plain.Load() {
		return q.ordinary.Read(p)
	}
	n, err := read(q.rc, p, q.name)
	if err == errNoNowait {
		q.goPlain()
		return q.ordinary.Read(p)
	}
	return n, err
}

func (q *quiet) Write(p []byte) (int, error) {
	if q.plain.Load() {
		return q.ordinary.Write(p)
	}
	n, err := write(q.rc, p, q.name)
	switch err {
	case errNoNowait:
		q.goPlain()
		fallthrough
	case errWouldWait:
		m, err := q.ordinary.Write(p[n:])
		return n + m, err
	}
	return n, err
}

// nowait makes the preadv2 or pwritev2 system call trap on fd with buffer
// b (not empty), at the current position, flagged RWF_NOWAIT, without the
// runtime's system call bookkeeping.
func nowait(trap, fd uintptr, b []byte) (int, syscall.Errno) {
	iov := syscall.Iovec{Base: &b[0]}
	iov.SetLen(len(b))
	// The conversion in the call's arguments keeps iov, and b through it,
	// alive and in place for the call (unsafe.Pointer, rule 4). Offset -1
	// (low word all ones) is the current position, which pipes and
	// sockets take.
	r, _, e := syscall.RawSyscall6(trap, fd, uintptr(unsafe.Pointer(&iov)), 1, ^uintptr(0), 0, unix.RWF_NOWAIT) //nolint:gosec // G103: see above
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
			r, e := nowait(unix.SYS_PREADV2, fd, p)
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				// Nothing to read; or, on a pipe since Linux 6.4, its
				// writer held it: that writer's end wakes the poller
				// (the kernel wakes a polled pipe's readers after every
				// write).
				return false
			}
			n, errno = r, e
			return true
		}
	})
	switch {
	case err != nil:
		return 0, err
	case errno == syscall.EOPNOTSUPP:
		return 0, errNoNowait
	case errno != 0:
		return 0, callError("read", name, errno)
	case n == 0:
		return 0, io.EOF
	}
	raceAfterRead(p[:n])
	return n, nil
}

// write writes what it can of p without waiting: all of it, or n bytes
// and errWouldWait (or errNoNowait). A pipe's EAGAIN can mean its reader
// held it rather than that it is full, and no wake-up would follow, so
// waiting is left to the ordinary write.
func write(rc syscall.RawConn, p []byte, name string) (int, error) {
	raceBeforeWrite(p)
	n := 0
	var errno syscall.Errno
	err := rc.Write(func(fd uintptr) bool {
		for n < len(p) {
			chunk := p[n:]
			if len(chunk) > maxRW {
				chunk = chunk[:maxRW]
			}
			r, e := nowait(unix.SYS_PWRITEV2, fd, chunk)
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
	switch {
	case err != nil:
		return n, err
	case errno == syscall.EAGAIN:
		return n, errWouldWait
	case errno == syscall.EOPNOTSUPP:
		return n, errNoNowait
	case errno != 0:
		return n, callError("write", name, errno)
	}
	return n, nil
}

// FileWriter returns a writer to f, a regular file, that writes with raw
// system calls while f is on a local file system (whose writes of a few
// kilobytes go to the page cache and do not wait for a device or a
// network) and no write has taken longer than slowWrite; f itself
// otherwise (anything but a regular file, too: a FIFO waits for its
// reader).
func FileWriter(f *os.File) io.Writer {
	if !on() {
		return f
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return f
	}
	var st unix.Statfs_t
	var fst unix.Stat_t
	if rc.Control(func(fd uintptr) {
		if err = unix.Fstat(int(fd), &fst); err == nil {
			err = unix.Fstatfs(int(fd), &st)
		}
	}) != nil || err != nil || fst.Mode&unix.S_IFMT != unix.S_IFREG || !localFS[int64(st.Type)] {
		return f
	}
	return &fileWriter{f: f, rc: rc}
}

// GaveUp reports whether w, from FileWriter, writes the ordinary way now
// (after a slow write): a writer to the next file (after a rotation)
// should then be the file itself.
func GaveUp(w io.Writer) bool {
	fw, ok := w.(*fileWriter)
	return ok && fw.slow.Load()
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

// A regular file's buffered writes cannot be flagged RWF_NOWAIT (ext4
// and tmpfs refuse it), so fileWriter makes plain write calls: one that
// waits (for another writer of the same file, or for the page cache's
// write-back) holds its scheduler slot meanwhile, and the first that
// takes longer than slowWrite sends the rest the ordinary way.
type fileWriter struct {
	f    *os.File
	rc   syscall.RawConn
	slow atomic.Bool
}

func (w *fileWriter) Write(p []byte) (int, error) {
	if w.slow.Load() {
		return w.f.Write(p)
	}
	raceBeforeWrite(p)
	start := time.Now()
	n := 0
	var errno syscall.Errno
	err := w.rc.Write(func(fd uintptr) bool {
		for n < len(p) {
			chunk := p[n:]
			if len(chunk) > maxRW {
				chunk = chunk[:maxRW]
			}
			r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&chunk[0])), uintptr(len(chunk))) //nolint:gosec // G103: the conversion in the call keeps chunk alive and in place (unsafe.Pointer, rule 4)
			if e == syscall.EINTR {
				continue
			}
			if e != 0 {
				errno = e
				break
			}
			n += int(r)
		}
		return true
	})
	if time.Since(start) > slowWrite {
		w.slow.Store(true)
	}
	switch {
	case err != nil:
		return n, err
	case errno == syscall.EAGAIN:
		// Not a regular file's answer; whatever it is, the ordinary
		// write waits for it.
		w.slow.Store(true)
		m, err := w.f.Write(p[n:])
		return n + m, err
	case errno != 0:
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

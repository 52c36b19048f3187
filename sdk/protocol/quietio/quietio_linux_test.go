package quietio

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// socketPair is a connected pair of Unix stream sockets in Go's poller.
func socketPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var conns [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = c
	}
	return conns[0], conns[1]
}

func TestConnCarriesBytesBothWaysAndEndsWithEOF(t *testing.T) {
	a, b := socketPair(t)
	qa, qb := Conn(a), Conn(b)
	if _, ok := qa.(*conn); !ok {
		t.Fatalf("Conn(%T) = %T, want the quiet conn", a, qa)
	}
	if Conn(qa) != qa {
		t.Error("Conn of a quiet conn wraps it again")
	}

	// More than the socket buffers hold: the writer waits in the poller
	// for the reader, and every byte arrives in order.
	big := bytes.Repeat([]byte("0123456789abcdef"), 2<<20) // 32 MiB
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		n, err := qa.Write(big)
		if n != len(big) || err != nil {
			t.Errorf("Write = %d, %v; want %d, nil", n, err, len(big))
		}
		qa.(*conn).Conn.(*net.UnixConn).CloseWrite()
	}()
	got, err := io.ReadAll(qb)
	wg.Wait()
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("read %d bytes (equal: %v), %v; want the %d written", len(got), bytes.Equal(got, big), err, len(big))
	}
	// After the peer's end of input, a read says io.EOF itself.
	if n, err := qb.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Errorf("Read after EOF = %d, %v; want 0, io.EOF", n, err)
	}

	// And the other way.
	if _, err := qb.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if n, err := qa.Read(buf); err != nil || string(buf[:n]) != "pong" {
		t.Errorf("Read = %q, %v; want pong", buf[:n], err)
	}
	if n, err := qa.Read(nil); n != 0 || err != nil {
		t.Errorf("Read(nil) = %d, %v; want 0, nil", n, err)
	}
}

func TestConnKeepsDeadlinesAndClose(t *testing.T) {
	a, _ := socketPair(t)
	q := Conn(a)

	// A read deadline ends a read that has nothing to read.
	if err := q.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err := q.Read(make([]byte, 8))
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Read past its deadline = %v; want a timeout (os.ErrDeadlineExceeded)", err)
	}

	// Close from elsewhere ends a waiting read with net.ErrClosed.
	if err := q.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := q.Read(make([]byte, 8))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // let the read wait in the poller (either order passes)
	q.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Read across Close = %v; want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a waiting Read")
	}
	if _, err := q.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Write after Close = %v; want net.ErrClosed", err)
	}
}

func TestConnWriteToAGonePeerFails(t *testing.T) {
	a, b := socketPair(t)
	q := Conn(a)
	b.Close()
	var err error
	for range 100 { // the first write may still land in the buffer
		if _, err = q.Write([]byte("x")); err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("Write to a closed peer = %v; want EPIPE or ECONNRESET", err)
	}
	var se *os.SyscallError
	if !errors.As(err, &se) || se.Syscall != "write" {
		t.Errorf("error %v (%T) is not an *os.SyscallError naming write", err, err)
	}
}

func TestWhatCannotBeQuietIsReturnedAsIs(t *testing.T) {
	p1, p2 := net.Pipe() // no descriptor
	defer p1.Close()
	defer p2.Close()
	if Conn(p1) != p1 {
		t.Error("Conn wrapped an in-memory pipe")
	}
	// A blocking pipe is not in the poller.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	r.Fd() // puts r in blocking mode
	if Stream(r) != io.ReadWriter(r) {
		t.Error("Stream wrapped a blocking pipe")
	}
	// /proc is not a local disk file system.
	f, err := os.OpenFile("/proc/self/comm", os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	if FileWriter(f) != io.Writer(f) {
		t.Error("FileWriter wrapped a file in /proc")
	}
}

func TestStreamReadsAndWritesAPipe(t *testing.T) {
	r, w, err := os.Pipe() // non-blocking, in the poller
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	qr, qw := Stream(r), Stream(w)
	if _, ok := qr.(*quiet); !ok {
		t.Fatalf("Stream(pipe) = %T, want the quiet stream", qr)
	}
	big := bytes.Repeat([]byte("line\n"), 100_000) // past the pipe's 64 KiB
	go func() {
		if _, err := qw.Write(big); err != nil {
			t.Errorf("Write: %v", err)
		}
		w.Close()
	}()
	got, err := io.ReadAll(qr)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("read %d bytes, %v; want the %d written", len(got), err, len(big))
	}
	// A write to a pipe with no reader names the pipe.
	r2, w2, _ := os.Pipe()
	r2.Close()
	defer w2.Close()
	_, err = Stream(w2).Write([]byte("x"))
	var pe *os.PathError
	if !errors.Is(err, syscall.EPIPE) || !errors.As(err, &pe) || pe.Path != w2.Name() {
		t.Errorf("Write to a pipe with no reader = %v; want EPIPE naming %s", err, w2.Name())
	}
}

func TestFileWriterAppendsAndGivesUpAfterASlowWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, ok := FileWriter(f).(*fileWriter)
	if !ok {
		t.Skipf("the temporary directory is not on a local disk file system")
	}
	for _, line := range []string{"one\n", "two\n"} {
		if n, err := w.Write([]byte(line)); n != len(line) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", line, n, err)
		}
	}
	if w.slow.Load() {
		t.Fatal("two small writes counted as slow")
	}
	// Any write slower than slowWrite sends the rest the ordinary way.
	defer func(d time.Duration) { slowWrite = d }(slowWrite)
	slowWrite = -1
	if _, err := w.Write([]byte("three\n")); err != nil {
		t.Fatal(err)
	}
	if !w.slow.Load() || !GaveUp(w) {
		t.Fatal("a write slower than slowWrite did not switch the writer to ordinary writes")
	}
	if _, err := w.Write([]byte("four\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "one\ntwo\nthree\nfour\n" {
		t.Errorf("file = %q", b)
	}

	// A write that fails says so, naming the file.
	ro, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	_, err = FileWriter(ro).Write([]byte("x"))
	var pe *os.PathError
	if !errors.Is(err, syscall.EBADF) || !errors.As(err, &pe) || pe.Path != path {
		t.Errorf("Write to a read-only file = %v; want EBADF naming %s", err, path)
	}
}

// The tests below run their scenario in a child process of the test
// binary with one scheduler slot, and fail if it does not finish: a raw
// call that waited would hold that slot and freeze the whole child.
const scenarioEnv = "QUIETIO_SCENARIO"

func runScenario(t *testing.T, name string) {
	t.Helper()
	if os.Getenv(scenarioEnv) != "" {
		t.Skip("in the scenario's own process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestScenarioChild$", "-test.v")
	cmd.Env = append(os.Environ(), scenarioEnv+"="+name)
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil || !strings.Contains(out.String(), "scenario done") {
			t.Fatalf("scenario %s: %v\n%s", name, err, out)
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("scenario %s froze (its timers did not fire within 20 s): a raw call waited holding the only scheduler slot\n%s", name, out)
	}
}

// TestScenarioChild is the child's side of runScenario.
func TestScenarioChild(t *testing.T) {
	name := os.Getenv(scenarioEnv)
	if name == "" {
		t.Skip("only as runScenario's child")
	}
	runtime.GOMAXPROCS(1)
	r, w, err := os.Pipe() // in the poller
	if err != nil {
		t.Fatal(err)
	}
	// Another process sharing the pipe puts it back in blocking mode
	// (after Stream has wrapped it).
	qr, qw := Stream(r), Stream(w)
	putInBlockingMode(r, w)
	switch name {
	case "read-empty":
		// Nothing to read: the reader waits in the poller, and the rest
		// of the process runs.
		go func() { _, _ = qr.Read(make([]byte, 16)) }()
	case "write-full":
		// Nobody reads a full pipe: the writer blocks, the ordinary way,
		// and the rest of the process runs.
		go func() { _, _ = qw.Write(make([]byte, 1<<20)) }()
	default:
		t.Fatalf("no scenario %q", name)
	}
	time.Sleep(100 * time.Millisecond) // a timer, and this goroutine, must get the slot
	runtime.Gosched()
	fmt.Println("scenario done")
}

func TestAPipePutBackInBlockingModeFreezesNothing(t *testing.T) {
	runScenario(t, "read-empty")
	runScenario(t, "write-full")
}

func TestQuietStreamIgnoresBlockingModeButKeepsWorking(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	qr, qw := Stream(r), Stream(w)
	putInBlockingMode(r, w)
	big := bytes.Repeat([]byte("x"), 300<<10) // past the pipe's buffer
	go func() {
		if _, err := qw.Write(big); err != nil {
			t.Errorf("Write: %v", err)
		}
		w.Close()
	}()
	got, err := io.ReadAll(qr)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("read %d bytes, %v; want the %d written", len(got), err, len(big))
	}
}

func TestFileWriterLeavesAFIFOAlone(t *testing.T) {
	_, f := fifo(t, "audit.jsonl")
	if FileWriter(f) != io.Writer(f) {
		t.Error("FileWriter wrapped a FIFO (whose writes wait for its reader)")
	}
}

// A FIFO refuses RWF_NOWAIT (as every pipe did before Linux 6.4): Stream
// then reads and writes it the ordinary way, in non-blocking mode again,
// and every byte arrives.
func TestStreamFallsBackWhereTheKernelRefusesNowait(t *testing.T) {
	r, w := fifo(t, "fifo")
	qr, qw := Stream(r), Stream(w)
	if _, ok := qr.(*quiet); !ok {
		t.Fatalf("Stream(FIFO) = %T, want the quiet stream", qr)
	}
	big := bytes.Repeat([]byte("fifo\n"), 100_000) // past the pipe's buffer
	go func() {
		if _, err := qw.Write(big); err != nil {
			t.Errorf("Write: %v", err)
		}
		w.Close()
	}()
	got, err := io.ReadAll(qr)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("read %d bytes, %v; want the %d written", len(got), err, len(big))
	}
	q := qr.(*quiet)
	if !q.plain.Load() {
		t.Skip("this kernel takes RWF_NOWAIT on a FIFO: the fallback did not run")
	}
	fl := 0
	_ = q.rc.Control(func(fd uintptr) { fl, err = unix.FcntlInt(fd, unix.F_GETFL, 0) })
	if err != nil || fl&unix.O_NONBLOCK == 0 {
		t.Errorf("after the fallback the FIFO is in blocking mode (flags %#x, %v); want non-blocking, for the poller", fl, err)
	}
}

// putInBlockingMode does what another process sharing the files' pipe
// may do to it.
func putInBlockingMode(files ...*os.File) {
	for _, f := range files {
		rc, _ := f.SyscallConn() // not f.Fd(), which would also mark f blocking
		_ = rc.Control(func(fd uintptr) { _ = syscall.SetNonblock(int(fd), false) })
	}
}

// fifo makes a FIFO named name in a temporary directory and opens both
// ends, in Go's poller; the test's cleanup closes them.
func fifo(t *testing.T, name string) (r, w *os.File) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	w, err = os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return r, w
}

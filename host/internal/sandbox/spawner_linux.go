//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/switchboard-mcp/switchboard/host/internal/sandboxinit"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
)

// spawner is the host's end of a sandbox spawner (sandboxinit's spawner
// mode): one small process per helper binary that starts every helper in
// new namespaces, so that the host itself never forks without sharing its
// memory (see sandboxinit.runSpawner for what that costs).
type spawner struct {
	sock     int           // the host's end of the socket; -1 once closed (under mu)
	cmd      *exec.Cmd     // the spawner process
	finished chan struct{} // closed once the spawner has exited and been waited for

	startMu sync.Mutex // one start at a time: replies come in order
	replies chan sandboxinit.SpawnReply

	mu      sync.Mutex
	waiting map[int]*spawned // started helpers, by pid
	early   map[int]int      // exits heard before their start's reply
	dead    error            // set once the spawner is gone
	users   int              // starts under way and helpers running
	idle    *time.Timer      // armed while users is 0
}

// spawnerIdle is how long a spawner with no helper left stays up for the
// next start: starts come in bursts (a host's start-up, a reload), and an
// idle host keeps no process it does not need.
const spawnerIdle = 500 * time.Millisecond

// spawnerReplyTimeout bounds the wait for the spawner's answer to a
// start (a fork and an exec; milliseconds).
const spawnerReplyTimeout = 20 * time.Second

// errNoSpawner is a spawner that could not be started (the helper
// binary cannot run): no start of a confined server can work.
var errNoSpawner = errors.New("sandbox: the sandbox helper cannot run")

// errSpawnerIdle ends a spawner that was not needed any more.
var errSpawnerIdle = errors.New("sandbox: the spawner stopped, idle")

// spawned is a helper the spawner started.
type spawned struct {
	pid    int
	done   chan struct{}
	status syscall.WaitStatus
	err    error // the spawner ended before the helper's exit was heard
}

func (p *spawned) Pid() int { return p.pid }

// Wait waits for the helper to exit and reports it as exec.Cmd.Wait
// would: nil for exit status 0, else an error naming the status or signal.
func (p *spawned) Wait() error {
	<-p.done
	switch {
	case p.err != nil:
		return p.err
	case p.status.Signaled():
		return fmt.Errorf("signal: %v", p.status.Signal())
	case p.status.ExitStatus() != 0:
		return fmt.Errorf("exit status %d", p.status.ExitStatus())
	}
	return nil
}

var (
	spawnersMu sync.Mutex
	spawners   = map[string]*spawner{}
)

// spawnerFor returns the running spawner of helper, starting one when
// there is none (or the last one ended), with one more user: the caller
// starts a helper with it (start releases the use when that fails, or
// when the helper has exited).
func spawnerFor(helper string) (*spawner, error) {
	spawnersMu.Lock()
	defer spawnersMu.Unlock()
	if s := spawners[helper]; s != nil && s.acquire() {
		return s, nil
	}
	s, err := startSpawner(helper)
	if err != nil {
		return nil, err
	}
	s.acquire()
	spawners[helper] = s
	return s, nil
}

// acquire counts one more user of a spawner that is still up.
func (s *spawner) acquire() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead != nil {
		return false
	}
	s.users++
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
	return true
}

// release counts one user less; the last one arms the idle stop.
// Called with s.mu held.
func (s *spawner) release() {
	s.users--
	if s.users == 0 && s.dead == nil {
		s.idle = time.AfterFunc(spawnerIdle, s.stopIfIdle)
	}
}

// stopIfIdle stops a spawner nobody has used since it was armed: the
// spawner reads the end of its input and exits.
func (s *spawner) stopIfIdle() {
	spawnersMu.Lock()
	defer spawnersMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.users > 0 || s.dead != nil {
		return
	}
	s.dead = errSpawnerIdle
	for h, x := range spawners {
		if x == s {
			delete(spawners, h)
		}
	}
	s.closeInput()
}

// closeInput ends the spawner's input: it exits once it has read it.
// Called with s.mu held.
func (s *spawner) closeInput() {
	if s.sock >= 0 {
		_ = unix.Shutdown(s.sock, unix.SHUT_WR)
	}
}

// errHostStopped ends the spawners at the host's shutdown.
var errHostStopped = errors.New("sandbox: the host stopped")

// StopSpawners stops every spawner and waits (a second at most) for them
// to exit. The host calls it once its servers have stopped, so that no
// process of its outlives it (a spawner would otherwise be ended by its
// parent-death signal) and the spawners' CPU time is counted as the
// host's children's.
func StopSpawners() {
	spawnersMu.Lock()
	var all []*spawner
	for h, s := range spawners {
		all = append(all, s)
		delete(spawners, h)
	}
	spawnersMu.Unlock()
	deadline := time.After(time.Second)
	for _, s := range all {
		s.mu.Lock()
		if s.dead == nil {
			s.dead = errHostStopped
		}
		if s.idle != nil {
			s.idle.Stop()
		}
		s.closeInput()
		s.mu.Unlock()
	}
	for _, s := range all {
		select {
		case <-s.finished:
		case <-deadline:
			return
		}
	}
}

// openHelper opens helper for the spawner's start, or returns nil for the
// host's own binary (/proc/self/exe): when helper is that binary, or is not
// a file VerifyHelper accepts.
func openHelper(helper string) *os.File {
	self, err := os.Executable()
	if err == nil && self == helper {
		return nil
	}
	f, err := os.Open(helper)
	if err != nil {
		return nil
	}
	if VerifyHelper != nil && !VerifyHelper(helper, f) {
		_ = f.Close()
		return nil
	}
	return f
}

func startSpawner(helper string) (*spawner, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: the spawner's socket: %v", errNoSpawner, err)
	}
	theirs := os.NewFile(uintptr(pair[1]), "spawner") //nolint:gosec // G115: a descriptor
	defer func() { _ = theirs.Close() }()
	// The spawner is executed from the file checked here, through its
	// descriptor (its fd 4, looked up before the exec closes it), and it
	// executes its own binary for every helper: a file put at the
	// helper's path later (a rebuild lifts the read-only mount that
	// sandboxes have over the old one, and a server may then write a new
	// one) is never run (red team). A helper that is not the one this build
	// pins is not run at all: the host's own binary is the spawner then.
	cmd := exec.Command("/proc/self/exe", HelperCommand)
	cmd.ExtraFiles = []*os.File{theirs} // its fd 3: sandboxinit.SpawnerFD
	if f := openHelper(helper); f != nil {
		defer func() { _ = f.Close() }()
		cmd.Path = "/proc/self/fd/4"
		cmd.ExtraFiles = append(cmd.ExtraFiles, f)
	}
	cmd.Args[0] = helper // its name in ps
	cmd.Env = []string{
		EnvSpec + "=spawner", "GOMAXPROCS=1", sandboxinit.EnvSpawnerFor + "=" + helper,
		fmt.Sprintf("%s=%d:%d", sandboxinit.EnvSpawnerIDs, os.Getuid(), os.Getgid()),
	}
	cmd.Stderr = os.Stderr // what it cannot report on the socket
	// Its own process group (a terminal's ^C is for the host, which stops
	// its plugins in order), and it dies with the host, its helpers with it.
	// It starts its working half in a user namespace of its own
	// (sandboxinit.EnvSpawnerIDs): the host never forks without sharing
	// its memory.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Room for a large environment: a message on this socket may not
	// exceed the sender's buffer (the kernel caps this at wmem_max).
	_ = unix.SetsockoptInt(pair[0], unix.SOL_SOCKET, unix.SO_SNDBUF, sandboxinit.MaxSpawnRequest)
	if err := cmd.Start(); err != nil {
		_ = unix.Close(pair[0])
		return nil, fmt.Errorf("%w: starting %s as the spawner: %v", errNoSpawner, helper, err)
	}
	s := &spawner{sock: pair[0], cmd: cmd, finished: make(chan struct{}), replies: make(chan sandboxinit.SpawnReply, 1), waiting: map[int]*spawned{}, early: map[int]int{}}
	go s.read()
	return s, nil
}

// read takes the spawner's messages: replies to starts, in order, and
// exits, which end their helper's Wait.
func (s *spawner) read() {
	buf := make([]byte, 4096)
	var err error
	for {
		var n int
		n, _, _, _, err = unix.Recvmsg(s.sock, buf, nil, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			break
		}
		var r sandboxinit.SpawnReply
		if r, err = sandboxinit.DecodeReply(buf[:n]); err != nil {
			break
		}
		if r.Exited == 0 {
			s.replies <- r
			continue
		}
		s.mu.Lock()
		if p := s.waiting[r.Exited]; p != nil {
			delete(s.waiting, r.Exited)
			p.status = syscall.WaitStatus(r.Status) //nolint:gosec // G115: a wait status
			close(p.done)
			s.release()
		} else {
			s.early[r.Exited] = r.Status
		}
		s.mu.Unlock()
	}
	if err == nil {
		err = io.EOF
	}
	// The spawner is gone, and its helpers with it (their parent-death
	// signal): every wait ends.
	s.mu.Lock()
	if s.dead == nil {
		s.dead = fmt.Errorf("sandbox: the spawner ended (%v); the helpers it started were stopped with it", err)
	}
	for pid, p := range s.waiting {
		p.err = s.dead
		close(p.done)
		delete(s.waiting, pid)
	}
	fd := s.sock
	s.sock = -1
	s.mu.Unlock()
	close(s.replies)
	_ = unix.Close(fd)
	_ = s.cmd.Wait()
	close(s.finished)
}

// start starts cmd (a helper command as Wrap made it) through the
// spawner, for a user of it (spawnerFor). cmd's standard descriptors must
// be files or nil (nil is /dev/null), as a plugin's are.
func (s *spawner) start(cmd *exec.Cmd) (p *spawned, err error) {
	defer func() {
		if err != nil {
			s.mu.Lock()
			s.release()
			s.mu.Unlock()
		}
	}()
	var files []*os.File
	for i, v := range []any{cmd.Stdin, cmd.Stdout, cmd.Stderr} {
		switch f := v.(type) {
		case nil:
			null, err := os.Open(os.DevNull)
			if err != nil {
				return nil, err
			}
			defer func() { _ = null.Close() }()
			files = append(files, null)
		case *os.File:
			files = append(files, f)
		default:
			return nil, fmt.Errorf("sandbox: the spawner passes descriptors only: the child's fd %d is a %T", i, v)
		}
	}
	files = append(files, cmd.ExtraFiles...)
	fds := make([]int, len(files))
	for i, f := range files {
		if f == nil {
			return nil, fmt.Errorf("sandbox: the spawner cannot leave the child's fd %d closed", i)
		}
		fds[i] = int(f.Fd()) //nolint:gosec // G115: a descriptor
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	// An empty Dir is the caller's working directory now, as for
	// exec.Cmd, not the one the spawner started in.
	dir := cmd.Dir
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("sandbox: the host's working directory: %w", err)
		}
	}
	req := sandboxinit.SpawnRequest{Path: cmd.Path, Args: cmd.Args, Env: sandboxinit.LastWins(env), Dir: dir}
	if a := cmd.SysProcAttr; a != nil {
		req.Cloneflags, req.AmbientCaps, req.Setpgid, req.Pdeathsig = a.Cloneflags, a.AmbientCaps, a.Setpgid, int(a.Pdeathsig)
	}
	b := req.Encode()
	if len(b) > sandboxinit.MaxSpawnRequest {
		return nil, fmt.Errorf("sandbox: the server's arguments and environment take %d bytes, more than a confined start passes (%d): keep its env block smaller", len(b), sandboxinit.MaxSpawnRequest)
	}
	s.startMu.Lock()
	defer s.startMu.Unlock()
	s.mu.Lock()
	if s.sock < 0 {
		err := s.dead
		s.mu.Unlock()
		return nil, err
	}
	// Under mu: the socket is not closed meanwhile (its number reused).
	// One request at a time, and the spawner reads them as they come:
	// the send does not wait long.
	err = unix.Sendmsg(s.sock, b, unix.UnixRights(fds...), nil, 0)
	s.mu.Unlock()
	if errors.Is(err, unix.EMSGSIZE) {
		return nil, fmt.Errorf("sandbox: the start's arguments and environment (%d bytes) are more than this system's socket buffers pass (net.core.wmem_max): keep the server's env block smaller", len(b))
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox: asking the spawner: %w", err)
	}
	runtime.KeepAlive(files) // open until sent
	var r sandboxinit.SpawnReply
	var ok bool
	select {
	case r, ok = <-s.replies:
	case <-time.After(spawnerReplyTimeout):
		// A spawner that does not answer a fork in this long is stuck
		// (stopped, starved): it is stopped, its helpers with it, and
		// the next start has a new one.
		_ = s.cmd.Process.Kill()
		return nil, fmt.Errorf("sandbox: the spawner did not answer within %v; it was stopped", spawnerReplyTimeout)
	}
	if !ok {
		s.mu.Lock()
		defer s.mu.Unlock()
		return nil, s.dead
	}
	if r.Error != "" {
		return nil, fmt.Errorf("fork/exec %s: %s", cmd.Path, r.Error)
	}
	p = &spawned{pid: r.PID, done: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.early[r.PID]; ok {
		delete(s.early, r.PID)
		p.status = syscall.WaitStatus(st) //nolint:gosec // G115: a wait status
		close(p.done)
		s.release()
		return p, nil
	}
	if s.dead != nil {
		p.err = s.dead
		close(p.done)
		s.release()
		return p, nil
	}
	s.waiting[r.PID] = p
	return p, nil
}

// spawnOutput runs cmd through helper's spawner and returns its output
// and how it ended, as cmd.CombinedOutput does.
func spawnOutput(helper string, cmd *exec.Cmd) ([]byte, error) {
	sp, err := spawnerFor(helper)
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		sp.mu.Lock()
		sp.release()
		sp.mu.Unlock()
		return nil, err
	}
	defer func() { _ = r.Close() }()
	cmd.Stdout, cmd.Stderr = w, w
	p, err := sp.start(cmd)
	_ = w.Close()
	if err != nil {
		return nil, err
	}
	out, _ := io.ReadAll(r)
	return out, p.Wait()
}

// spawnedConfinement is a confined start whose helper the spawner starts.
type spawnedConfinement struct {
	*confinement
	helper string
}

// StartProcess starts the helper through the spawner of its binary.
func (c spawnedConfinement) StartProcess(cmd *exec.Cmd) (launcher.Process, error) {
	sp, err := spawnerFor(c.helper)
	if err != nil {
		return nil, err
	}
	p, err := sp.start(cmd)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return p, nil
}

var (
	_ launcher.Process        = (*spawned)(nil)
	_ launcher.ProcessStarter = spawnedConfinement{}
	_ launcher.Offline        = spawnedConfinement{}
	_ launcher.Offline        = (*confinement)(nil)
)

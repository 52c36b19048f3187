//go:build linux

package sandboxinit

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// SpawnerFD is the spawner's end of its socket with the host.
const SpawnerFD = 3

// EnvSpawnerFor names, in the spawner's environment, the helper path the
// host's requests use: the spawner executes its own binary for them
// (/proc/self/exe, the file the host checked and started it from), never
// the file that path names by the time of a start, which a server may
// have replaced since (red team).
const EnvSpawnerFor = "SWITCHBOARD_SPAWNER_FOR"

// EnvSpawnerIDs carries, in the spawner's environment, the host's user and
// group ("UID:GID"). The spawner the host starts forks its working half
// into a user namespace of its own and waits for it; the working half maps
// those IDs to themselves before its first start. Every helper then starts
// inside that one user namespace, in new mount, PID, IPC, UTS and network
// namespaces of its own. A start in a new user namespace cannot share its
// parent's memory: the kernel copies the parent's page tables (and frees
// the copy at the exec), and each page the parent writes afterwards
// faults. Made for every helper, that cost a third of a confined start's
// CPU; made by the host, whose heap is large and busy, tens of
// milliseconds. The helpers share nothing through the user namespace: each
// drops every capability before its plugin runs, a PID namespace hides the
// others' processes, and the limit of user namespaces made inside it is
// zero.
const EnvSpawnerIDs = "SWITCHBOARD_SPAWNER_IDS"

// envSpawnerMapped carries the IDs to the working half, in the user
// namespace, which maps them.
const envSpawnerMapped = "SWITCHBOARD_SPAWNER_MAP"

var (
	capsOnce sync.Once
	caps     []uintptr
)

// AllCaps lists every capability this kernel knows (0 to cap_last_cap):
// raising one it does not know fails the start.
func AllCaps() []uintptr {
	capsOnce.Do(func() {
		last := 40 // CAP_CHECKPOINT_RESTORE, Linux 5.9
		if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n >= 0 && n < 64 {
				last = n
			}
		}
		for c := 0; c <= last; c++ {
			caps = append(caps, uintptr(c)) //nolint:gosec // G115: 0 to 63
		}
	})
	return caps
}

// spawnInNamespace is the spawner's first half: it starts its own binary
// again as the working half, in a new user namespace (keeping every
// capability it has there as an ambient one, so that it may map its IDs
// when it is not root), hands it the socket, and waits for it. It exits
// with the working half, and the working half dies with it (its
// parent-death signal).
func spawnInNamespace(ids string) int {
	env := make([]string, 0, 4)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, EnvSpawnerIDs+"=") {
			env = append(env, kv)
		}
	}
	env = append(env, envSpawnerMapped+"="+ids)
	args := os.Args
	if len(args) == 0 {
		args = []string{"switchboard-sandbox"}
	}
	pid, err := syscall.ForkExec("/proc/self/exe", args, &syscall.ProcAttr{ //nolint:gosec // G702: its own binary, with its own arguments
		Env: env, Files: []uintptr{0, 1, 2, SpawnerFD},
		Sys: &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWUSER, AmbientCaps: AllCaps(),
			Pdeathsig: syscall.SIGKILL,
		},
	})
	if err != nil {
		// The host reads the end of its socket, and the probe reports
		// why in its namespaces error.
		fmt.Fprintf(os.Stderr, "switchboard sandbox spawner: cannot create a user namespace: %v\n", err)
		return 126
	}
	// The socket is the working half's alone: the host hears the end of
	// it when that half ends.
	_ = syscall.Close(SpawnerFD)
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || got == pid {
			return 0
		}
	}
}

// SpawnRequest asks the spawner to start one sandbox helper. The child's
// descriptors (0, 1, 2, then any extra ones, in order) come with the
// message (SCM_RIGHTS).
type SpawnRequest struct {
	Path        string
	Args        []string
	Env         []string
	Dir         string
	Cloneflags  uintptr
	AmbientCaps []uintptr
	Setpgid     bool
	Pdeathsig   int
}

// Encode returns the request as the spawner reads it.
func (r SpawnRequest) Encode() []byte {
	e := encoder{b: make([]byte, 0, 4096)}
	e.str(codecVersion)
	e.str(r.Path)
	e.strs(r.Args)
	e.strs(r.Env)
	e.str(r.Dir)
	e.unum(uint64(r.Cloneflags))
	e.num(int64(len(r.AmbientCaps)))
	for _, c := range r.AmbientCaps {
		e.unum(uint64(c))
	}
	e.flag(r.Setpgid)
	e.num(int64(r.Pdeathsig))
	return e.b
}

func decodeRequest(b []byte) (SpawnRequest, error) {
	d := decoder{s: string(b)}
	if d.str() != codecVersion {
		return SpawnRequest{}, errMalformed
	}
	var r SpawnRequest
	r.Path = d.str()
	r.Args = d.strs()
	r.Env = d.strs()
	r.Dir = d.str()
	r.Cloneflags = uintptr(d.unum())
	if n := d.small(); n > 0 && n <= 64 {
		r.AmbientCaps = make([]uintptr, n)
		for i := range r.AmbientCaps {
			r.AmbientCaps[i] = uintptr(d.unum())
		}
	} else if n > 64 {
		return SpawnRequest{}, errMalformed
	}
	r.Setpgid = d.flag()
	r.Pdeathsig = d.small()
	return r, d.end()
}

// SpawnReply is the spawner's answer to a request (PID or Error), or the
// news that one of its children exited (Exited, with its wait status).
type SpawnReply struct {
	PID    int
	Error  string
	Exited int
	Status int
}

// Encode returns the reply as the host reads it (DecodeReply).
func (r SpawnReply) Encode() []byte {
	e := encoder{b: make([]byte, 0, 64+len(r.Error))}
	e.num(int64(r.PID))
	e.str(r.Error)
	e.num(int64(r.Exited))
	e.num(int64(r.Status))
	return e.b
}

// DecodeReply reads a reply that Encode wrote.
func DecodeReply(b []byte) (SpawnReply, error) {
	d := decoder{s: string(b)}
	var r SpawnReply
	r.PID = d.small()
	r.Error = d.str()
	r.Exited = d.small()
	r.Status = int(d.num())
	return r, d.end()
}

// MaxSpawnRequest bounds a request's size (its environment included):
// the kernel passes a message on the spawner's socket only when it fits
// the sender's buffer, which is at most twice net.core.wmem_max (208 KiB
// by default).
const MaxSpawnRequest = 384 << 10

// maxSpawnFDs bounds the descriptors one request may carry.
const maxSpawnFDs = 16

// runSpawner is the helper's spawner mode: a small process the host
// starts once and asks to start every sandbox helper. A start in new
// namespaces (a user namespace among them) cannot share the parent's
// memory as a plain start does (vfork): the kernel copies the parent's page
// tables and its every later write faults. Done by the host, whose heap is
// large and busy, that cost several milliseconds of its CPU per start; done
// here, it is a fraction of one. The spawner reaps its children and tells
// the host when one exits; it exits when the host closes the socket (or
// dies: it holds its parent-death signal), and its children, whose
// parent-death signal is tied to this process's one thread that forks them,
// die with it.
func runSpawner() int {
	// Every child is forked from this thread: a child's parent-death
	// signal fires when the thread that forked it ends.
	runtime.LockOSThread()
	// A terminal's ^C reaches the host's process group, not this one, but
	// the host stops its plugins in order: nothing but the host's end
	// stops the spawner.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE)
	if ids := os.Getenv(EnvSpawnerIDs); ids != "" {
		CloseOnExecFrom(SpawnerFD + 1)
		return spawnInNamespace(ids)
	}
	if ids := os.Getenv(envSpawnerMapped); ids != "" {
		_ = os.Unsetenv(envSpawnerMapped)
		u, g, _ := strings.Cut(ids, ":")
		uid, uerr := strconv.Atoi(u)
		gid, gerr := strconv.Atoi(g)
		if uerr != nil || gerr != nil {
			fmt.Fprintf(os.Stderr, "switchboard sandbox spawner: %s=%q is not UID:GID\n", envSpawnerMapped, ids)
			return 2
		}
		if err := mapIDs(uid, gid); err != nil {
			fmt.Fprintf(os.Stderr, "switchboard sandbox spawner: %v\n", err)
			return 126
		}
		if err := noNestedUserNamespaces(); err != nil {
			fmt.Fprintf(os.Stderr, "switchboard sandbox spawner: %v\n", err)
			return 126
		}
	}
	// Nothing of this process passes to a helper but what a request
	// carries: its socket and anything else it inherited stay here.
	CloseOnExecFrom(SpawnerFD)
	// The environments it passes on (a plugin's settings and secrets)
	// are no more readable here than in the host, which is not dumpable
	// either.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	chld := make(chan os.Signal, 16)
	signal.Notify(chld, syscall.SIGCHLD)
	send := func(r SpawnReply) error {
		return unix.Sendmsg(SpawnerFD, r.Encode(), nil, nil, 0)
	}
	go func() {
		for range chld {
			for {
				var ws unix.WaitStatus
				pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
				if errors.Is(err, unix.EINTR) {
					continue
				}
				if pid <= 0 || err != nil {
					break
				}
				_ = send(SpawnReply{Exited: pid, Status: int(ws)})
			}
		}
	}()
	helper := os.Getenv(EnvSpawnerFor)
	buf := make([]byte, MaxSpawnRequest)
	oob := make([]byte, unix.CmsgSpace(4*maxSpawnFDs))
	for {
		n, oobn, _, _, err := unix.Recvmsg(SpawnerFD, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			return 0 // the host is gone, or done
		}
		fds, ferr := rights(oob[:oobn])
		pid, serr := spawn(buf[:n], fds, helper)
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
		switch {
		case ferr != nil:
			serr = ferr
		case serr == nil:
			if err := send(SpawnReply{PID: pid}); err != nil {
				return 0
			}
			continue
		}
		if err := send(SpawnReply{Error: serr.Error()}); err != nil {
			return 0
		}
	}
}

// rights returns the descriptors a message carried.
func rights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err != nil {
			return nil, err
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

// spawn starts the helper a request describes; a request for helper runs
// this process's own binary.
func spawn(raw []byte, fds []int, helper string) (int, error) {
	req, err := decodeRequest(raw)
	if err != nil {
		return 0, fmt.Errorf("sandbox spawner: bad request: %w", err)
	}
	if len(fds) < 3 {
		return 0, fmt.Errorf("sandbox spawner: a request carries the child's descriptors 0, 1 and 2, got %d", len(fds))
	}
	files := make([]uintptr, len(fds))
	for i, fd := range fds {
		files[i] = uintptr(fd) //nolint:gosec // G115: a descriptor
	}
	path := req.Path
	if helper != "" && path == helper {
		path = "/proc/self/exe"
	}
	return syscall.ForkExec(path, req.Args, &syscall.ProcAttr{
		Dir: req.Dir, Env: req.Env, Files: files,
		Sys: &syscall.SysProcAttr{
			Cloneflags: req.Cloneflags, AmbientCaps: req.AmbientCaps,
			Setpgid: req.Setpgid, Pdeathsig: syscall.Signal(req.Pdeathsig),
		},
	})
}

//go:build linux

package sandboxinit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
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

// SpawnRequest asks the spawner to start one sandbox helper. The child's
// descriptors (0, 1, 2, then any extra ones, in order) come with the
// message (SCM_RIGHTS).
type SpawnRequest struct {
	Path        string    `json:"path"`
	Args        []string  `json:"args"`
	Env         []string  `json:"env"`
	Dir         string    `json:"dir,omitempty"`
	Cloneflags  uintptr   `json:"cloneflags"`
	AmbientCaps []uintptr `json:"ambient_caps,omitempty"`
	Setpgid     bool      `json:"setpgid,omitempty"`
	Pdeathsig   int       `json:"pdeathsig,omitempty"`
}

// SpawnReply is the spawner's answer to a request (PID or Error), or the
// news that one of its children exited (Exited, with its wait status).
type SpawnReply struct {
	PID    int    `json:"pid,omitempty"`
	Error  string `json:"error,omitempty"`
	Exited int    `json:"exited,omitempty"`
	Status int    `json:"status,omitempty"`
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
	// Nothing of this process passes to a helper but what a request
	// carries: its socket and anything else it inherited stay here.
	CloseOnExecFrom(SpawnerFD)
	// The environments it passes on (a plugin's settings and secrets)
	// are no more readable here than in the host, which is not dumpable
	// either.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	// A terminal's ^C reaches the host's process group, not this one, but
	// the host stops its plugins in order: nothing but the host's end
	// stops the spawner.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE)
	chld := make(chan os.Signal, 16)
	signal.Notify(chld, syscall.SIGCHLD)
	send := func(r SpawnReply) error {
		b, _ := json.Marshal(r)
		return unix.Sendmsg(SpawnerFD, b, nil, nil, 0)
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
	var req SpawnRequest
	if err := json.Unmarshal(raw, &req); err != nil {
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

package control

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Peer is the process at the other end of a control connection, as the
// kernel reported it when the connection was made (SO_PEERCRED), with the
// PID seen from the host's PID namespace (0 when it is not visible there).
type Peer struct {
	PID int
	UID int
	GID int
}

// ErrPeerRefused is wrapped by every refusal of a peer.
var ErrPeerRefused = errors.New("control: peer refused")

// Guard decides which processes the control socket serves: only processes
// of the host's user that run in the host's own PID namespace and are not
// known to be plugins. A plugin is recognised by what its processes cannot
// leave, its PID namespace or its cgroup (a sandboxed plugin runs in its
// own), and, as a weaker second signal, by descent from a plugin's process
// (which `setsid -f` or a double fork escapes, hence not the only one).
// A Guard is safe for concurrent use; its Add methods may be called at any
// time (as plugins start).
type Guard struct {
	proc  string // the proc file system, "/proc"
	uid   int
	pidNS string // the host's, as readlink shows it: "pid:[4026531836]"

	mu         sync.RWMutex
	pluginPIDs func() []int
	namespaces map[string]bool
	cgroups    []string
}

// NewGuard returns a guard for this process.
func NewGuard() (*Guard, error) { return newGuard("/proc") }

func newGuard(proc string) (*Guard, error) {
	ns, err := os.Readlink(filepath.Join(proc, "self", "ns", "pid"))
	if err != nil {
		return nil, fmt.Errorf("control: cannot read the host's PID namespace: %w", err)
	}
	return &Guard{proc: proc, uid: os.Getuid(), pidNS: ns, namespaces: map[string]bool{}}, nil
}

// PluginPIDs sets the hook that lists the plugin processes running now
// (the guard refuses their descendants).
func (g *Guard) PluginPIDs(fn func() []int) {
	g.mu.Lock()
	g.pluginPIDs = fn
	g.mu.Unlock()
}

// AddPluginNamespace registers a plugin's PID namespace, as readlink of
// /proc/<pid>/ns/pid shows it ("pid:[4026532201]"). Any namespace other
// than the host's is refused anyway; this names it in the refusal.
func (g *Guard) AddPluginNamespace(ns string) {
	g.mu.Lock()
	g.namespaces[ns] = true
	g.mu.Unlock()
}

// AddPluginCgroup registers a plugin's cgroup (a path as in
// /proc/<pid>/cgroup, e.g. "/switchboard/bash"): a peer in it or below it
// is refused.
func (g *Guard) AddPluginCgroup(path string) {
	g.mu.Lock()
	g.cgroups = append(g.cgroups, strings.TrimSuffix(path, "/"))
	g.mu.Unlock()
}

// Check returns nil if p may use the control socket, else an error
// wrapping ErrPeerRefused that says why. Anything it cannot read about the
// peer is a refusal.
func (g *Guard) Check(p Peer) error {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrPeerRefused, fmt.Sprintf(format, args...))
	}
	if p.UID != g.uid {
		return refuse("uid %d is not the host's uid %d", p.UID, g.uid)
	}
	if p.PID <= 0 {
		return refuse("the process is not visible from the host's PID namespace")
	}
	dir := filepath.Join(g.proc, strconv.Itoa(p.PID))
	ns, err := os.Readlink(filepath.Join(dir, "ns", "pid"))
	if err != nil {
		return refuse("pid %d: cannot read its PID namespace: %v", p.PID, err)
	}
	g.mu.RLock()
	plugin := g.namespaces[ns]
	cgroups := g.cgroups
	pids := g.pluginPIDs
	g.mu.RUnlock()
	if ns != g.pidNS {
		what := "another PID namespace"
		if plugin {
			what = "a plugin's PID namespace"
		}
		return refuse("pid %d runs in %s (%s, the host's is %s)", p.PID, what, ns, g.pidNS)
	}
	if len(cgroups) > 0 {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup"))
		if err != nil {
			return refuse("pid %d: cannot read its cgroup: %v", p.PID, err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 {
				continue
			}
			for _, cg := range cgroups {
				if parts[2] == cg || strings.HasPrefix(parts[2], cg+"/") {
					return refuse("pid %d runs in the plugin cgroup %s", p.PID, cg)
				}
			}
		}
	}
	if pids != nil {
		plugins := map[int]bool{}
		for _, pid := range pids() {
			if pid > 0 {
				plugins[pid] = true
			}
		}
		// Walk up the parents; a process re-parented by setsid -f or a
		// double fork is not caught here, but its namespace or cgroup is.
		for pid, n := p.PID, 0; pid > 1 && n < 256; n++ {
			if plugins[pid] {
				return refuse("pid %d descends from the plugin process %d", p.PID, pid)
			}
			if pid = g.parent(pid); pid <= 0 {
				break
			}
		}
	}
	return nil
}

// parent reads a process's parent pid from /proc/<pid>/stat (0 if gone).
func (g *Guard) parent(pid int) int {
	b, err := os.ReadFile(filepath.Join(g.proc, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	// "pid (comm) state ppid …"; comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// peerKey holds a connection's peer and the guard's verdict on it.
type peerKey struct{}

type peerInfo struct {
	peer Peer
	err  error // nil: served
}

// connContext judges the peer as soon as the connection is accepted (the
// nearer to connect(2), the smaller the window for its PID to be reused).
func connContext(g *Guard) func(ctx context.Context, c net.Conn) context.Context {
	return func(ctx context.Context, c net.Conn) context.Context {
		info := peerInfo{}
		uc, ok := c.(*net.UnixConn)
		if !ok {
			info.err = fmt.Errorf("%w: not a Unix socket connection", ErrPeerRefused)
			return context.WithValue(ctx, peerKey{}, info)
		}
		peer, alive, release, err := peerCred(uc)
		defer release()
		info.peer = peer
		switch {
		case err != nil:
			info.err = fmt.Errorf("%w: %v", ErrPeerRefused, err)
		default:
			info.err = g.Check(peer)
			// The pid judged must still be the process that connected.
			if info.err == nil && alive != nil && !alive() {
				info.err = fmt.Errorf("%w: pid %d exited before it could be checked", ErrPeerRefused, peer.PID)
			}
		}
		return context.WithValue(ctx, peerKey{}, info)
	}
}

func peerOf(ctx context.Context) peerInfo {
	if info, ok := ctx.Value(peerKey{}).(peerInfo); ok {
		return info
	}
	return peerInfo{err: fmt.Errorf("%w: unknown peer", ErrPeerRefused)}
}

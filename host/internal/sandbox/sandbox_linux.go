//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/switchboard-mcp/switchboard/host/internal/sandboxinit"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/sysproc"
)

// EnvSpec carries the helper's instructions (sandboxinit.Spec as JSON).
const EnvSpec = sandboxinit.EnvSpec

// HelperCommand is the hidden subcommand of the switchboard binary that
// runs the helper when the small switchboard-sandbox binary is not beside
// it.
const HelperCommand = "sandbox-exec"

// kernel is what this machine offers, probed once.
type kernel struct {
	namespaces error // nil when user+mount+pid namespaces can be made
	landlock   int   // ABI version, 0 when absent
	cgroup     *cgroupRoot
}

var (
	probeOnce sync.Once
	probed    kernel
)

func probe(helper string) kernel {
	probeOnce.Do(func() {
		probed.landlock, _ = ll.LandlockGetABIVersion()
		probed.cgroup = findCgroup()
		// Whether the kernel lets us make the namespaces: a tiny program is
		// enough to find out (the helper itself would cost a start of this
		// large binary); the helper reports anything else when it runs.
		cmd := exec.Command(helper, HelperCommand)
		cmd.Env = []string{EnvSpec + "=probe"}
		if t := systemTrue(); t != "" {
			cmd = exec.Command(t)
		}
		cmd.SysProcAttr = nsAttr(true)
		// Through the spawner, as every confined start is: the host does
		// not fork itself into namespaces, and the spawner is up before
		// the first plugin needs it.
		out, err := spawnOutput(helper, cmd)
		if err == nil && cmd.Path != helper {
			out = []byte("ok")
		}
		switch {
		case errors.Is(err, errNoSpawner):
			probed.namespaces = err
		case err != nil:
			probed.namespaces = fmt.Errorf("cannot create user, mount and PID namespaces (%v %s); on Debian set sysctl kernel.unprivileged_userns_clone=1, on Ubuntu allow unprivileged user namespaces in AppArmor", err, strings.TrimSpace(string(out)))
		case strings.TrimSpace(string(out)) != "ok":
			probed.namespaces = fmt.Errorf("the sandbox helper could not set up its namespaces: %s", strings.TrimSpace(string(out)))
		}
	})
	return probed
}

// systemTrue returns the system's true(1) from the folders only root
// writes, or "". Never through $PATH: the probe runs in a user namespace
// only, without the sandbox's mounts, Landlock or seccomp, so a `true` in
// a folder a server may write that comes first in the host's PATH (an
// activated virtualenv's bin, node_modules/.bin) ran the agent's program
// unconfined at every host start (red team round 5).
func systemTrue() string {
	for _, t := range []string{"/usr/bin/true", "/bin/true"} {
		if st, err := os.Stat(t); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 && st.Mode()&0o022 == 0 {
			if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid == 0 {
				return t
			}
		}
	}
	return ""
}

// Prewarm finds out in the background what this machine offers, so that
// the first confined start does not wait for it.
func Prewarm(helper string) { go probe(helper) }

// nsAttr returns process attributes for a child in new namespaces, as the
// spawner starts it: inside the spawner's own user namespace
// (sandboxinit.EnvSpawnerIDs), in new mount, PID, IPC and UTS namespaces
// (and network, with newNet). The child keeps every capability it has in
// that user namespace through its exec (as ambient capabilities): without
// them an exec as anyone but root in the namespace drops them, so a helper
// started by a host that is not root could not mount anything.
func nsAttr(newNet bool) *syscall.SysProcAttr {
	// The helper dies at once with the host, and the kernel then kills
	// everything in its PID namespace; an orderly stop goes through the
	// launcher's SIGTERM to the process group instead.
	attr := sysproc.Attr(syscall.SIGKILL)
	attr.Cloneflags = syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS
	if newNet {
		attr.Cloneflags |= syscall.CLONE_NEWNET
	}
	attr.AmbientCaps = sandboxinit.AllCaps()
	return attr
}

// Report says what Wrap would enforce for this sandbox on this machine.
func (s *Sandbox) Report() Report {
	r := Report{Mode: s.Policy.Mode}
	if r.Mode == ModeOff || r.Mode == "" {
		r.Mode = ModeOff
		return r
	}
	k := probe(s.Helper)
	r.Landlock, r.Namespaces = k.landlock, k.namespaces == nil
	if k.namespaces == nil {
		ns := "user, mount, PID, IPC namespaces"
		if !s.Policy.Network {
			ns = "user, mount, PID, IPC, network namespaces"
		}
		r.Enforced = append(r.Enforced, ns, "own /proc", "control plane, /home, /root, /tmp, /run hidden")
	} else {
		r.Missing = append(r.Missing, "namespaces: "+k.namespaces.Error())
	}
	tcp := ", TCP"
	if s.Policy.Network || k.namespaces == nil {
		tcp = "" // the network namespace is the TCP guard then
	}
	switch {
	case k.landlock >= 6:
		r.Enforced = append(r.Enforced, fmt.Sprintf("Landlock ABI %d (files%s, signals, abstract sockets)", k.landlock, tcp))
	case k.landlock >= 4:
		r.Enforced = append(r.Enforced, fmt.Sprintf("Landlock ABI %d (files%s)", k.landlock, tcp))
		r.Missing = append(r.Missing, "Landlock scoping of signals and abstract sockets (needs Linux 6.12)")
	case k.landlock >= 1:
		r.Enforced = append(r.Enforced, fmt.Sprintf("Landlock ABI %d (files)", k.landlock))
		if !s.Policy.Network {
			r.Missing = append(r.Missing, "Landlock TCP rules (needs Linux 6.7; the network namespace still cuts TCP off)")
		}
	default:
		r.Missing = append(r.Missing, "Landlock (needs Linux 5.13 with Landlock enabled)")
	}
	if s.Policy.ExecOnly {
		if k.landlock >= 1 {
			r.Enforced = append(r.Enforced, fmt.Sprintf("executes only its own binary and the programs it is granted (%d paths)", len(s.Policy.Exec)))
		} else {
			r.Missing = append(r.Missing, "the limit on what it may execute (needs Landlock)")
		}
	}
	r.Enforced = append(r.Enforced, "no capabilities", "no_new_privs", "no kernel keyrings (seccomp)")
	limits := s.Policy.withLimits(k)
	if limits.Memory > 0 || limits.Processes > 0 {
		if k.cgroup != nil {
			r.Enforced = append(r.Enforced, "cgroup "+k.cgroup.describe(limits))
		} else {
			r.Missing = append(r.Missing, "memory and process limits (no writable cgroup)")
		}
	} else {
		if s.Policy.DefaultProcesses > 0 {
			r.Missing = append(r.Missing, fmt.Sprintf("the default limit of %d processes (no writable cgroup)", s.Policy.DefaultProcesses))
		}
		if s.Policy.DefaultMemory > 0 {
			r.Missing = append(r.Missing, fmt.Sprintf("the default memory limit of %s (no writable cgroup)", FormatBytes(s.Policy.DefaultMemory)))
		}
	}
	return r
}

// withLimits returns p with its default process and memory limits in
// force where this machine has a writable cgroup and no limit is
// configured.
func (p Policy) withLimits(k kernel) Policy {
	if p.Processes == 0 && p.DefaultProcesses > 0 && k.cgroup != nil {
		p.Processes = p.DefaultProcesses
	}
	if p.Memory == 0 && p.DefaultMemory > 0 && k.cgroup != nil {
		p.Memory = p.DefaultMemory
	}
	return p
}

// essentialMissing returns why the sandbox cannot confine as required.
func (s *Sandbox) essentialMissing(k kernel) error {
	var missing []string
	if k.namespaces != nil {
		missing = append(missing, k.namespaces.Error())
	}
	if k.landlock < 1 {
		missing = append(missing, "Landlock is not available (Linux 5.13 or later with Landlock enabled)")
	}
	if (s.Policy.Memory > 0 || s.Policy.Processes > 0) && k.cgroup == nil {
		missing = append(missing, "no writable cgroup for the memory and process limits")
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s (set sandbox { mode = \"best-effort\" } to run it with what there is, or \"off\")", ErrUnavailable, strings.Join(missing, "; "))
}

// Wrap implements launcher.Sandbox.
func (s *Sandbox) Wrap(cmd *exec.Cmd, socketDir string) (launcher.Confinement, error) {
	if s.Policy.Mode == ModeOff || s.Policy.Mode == "" {
		return nil, nil
	}
	k := probe(s.Helper)
	if err := s.essentialMissing(k); err != nil && s.Policy.Mode == ModeRequired {
		return nil, err
	}
	p := s.Policy.withLimits(k)
	if p.State != "" {
		if err := os.MkdirAll(p.State, 0o700); err != nil {
			return nil, fmt.Errorf("sandbox: the server's state folder: %w", err)
		}
	}
	if s.Preparer != nil {
		if err := s.Preparer.Prepare(&p); err != nil {
			return nil, err
		}
	}
	for _, d := range p.Make {
		makeFolder(d, append([]string{p.State}, p.Write...)) // best effort: the server says what it misses
	}
	for _, f := range p.Files {
		makeFile(f, p.Write)
	}
	if s.Preparer != nil {
		s.Preparer.Made(&p)
	}
	c := &confinement{offline: !p.Network}
	root := s.TempRoot
	if root == "" {
		root = launcher.TempDir() // the host's own: a killed host's is removed by the next
	}
	tmp, err := os.MkdirTemp(root, "switchboard-"+s.Name+"-")
	if err != nil {
		return nil, fmt.Errorf("sandbox: private temp folder: %w", err)
	}
	c.tmp = tmp
	binary := cmd.Path
	pinnedELF := false
	if binary == launcher.PinnedExecPath && len(cmd.Args) > 0 {
		binary = cmd.Args[0]
		if len(cmd.ExtraFiles) == 1 && cmd.ExtraFiles[0] != nil {
			// A script's interpreter opens /proc/self/fd/3 after the
			// exec: only a binary can run without the descriptor.
			var magic [4]byte
			n, _ := cmd.ExtraFiles[0].ReadAt(magic[:], 0)
			pinnedELF = n == 4 && string(magic[:]) == "\x7fELF"
		}
	}
	if r, err := filepath.EvalSymlinks(binary); err == nil {
		binary = r
	}
	sp := sandboxinit.Spec{
		Path: cmd.Path, Args: cmd.Args, Binary: binary,
		Namespaces: k.namespaces == nil, Landlock: k.landlock >= 1,
		Read:     append(systemPaths(), p.Read...),
		Write:    nonEmpty(append(append([]string{tmp, p.State}, p.Write...), socketDir)),
		Hide:     withOtherNames(p.Hide, append(slices.Clone(p.Write), p.Read...)),
		ReadOnly: p.ReadOnly,
		Network:  p.Network,
		FileSize: p.FileSize, OpenFiles: p.OpenFiles, CPUSeconds: p.CPUSeconds,
		Env:      map[string]string{"HOME": tmp, "TMPDIR": tmp},
		ExtraFDs: len(cmd.ExtraFiles),
		PinnedFD: pinnedELF,
		ExecOnly: p.ExecOnly, Exec: p.Exec,
	}
	for k, v := range p.Env {
		sp.Env[k] = v
	}
	if sp.Namespaces {
		sp.Env[sysproc.EnvOwnPIDNamespace] = "1"
	}
	if k.cgroup != nil && (p.Memory > 0 || p.Processes > 0) {
		cg, err := k.cgroup.create(s.Name, p)
		configured := s.Policy.Memory > 0 || s.Policy.Processes > 0
		if err != nil {
			if s.Policy.Mode == ModeRequired && configured {
				c.Stopped()
				return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
			}
			// A default limit alone: the start goes on without it, and
			// Report says it is missing.
		} else {
			c.cgroup = cg
			// The helper waits for the host to put it in the cgroup
			// before it starts the plugin.
			r, w, err := os.Pipe()
			if err != nil {
				c.Stopped()
				return nil, err
			}
			c.gate, c.gateChild = w, r
			cmd.ExtraFiles = append(cmd.ExtraFiles, r)
			sp.GateFD = 2 + len(cmd.ExtraFiles)
		}
	}
	// The helper runs with one scheduler slot, so that the Go runtime
	// starts no thread for it while it builds the sandbox; the plugin gets
	// the value its own environment has, or none.
	if v, ok := envValue(cmd.Env, "GOMAXPROCS"); !ok {
		sp.Unset = append(sp.Unset, "GOMAXPROCS")
	} else if _, set := sp.Env["GOMAXPROCS"]; !set {
		sp.Env["GOMAXPROCS"] = v
	}
	cmd.Path = s.Helper
	cmd.Args = []string{s.Helper, HelperCommand}
	cmd.Env = append(cmd.Env, "GOMAXPROCS=1", EnvSpec+"="+sp.Encode())
	if sp.Namespaces {
		cmd.SysProcAttr = nsAttr(!p.Network)
		// The launcher's runner starts it through the spawner (an
		// external server's transport starts its command itself).
		return spawnedConfinement{confinement: c, helper: s.Helper}, nil
	}
	return c, nil
}

// makeFolder makes the folder d (0700) and any missing folder above it,
// only under one of roots (folders the server may write) and without
// following a symbolic link below the root: the host makes these folders
// as its own user (root, often) before the sandbox exists, and their paths
// come from files a server may write (a repository's .git file, commondir
// and core.hooksPath), which once had the host make folders anywhere, a
// link in the project leading elsewhere (red team round 9).
func makeFolder(d string, roots []string) {
	if fd, ok := openUnder(d, roots, true); ok {
		_ = unix.Close(fd)
	}
}

// makeFile makes f.Path with f.Content when nothing is there, in a folder
// under one of roots (made first when missing), on makeFolder's terms: no
// link is followed, and an existing entry of any kind is left alone.
func makeFile(f File, roots []string) {
	dir, name := filepath.Split(f.Path)
	fd, ok := openUnder(filepath.Clean(dir), roots, false)
	if !ok {
		// Its folder made first (an include in a folder that did not
		// exist yet was left for a server to make: red team round 14).
		if fd, ok = openUnder(filepath.Clean(dir), roots, true); !ok {
			return
		}
	}
	defer func() { _ = unix.Close(fd) }()
	w, err := unix.Openat(fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return // there already, or not ours to make
	}
	if _, err := unix.Write(w, []byte(f.Content)); err != nil {
		_ = unix.Unlinkat(fd, name, 0)
	}
	_ = unix.Close(w)
}

// openUnder opens the folder d (O_PATH) below the longest of roots that
// holds it, one level at a time without following a link, making missing
// levels (0700) when mk is set. d may be that root itself.
func openUnder(d string, roots []string, mk bool) (int, bool) {
	var root string
	for _, r := range roots {
		if r != "" && sandboxinit.Within(d, r) && len(r) > len(root) {
			root = r
		}
	}
	rel, err := filepath.Rel(root, d)
	if root == "" || err != nil || strings.HasPrefix(rel, "..") || (mk && rel == ".") {
		return -1, false
	}
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, false
	}
	if rel == "." {
		return fd, true
	}
	for _, name := range strings.Split(rel, string(filepath.Separator)) {
		if mk {
			if err := unix.Mkdirat(fd, name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
				_ = unix.Close(fd)
				return -1, false
			}
		}
		// O_NOFOLLOW with O_PATH opens a link itself, which O_DIRECTORY
		// then refuses.
		next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		_ = unix.Close(fd)
		if err != nil {
			return -1, false
		}
		fd = next
	}
	return fd, true
}

// envValue returns the value of the last name=… entry in env.
func envValue(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// confinement is one confined start.
type confinement struct {
	offline   bool // no network (Policy.Network false)
	tmp       string
	cgroup    *cgroup
	gate      *os.File // the host's end: closed once the helper is placed
	gateChild *os.File
	once      sync.Once
	reason    string
}

// Offline says the plugin has no network (launcher.Offline).
func (c *confinement) Offline() bool { return c.offline }

func (c *confinement) Started(pid int) error {
	if c.gateChild != nil {
		_ = c.gateChild.Close()
		c.gateChild = nil
	}
	if c.cgroup == nil {
		return nil
	}
	err := c.cgroup.add(pid)
	if c.gate != nil {
		if err == nil {
			_, _ = c.gate.Write([]byte{1})
		}
		_ = c.gate.Close()
		c.gate = nil
	}
	return err
}

func (c *confinement) Stopped() string {
	c.once.Do(func() {
		for _, f := range []*os.File{c.gate, c.gateChild} {
			if f != nil {
				_ = f.Close()
			}
		}
		if c.cgroup != nil {
			c.reason = c.cgroup.stopReason()
			c.cgroup.remove()
		}
		if c.tmp != "" {
			_ = os.RemoveAll(c.tmp)
		}
	})
	return c.reason
}

var _ launcher.Sandbox = (*Sandbox)(nil)

// sysPaths caches systemReadPaths as they exist here, symbolic links
// resolved (some 150 system calls per start otherwise), with the state of
// the folders that hold them: a path created, removed or re-linked there
// changes its folder's times, and the next start resolves them again.
var sysPaths struct {
	sync.Mutex
	parents map[string]dirState
	paths   []string
}

// dirState is what changes when a folder's entries change (the zero
// value: the folder is missing).
type dirState struct {
	ino          uint64
	mtime, ctime syscall.Timespec
}

func stateOf(dir string) dirState {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return dirState{}
	}
	return dirState{ino: st.Ino, mtime: st.Mtim, ctime: st.Ctim}
}

// systemPaths returns cleanPaths(existing(systemReadPaths)), cached.
func systemPaths() []string {
	sysPaths.Lock()
	defer sysPaths.Unlock()
	fresh := sysPaths.parents != nil
	for dir, was := range sysPaths.parents {
		if now := stateOf(dir); now != was {
			fresh = false
			break
		}
	}
	if !fresh {
		parents := map[string]dirState{}
		for _, p := range systemReadPaths {
			dir := filepath.Dir(p)
			if _, seen := parents[dir]; !seen {
				parents[dir] = stateOf(dir)
			}
		}
		sysPaths.parents, sysPaths.paths = parents, cleanPaths(existing(systemReadPaths), "", filepath.EvalSymlinks)
	}
	return slices.Clip(sysPaths.paths)
}

// cgroupRoot is a writable place for per-plugin cgroups: one folder per
// controller on cgroup v1, one on v2.
type cgroupRoot struct {
	v2     string // unified hierarchy folder
	memory string // v1 memory controller folder
	pids   string // v1 pids controller folder
}

func (r *cgroupRoot) describe(p Policy) string {
	var parts []string
	if p.Memory > 0 {
		parts = append(parts, "memory "+FormatBytes(p.Memory))
	}
	if p.Processes > 0 {
		parts = append(parts, fmt.Sprintf("%d processes", p.Processes))
	}
	v := "v1"
	if r.v2 != "" {
		v = "v2"
	}
	return v + " (" + strings.Join(parts, ", ") + ")"
}

// findCgroup finds where this process may create cgroups: below its own
// cgroup, in a "switchboard" folder.
func findCgroup() *cgroupRoot {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	r := &cgroupRoot{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		ctrls, path := parts[1], parts[2]
		switch {
		case ctrls == "" && parts[0] == "0":
			if dir := filepath.Join("/sys/fs/cgroup", path, "switchboard"); usableCgroup(dir, "memory.max") {
				r.v2 = dir
			}
		case hasController(ctrls, "memory"):
			if dir := filepath.Join("/sys/fs/cgroup/memory", path, "switchboard"); usableCgroup(dir, "memory.limit_in_bytes") {
				r.memory = dir
			}
		case hasController(ctrls, "pids"):
			if dir := filepath.Join("/sys/fs/cgroup/pids", path, "switchboard"); usableCgroup(dir, "pids.max") {
				r.pids = dir
			}
		}
	}
	if r.v2 == "" && r.memory == "" && r.pids == "" {
		return nil
	}
	if r.v2 != "" {
		r.memory, r.pids = "", ""
	}
	return r
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// usableCgroup creates dir if needed and reports whether it has the file
// that shows the controller is there.
func usableCgroup(dir, file string) bool {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false
	}
	_, err := os.Stat(filepath.Join(dir, file))
	return err == nil
}

// cgroup is one plugin start's cgroup folders.
type cgroup struct {
	dirs   []string
	v2     bool
	memory string // the folder with the memory controller
	limit  int64
}

var cgroupSeq struct {
	sync.Mutex
	n int
}

func (r *cgroupRoot) create(name string, p Policy) (*cgroup, error) {
	cgroupSeq.Lock()
	cgroupSeq.n++
	leaf := fmt.Sprintf("%s-%d-%d", name, os.Getpid(), cgroupSeq.n)
	cgroupSeq.Unlock()
	cg := &cgroup{v2: r.v2 != "", limit: p.Memory}
	mk := func(parent string) (string, error) {
		dir := filepath.Join(parent, leaf)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return "", fmt.Errorf("sandbox: cgroup %s: %w", dir, err)
		}
		cg.dirs = append(cg.dirs, dir)
		return dir, nil
	}
	write := func(dir, file string, v int64) error {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(strconv.FormatInt(v, 10)), 0o644); err != nil {
			return fmt.Errorf("sandbox: cgroup %s: %w", file, err)
		}
		return nil
	}
	var err error
	if cg.v2 {
		// Enable the controllers for the children, best effort.
		_ = os.WriteFile(filepath.Join(r.v2, "cgroup.subtree_control"), []byte("+memory +pids"), 0o644)
		dir, e := mk(r.v2)
		if e != nil {
			return nil, e
		}
		cg.memory = dir
		if p.Memory > 0 {
			err = errors.Join(write(dir, "memory.max", p.Memory), write(dir, "memory.swap.max", 0))
		}
		if p.Processes > 0 {
			err = errors.Join(err, write(dir, "pids.max", p.Processes))
		}
	} else {
		if p.Memory > 0 && r.memory != "" {
			dir, e := mk(r.memory)
			if e != nil {
				cg.remove()
				return nil, e
			}
			cg.memory = dir
			err = write(dir, "memory.limit_in_bytes", p.Memory)
			// Swap counts too where the kernel accounts it.
			_ = write(dir, "memory.memsw.limit_in_bytes", p.Memory)
		}
		if p.Processes > 0 && r.pids != "" {
			dir, e := mk(r.pids)
			if e != nil {
				cg.remove()
				return nil, e
			}
			err = errors.Join(err, write(dir, "pids.max", p.Processes))
		}
	}
	if err != nil {
		cg.remove()
		return nil, err
	}
	return cg, nil
}

func (cg *cgroup) add(pid int) error {
	for _, dir := range cg.dirs {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("sandbox: moving the plugin into %s: %w", dir, err)
		}
	}
	return nil
}

// stopReason reads the memory controller's OOM count.
func (cg *cgroup) stopReason() string {
	if cg.memory == "" {
		return ""
	}
	file, key := "memory.oom_control", "oom_kill "
	if cg.v2 {
		file, key = "memory.events", "oom_kill "
	}
	b, err := os.ReadFile(filepath.Join(cg.memory, file))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if n, ok := strings.CutPrefix(line, key); ok && strings.TrimSpace(n) != "0" {
			return fmt.Sprintf("it reached its memory limit of %s and the kernel killed it (raise sandbox { memory = … } in its block)", FormatBytes(cg.limit))
		}
	}
	return ""
}

// remove deletes the cgroup folders once their processes are gone.
func (cg *cgroup) remove() {
	for _, dir := range cg.dirs {
		// The kernel refuses while a process is still in it; the plugin's
		// namespace dies with its helper, so a short wait is enough.
		for i := 0; i < 50; i++ {
			if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			sleepBriefly()
		}
	}
}

//go:build linux

package sandboxinit

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Run is the sandbox helper (`switchboard-sandbox`, or `switchboard sandbox-exec`): it confines itself as the host's
// instructions say, starts the plugin, stays as the namespace's init
// (forwarding signals, reaping zombies) and exits with the plugin's status.
// It returns the exit code.
func Run() int {
	// Every restriction below is a property of this one thread, and the
	// plugin is forked from it: applying them to every thread of the Go
	// process (libpsx) cost a signal round to all threads per call, some
	// 150 ms per start.
	runtime.LockOSThread() // never unlocked: the helper ends with the plugin
	raw := os.Getenv(EnvSpec)
	if raw == "spawner" {
		return runSpawner()
	}
	if raw == "probe" {
		if err := privateRoot(); err != nil {
			fmt.Println(err)
			return 1
		}
		if err := mountProc(); err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Println("ok")
		return 0
	}
	sp, err := DecodeSpec(raw)
	if err != nil || sp.Path == "" {
		fmt.Fprintf(os.Stderr, "switchboard sandbox-exec is started by the host, not by hand (%s is missing or invalid)\n", EnvSpec)
		return 2
	}
	_ = os.Unsetenv(EnvSpec)
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "switchboard sandbox: %v\n", err)
		return 126
	}
	// With Namespaces, the spawner started this process in new mount, PID,
	// IPC, UTS (and network) namespaces, inside the user namespace the
	// spawner made for itself and mapped (runSpawner).
	if sp.GateFD > 0 {
		// Wait until the host has placed this process in its cgroup.
		gate := os.NewFile(uintptr(sp.GateFD), "gate")
		var b [1]byte
		n, _ := gate.Read(b[:])
		_ = gate.Close()
		if n != 1 {
			return fail(errors.New("the host did not release the sandbox"))
		}
	}
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	if sp.Namespaces {
		wd, _ := os.Getwd()
		if err := setupMounts(sp); err != nil {
			return fail(err)
		}
		reenter(wd)
		if !sp.Network {
			// The sandbox's own loopback: a tool may run a server and
			// talk to it (a test suite), and nothing else is reachable.
			if err := loopbackUp(); err != nil {
				return fail(err)
			}
		}
	}
	if err := setRlimits(sp); err != nil {
		return fail(err)
	}
	if err := dropCapabilities(); err != nil {
		return fail(err)
	}
	if err := restrict(sp); err != nil {
		return fail(err)
	}
	return run(sp)
}

// CloseOnExecFrom marks every descriptor from fd up close-on-exec.
func CloseOnExecFrom(fd int) {
	if unix.CloseRange(uint(fd), ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	entries, err := os.ReadDir("/proc/self/fd") // before Linux 5.11
	if err != nil {
		return
	}
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil && n >= fd {
			syscall.CloseOnExec(n)
		}
	}
}

// mapIDs maps the host's user and group to themselves in this process's
// new user namespace. The host starts the spawner unmapped, with its
// capabilities in the namespace kept as ambient ones: a process may map its
// own IDs then, and the host need not wait to write the maps itself.
func mapIDs(uid, gid int) error {
	for _, w := range []struct{ file, data string }{
		{"/proc/self/setgroups", "deny"}, // required before an unprivileged gid_map
		{"/proc/self/gid_map", fmt.Sprintf("%d %d 1\n", gid, gid)},
		{"/proc/self/uid_map", fmt.Sprintf("%d %d 1\n", uid, uid)},
	} {
		if err := os.WriteFile(w.file, []byte(w.data), 0); err != nil {
			return fmt.Errorf("mapping the host's user and group into the sandbox: %w", err)
		}
	}
	return nil
}

// loopbackUp brings up lo in the sandbox's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer func() { _ = unix.Close(fd) }()
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	return nil
}

// privateRoot stops mounts made here from propagating to the host.
func privateRoot() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %w", err)
	}
	return nil
}

// mountProc mounts a /proc that shows only this PID namespace: the host's
// processes (and their environment) are not there to read.
func mountProc() error {
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /proc: %w", err)
	}
	return nil
}

// noNestedUserNamespaces sets this user namespace's limit of user
// namespaces made inside it to zero (the limit is per user namespace and
// its owner may set it; the helper still holds its capabilities here).
// Without it a command could unshare a user namespace of its own and hold
// every capability over the namespaces it then makes (network, UTS, IPC):
// no_new_privs and the emptied sets do not stop that, and it opens the
// kernel surface (netfilter, traffic control) that capabilities guard.
func noNestedUserNamespaces() error {
	err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0\n"), 0)
	if err != nil && !errors.Is(err, os.ErrNotExist) { // no such limit before Linux 4.9
		return fmt.Errorf("forbidding user namespaces inside the sandbox: %w", err)
	}
	return nil
}

func setupMounts(sp Spec) error {
	if err := privateRoot(); err != nil {
		return err
	}
	if err := readOnlySystem(sp.Write); err != nil {
		return err
	}
	if err := mountProc(); err != nil {
		return err
	}
	// The keys this user may see, listed with their ids: covered, as
	// Docker covers them (the calls that reach keys are refused too, see
	// denyKeyrings).
	for _, f := range []string{"/proc/keys", "/proc/key-users"} {
		if _, err := os.Stat(f); err == nil {
			if err := bindReadOnly("/dev/null", f); err != nil {
				return fmt.Errorf("covering %s: %w", f, err)
			}
		}
	}
	if err := noNestedUserNamespaces(); err != nil {
		return err
	}
	privatePTYs()
	granted := append(append([]string{sp.Binary}, sp.Read...), sp.Write...)
	if err := pinAncestors(append(append([]string{}, sp.Hide...), sp.ReadOnly...), sp.Write); err != nil {
		return err
	}
	for _, p := range sp.ReadOnly {
		// Only files and folders: a read-only mount changes nothing for a
		// device or FIFO (their writes are not the file system's), and
		// some cannot be bound at all (a repository's include.path =
		// /dev/stdin stopped every server from starting; red team round
		// 18).
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() && !st.IsDir() {
			continue
		}
		if err := bindReadOnly(p, p); err != nil {
			return fmt.Errorf("binding %s read-only: %w", p, err)
		}
	}
	// Hide the control plane, and the trees where other programs keep
	// Unix sockets and secrets (Landlock before ABI 9 cannot stop a
	// connect(2) to a socket it can see): what a plugin is granted inside
	// them is bound back.
	for _, p := range append(append([]string{}, sp.Hide...), coveredTrees...) {
		if lst, err := os.Lstat(p); err == nil && lst.Mode()&os.ModeSymlink != 0 {
			// /var/run -> /run: covering the link's target again would
			// hide what the first cover kept (a resolv.conf under /run).
			continue
		}
		st, err := os.Stat(p)
		if err != nil || (slices.Contains(coveredTrees, p) && slices.Contains(granted, p)) {
			continue
		}
		if st.IsDir() {
			err = hideDir(p, keepUnder(p, granted))
		} else {
			err = bindReadOnly("/dev/null", p)
		}
		if err != nil {
			return fmt.Errorf("hiding %s: %w", p, err)
		}
	}
	return nil
}

// reenter makes the working directory the one the path wd names now that
// the sandbox's mounts are in place. The directory inherited from the host
// was looked up before them: where a mount now covers it (a hidden
// data_dir the host was started from) it still reached what is underneath,
// so names there could be probed; where a writable folder is bound back
// over the read-only tree (a host started from the project) it was the
// read-only view, so relative writes failed. Where wd no longer exists
// (inside a hidden folder) the plugin starts in /.
func reenter(wd string) {
	if wd == "" || os.Chdir(wd) != nil {
		_ = os.Chdir("/")
	}
}

// readOnlySystem makes every mount read-only (Landlock does not cover
// chmod, chown or timestamps), then binds each writable path over itself
// read-write.
func readOnlySystem(write []string) error {
	err := unix.MountSetattr(-1, "/", unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
	if errors.Is(err, unix.ENOSYS) {
		return nil // Linux < 5.12: Landlock alone guards writes
	}
	if err != nil {
		return fmt.Errorf("making the system read-only: %w", err)
	}
	for _, w := range write {
		if _, err := os.Stat(w); err != nil {
			continue
		}
		if err := unix.Mount(w, w, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("binding %s: %w", w, err)
		}
		if err := unix.MountSetattr(-1, w, 0, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return fmt.Errorf("making %s writable: %w", w, err)
		}
	}
	return nil
}

// pinAncestors turns every folder between a writable root and a protected
// path into a mount point of its own, so that it can be neither renamed nor
// removed (EBUSY): a bind mount over a file stops its rename, not the
// rename of the folder that holds it.
func pinAncestors(protected, write []string) error {
	var pins []string
	for _, p := range protected {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		for _, w := range write {
			if p == w || !Within(p, w) {
				continue
			}
			for a := filepath.Dir(p); a != w && Within(a, w); a = filepath.Dir(a) {
				if !slices.Contains(pins, a) {
					pins = append(pins, a)
				}
			}
		}
	}
	// Shallowest first, each bind recursive so that deeper mounts stay.
	slices.SortFunc(pins, func(a, b string) int { return strings.Count(a, "/") - strings.Count(b, "/") })
	for _, a := range pins {
		if err := unix.Mount(a, a, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("pinning %s: %w", a, err)
		}
	}
	return nil
}

// privatePTYs gives the sandbox a devpts instance of its own, so that a tool
// can open a terminal (script, a REPL) without reaching the host's
// terminals. Without it the sandbox simply has no terminals.
func privatePTYs() {
	if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return
	}
	_ = unix.Mount("/dev/pts/ptmx", "/dev/ptmx", "", unix.MS_BIND, "")
}

// coveredTrees are hidden in every sandbox (but for what is granted in
// them): where other users' and programs' files and sockets live.
var coveredTrees = []string{"/home", "/root", "/tmp", "/var/tmp", "/run", "/var/run", "/mnt", "/media", "/srv", "/dev/shm", "/var/lib", "/var/spool", "/var/mail"}

// keepUnder lists the granted paths strictly inside dir (a plugin's own
// state folder inside data_dir), which stay reachable when dir is hidden.
func keepUnder(dir string, granted []string) []string {
	var out []string
	for _, g := range granted {
		if g != dir && Within(g, dir) {
			out = append(out, g)
		}
	}
	return out
}

// hideDir covers dir with an empty read-only tmpfs, re-binding the paths in
// keep (opened before the cover went on) at their places.
func hideDir(dir string, keep []string) error {
	fds := make([]int, 0, len(keep))
	defer func() {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
	}()
	var kept []string
	for _, k := range keep {
		fd, err := unix.Open(k, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		fds = append(fds, fd)
		kept = append(kept, k)
	}
	const flags, opts = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, "size=64k,mode=0711"
	if len(kept) == 0 {
		// Nothing to bind back: read-only from the start, one mount.
		return unix.Mount("tmpfs", dir, "tmpfs", flags|unix.MS_RDONLY, opts)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", flags, opts); err != nil {
		return err
	}
	for i, k := range kept {
		st, err := os.Stat("/proc/self/fd/" + strconv.Itoa(fds[i]))
		if err != nil {
			return err
		}
		if st.IsDir() {
			err = os.MkdirAll(k, 0o700)
		} else {
			if err = os.MkdirAll(filepath.Dir(k), 0o711); err == nil { //nolint:gosec // G301: a mount point in the sandbox's own tree, traversable by the plugin
				err = os.WriteFile(k, nil, 0o600)
			}
		}
		if err != nil {
			return err
		}
		if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(fds[i]), k, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return err
		}
	}
	return unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY|flags, opts)
}

// bindReadOnly binds src over dst and makes that mount read-only, keeping
// the flags of the mount it came from (a user namespace may not clear
// them).
func bindReadOnly(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dst, &st); err != nil {
		return err
	}
	flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY)
	for _, f := range []struct{ st, ms uintptr }{
		{unix.ST_NOSUID, unix.MS_NOSUID},
		{unix.ST_NODEV, unix.MS_NODEV},
		{unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME},
		{unix.ST_NODIRATIME, unix.MS_NODIRATIME},
		{unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if uintptr(st.Flags)&f.st != 0 { //nolint:gosec // G115: a bit mask
			flags |= f.ms
		}
	}
	return unix.Mount("", dst, "", flags, "")
}

func setRlimits(sp Spec) error {
	set := func(res int, v uint64) error {
		if v == 0 {
			return nil
		}
		if err := unix.Setrlimit(res, &unix.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("setting resource limit %d to %d: %w", res, v, err)
		}
		return nil
	}
	return errors.Join(
		set(unix.RLIMIT_FSIZE, uint64(max(sp.FileSize, 0))),
		set(unix.RLIMIT_NOFILE, sp.OpenFiles),
		set(unix.RLIMIT_CPU, sp.CPUSeconds),
	)
}

// dropCapabilities empties the bounding, ambient, permitted, effective and
// inheritable sets of this thread (the plugin is forked from it) and locks
// securebits so that no exec, not even of a setuid file or as uid 0, gives
// a capability back. A root plugin is then an ordinary process
// that owns root's files: it cannot ptrace, load modules, mount, or raise
// its limits.
func dropCapabilities() error {
	last := 40
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			last = n
		}
	}
	const secure = 0x1 | 0x2 | 0x4 | 0x8 | 0x20 | 0x40 | 0x80 // NOROOT, NO_SETUID_FIXUP, KEEP_CAPS locked off, NO_CAP_AMBIENT_RAISE, each locked
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, secure, 0, 0, 0); err != nil && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("securebits: %w", err)
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EPERM) {
			return fmt.Errorf("dropping capability %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	// The helper needs none of its own any more either. The inheritable
	// set above all: the host filled it to keep the helper's capabilities
	// through its exec, and an exec from a thread whose inheritable set is
	// full would give the plugin whatever inheritable file capabilities its
	// binary carries.
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var none [2]unix.CapUserData // version 3: two words per set
	if err := unix.Capset(&hdr, &none[0]); err != nil {
		return fmt.Errorf("dropping the helper's own capabilities: %w", err)
	}
	return nil
}

// restrict applies no_new_privs and the Landlock domain to this thread,
// which the plugin is forked from.
func restrict(sp Spec) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	// EINVAL: a kernel built without seccomp filters, where the keyrings
	// stay reachable (rare: every distribution kernel has them).
	if err := denyKeyrings(); err != nil && !errors.Is(err, unix.EINVAL) {
		return err
	}
	if !sp.Landlock {
		return nil
	}
	cfg := landlock.V7
	if sp.Network || sp.Namespaces {
		// With a network namespace of its own (no network) TCP reaches
		// only the sandbox's loopback; Landlock's TCP rules are the guard
		// where there is no such namespace.
		cfg.HandledAccessNet = 0
	}
	cfg = cfg.BestEffort()
	readDirs, readFiles := split(append(append([]string{}, sp.Read...), sp.Binary))
	writeDirs, writeFiles := split(sp.Write)
	rules := []landlock.Rule{
		landlock.RODirs(readDirs...).IgnoreIfMissing(),
		landlock.ROFiles(readFiles...).IgnoreIfMissing(),
		landlock.RWDirs(writeDirs...).WithRefer().IgnoreIfMissing(),
		landlock.RWFiles(writeFiles...).IgnoreIfMissing(),
	}
	if sp.ExecOnly {
		rules = execOnlyRules(readDirs, readFiles, writeDirs, writeFiles, append(append([]string{}, sp.Exec...), sp.Binary))
	}
	rules = append(rules,
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx").WithIoctlDev().IgnoreIfMissing(),
		landlock.RWDirs("/dev/pts").WithIoctlDev().IgnoreIfMissing(),
	)
	if sp.Namespaces {
		// Our own /proc: only this namespace's processes.
		rules = append(rules, landlock.RODirs("/proc").IgnoreIfMissing())
	}
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	if fd < 0 {
		return nil // best effort: no Landlock here after all
	}
	defer func() { _ = unix.Close(fd) }()
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	return nil
}

// Landlock's rights without the right to execute (RODirs and the others
// include it).
const (
	readRights  = landlock.AccessFSSet(ll.AccessFSReadFile | ll.AccessFSReadDir)
	writeRights = landlock.AccessFSSet(ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile |
		ll.AccessFSMakeChar | ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo | ll.AccessFSMakeBlock | ll.AccessFSMakeSym)
	execRight = landlock.AccessFSSet(ll.AccessFSExecute)
)

// execOnlyRules are the read and write rules without the right to
// execute, which only exec has (Spec.ExecOnly). The kernel asks for it at
// every execve, of a program and of its ELF interpreter alike.
func execOnlyRules(readDirs, readFiles, writeDirs, writeFiles, exec []string) []landlock.Rule {
	execDirs, execFiles := split(exec)
	fileRights := landlock.AccessFSSet(ll.AccessFSReadFile)
	return []landlock.Rule{
		landlock.PathAccess(readRights, readDirs...).IgnoreIfMissing(),
		landlock.PathAccess(fileRights, readFiles...).IgnoreIfMissing(),
		landlock.PathAccess(readRights|writeRights, writeDirs...).WithRefer().IgnoreIfMissing(),
		landlock.PathAccess(fileRights|landlock.AccessFSSet(ll.AccessFSWriteFile|ll.AccessFSTruncate), writeFiles...).IgnoreIfMissing(),
		landlock.PathAccess(readRights|execRight, execDirs...).IgnoreIfMissing(),
		landlock.PathAccess(fileRights|execRight, execFiles...).IgnoreIfMissing(),
	}
}

// split sorts existing paths into folders and files (a Landlock rule for a
// file may carry only file rights).
func split(paths []string) (dirs, files []string) {
	for _, p := range paths {
		st, err := os.Stat(p)
		switch {
		case err != nil:
		case st.IsDir():
			dirs = append(dirs, p)
		default:
			files = append(files, p)
		}
	}
	return dirs, files
}

// run starts the plugin and stays until it exits: ignoring the stop signals
// the host sends and reaping every orphan that lands here.
func run(sp Spec) int {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(sp.Unset, name)
	})
	for k, v := range sp.Env {
		env = append(env, k+"="+v)
	}
	env = LastWins(env)
	handOn := sp.ExtraFDs
	if sp.PinnedFD && sp.ExtraFDs == 1 {
		// Close-on-exec: the exec still resolves /proc/self/fd/3 (its
		// path is looked up before descriptors close), and the plugin
		// starts without it.
		handOn = 0
	}
	// Nothing else the host had open passes into the sandbox either.
	CloseOnExecFrom(3 + handOn)
	// stdin too: an external stdio server speaks MCP on it (a plugin's is
	// /dev/null). The descriptors keep their numbers.
	files := []uintptr{0, 1, 2}
	for i := 0; i < handOn; i++ {
		files = append(files, uintptr(3+i)) //nolint:gosec // G115: a descriptor
	}
	// syscall.ForkExec rather than os/exec: the path is absolute, and
	// os/exec's start (its look-ups, pipes and goroutines) cost a fifth of
	// this helper's CPU.
	child, err := syscall.ForkExec(sp.Path, sp.Args, &syscall.ProcAttr{
		Env: env, Files: files,
		Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "switchboard sandbox: starting %s: %v\n", sp.Args[0], err)
		return 127
	}
	for i := 0; i < sp.ExtraFDs; i++ {
		_ = syscall.Close(3 + i)
	}
	// The host stops a server by signalling its process group, which the
	// plugin shares with this process: the plugin has the signal itself.
	// This process outlives it (as the namespace's init its end would end
	// the plugin at once), so it ignores the stop signals, and only now:
	// an ignored signal stays ignored through an exec. (Ignoring them
	// costs nothing; forwarding them, through os/signal's goroutine and the
	// threads it takes, cost a tenth of this helper's CPU.)
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return 1
		}
		if pid != child {
			continue // an orphan reaped
		}
		if sp.Namespaces {
			// The plugin is gone: so is everything it started, now, not
			// when this process has exited too (as the namespace's init,
			// kill(-1) reaches every other process in it).
			_ = syscall.Kill(-1, syscall.SIGKILL)
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
}

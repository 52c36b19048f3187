// Package sandbox confines plugin processes with the kernel's own
// mechanisms, so that what a plugin (and everything it starts) can do is
// decided by the kernel, not by the host's pattern matching.
//
// On Linux a confined plugin is started through a helper: the host runs its
// own binary as `switchboard sandbox-exec` in new user, mount, PID, IPC and
// UTS namespaces (and a new network namespace when the plugin has no
// network). The helper is the namespace's init: it mounts a fresh /proc,
// hides the host's control plane (config files, .mcp.json, the lock file,
// data_dir) behind empty read-only mounts, binds plugin binaries read-only,
// applies resource limits, drops every capability, sets no_new_privs and a
// Landlock domain (file system, TCP, abstract sockets and signals), then
// starts the plugin and reaps zombies until the plugin exits. When the
// helper exits, the kernel kills every process left in the namespace, so
// nothing a plugin started (setsid, double forks, nohup) outlives it.
//
// Memory and process limits go through a per-plugin cgroup (v1 memory and
// pids hierarchies, or v2) that the host creates before the plugin starts
// and removes after it exits, reading back why it stopped (an OOM kill).
//
// Where a mechanism is missing (an older kernel, unprivileged user
// namespaces disabled, another OS), Report says exactly what is and is not
// enforced; ModeRequired refuses to start such a plugin, ModeBestEffort
// starts it with what there is, ModeOff starts it unconfined.
package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/host/internal/sandboxinit"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// Mode says what happens when a plugin cannot be confined.
type Mode string

// Modes.
const (
	// ModeRequired refuses to start a plugin that cannot be confined with
	// every mechanism its policy needs.
	ModeRequired Mode = "required"
	// ModeBestEffort starts the plugin with whatever mechanisms there
	// are, and says what is missing.
	ModeBestEffort Mode = "best-effort"
	// ModeOff starts the plugin unconfined.
	ModeOff Mode = "off"
)

// ParseMode parses a config value.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeRequired, ModeBestEffort, ModeOff:
		return m, nil
	}
	return "", fmt.Errorf("sandbox mode %q is not one of required, best-effort, off", s)
}

// Policy is what one plugin may do. Paths are absolute.
type Policy struct {
	Mode Mode
	// Read lists files and folders the plugin may read and execute.
	Read []string
	// Write lists files and folders the plugin may read, write, create,
	// rename and delete in.
	Write []string
	// Network lets the plugin use the host's network. Without it the
	// plugin has a network namespace of its own (no interfaces but a
	// loopback that is down) and no TCP at all.
	Network bool
	// Make lists folders of Write that are made (0700) before each start
	// when missing: a folder the server may write but not create (a package
	// runner's cache in a home folder it may not write).
	Make []string
	// Files lists files of Write that are made before each start when
	// missing, with their contents, on the same terms as Make (the .git
	// placeholder, which must be there to be bound read-only).
	Files []File
	// State is the server's own folder (under data_dir), created 0700 if
	// missing and writable; it stays visible when data_dir is hidden.
	State string
	// Hide lists files and folders that must not be visible even when a
	// granted path contains them: the host's control plane. A file is
	// covered by an empty file, a folder by an empty read-only folder.
	Hide []string
	// ReadOnly lists files and folders bound read-only over themselves
	// even when a granted path would let the plugin write them (plugin
	// binaries and the host's own binary).
	ReadOnly []string
	// Memory is the plugin's memory limit in bytes (0: none).
	Memory int64
	// Processes bounds the number of processes and threads (0: none).
	Processes int64
	// DefaultProcesses is a server's process limit without a configured
	// one (Processes): applied where the host can make a cgroup, never a
	// reason to refuse a start where it cannot (bash's guard against a
	// fork bomb, which a host run as root has no other: the kernel does
	// not apply RLIMIT_NPROC to root).
	DefaultProcesses int64
	// DefaultMemory is a server's memory limit without a configured one
	// (Memory), on the same terms as DefaultProcesses.
	DefaultMemory int64
	// FileSize bounds the size of a file the plugin writes, in bytes
	// (RLIMIT_FSIZE; 0: none).
	FileSize int64
	// OpenFiles bounds open descriptors per process (RLIMIT_NOFILE; 0:
	// inherit).
	OpenFiles uint64
	// CPUSeconds bounds CPU time per process (RLIMIT_CPU; 0: none).
	CPUSeconds uint64
	// Env replaces variables in the plugin's environment inside the
	// sandbox (HOME, TMPDIR point at a private folder by default).
	Env map[string]string
	// ExecOnly lets the plugin execute Exec and its own binary alone
	// (where Landlock runs): whatever else it may read, a shell included,
	// does not run. The git built-in's sandbox, so that no setting of a
	// repository's config can make git run a program, however it got
	// there.
	ExecOnly bool
	// Exec lists the files and folders whose programs may be executed
	// with ExecOnly (each program's ELF interpreter among them).
	Exec []string
}

// File is a file a sandbox makes before a start (Policy.Files).
type File struct {
	Path    string
	Content string
}

// Sandbox confines one server's processes. It implements the launcher's
// Sandbox and is reused across restarts of the server.
type Sandbox struct {
	// Name is the server's name (for cgroup names and messages).
	Name string
	// Policy is what the server may do.
	Policy Policy
	// Helper is the switchboard binary that runs `sandbox-exec`.
	Helper string
	// TempRoot is where private temporary folders are made (default
	// launcher.TempDir(), the host's folder in the system's temporary
	// folder).
	TempRoot string
	// Preparer, when set, is called by each Wrap: Prepare before the
	// policy's Make folders and Files are made (the loader adds what the
	// person's git runs from as it is now), Made after (it holds the .git
	// placeholders it binds, and covers other hosts' files).
	Preparer Preparer
}

// Preparer adds to the policy of one start of a sandbox before the
// sandbox is built (Sandbox.Preparer): Prepare may add folders and files
// to make, Made is called once they are made. Both may be called from
// several goroutines at once (starts of the same server do not overlap,
// but a Preparer may be shared).
type Preparer interface {
	// Prepare may refuse the start (its error is the start's).
	Prepare(p *Policy) error
	Made(p *Policy)
}

// Errors.
var (
	// ErrUnavailable means a required mechanism is missing here.
	ErrUnavailable = errors.New("sandbox: cannot confine the plugin here")
)

// Report says what confines a server: one entry per mechanism.
type Report struct {
	Mode Mode `json:"mode"`
	// Landlock is the Landlock ABI version enforced (0: none).
	Landlock int `json:"landlock,omitempty"`
	// Namespaces says whether the server runs in namespaces of its own.
	Namespaces bool     `json:"namespaces,omitempty"`
	Enforced   []string `json:"enforced,omitempty"`
	Missing    []string `json:"missing,omitempty"`
}

// Confined reports whether anything confines the server.
func (r Report) Confined() bool { return r.Mode != ModeOff && len(r.Enforced) > 0 }

// String is a one-line summary for inspect, status and the initialize
// instructions.
func (r Report) String() string {
	switch {
	case r.Mode == ModeOff:
		return "not confined (sandbox off)"
	case len(r.Enforced) == 0:
		return "NOT CONFINED: " + strings.Join(r.Missing, "; ")
	case len(r.Missing) == 0:
		return "confined: " + strings.Join(r.Enforced, ", ")
	default:
		return "partly confined: " + strings.Join(r.Enforced, ", ") + "; missing: " + strings.Join(r.Missing, "; ")
	}
}

// Unmet lists the needs a plugin declared that this sandbox does not grant,
// each as the config line that would (launcher.NeedsChecker).
func (s *Sandbox) Unmet(n *toolcall.SandboxNeeds) []string {
	if s.Policy.Mode == ModeOff || s.Policy.Mode == "" {
		return nil
	}
	home, _ := os.UserHomeDir()
	granted := func(p string, list []string) bool {
		for _, g := range list {
			if within(p, g) {
				return true
			}
		}
		return false
	}
	var out []string
	if n.Network && !s.Policy.Network {
		out = append(out, "network = true")
	}
	for _, p := range cleanPaths(n.Write, home, filepath.EvalSymlinks) {
		if !granted(p, append([]string{s.Policy.State}, s.Policy.Write...)) {
			out = append(out, fmt.Sprintf("write = [%q]", p))
		}
	}
	for _, p := range cleanPaths(n.Read, home, filepath.EvalSymlinks) {
		if !granted(p, append(append([]string{s.Policy.State}, s.Policy.Write...), append(s.Policy.Read, systemReadPaths...)...)) {
			out = append(out, fmt.Sprintf("read = [%q]", p))
		}
	}
	return out
}

// String summarises what confines the server on this machine (Report).
func (s *Sandbox) String() string { return s.Report().String() }

// Clean returns a policy with absolute, cleaned, de-duplicated paths,
// "~/" expanded against home, and symlinks resolved where they exist (a
// Landlock rule and a mount both act on what a path resolves to).
func (p Policy) Clean(home string) Policy { return p.CleanWith(home, filepath.EvalSymlinks) }

// CleanWith is Clean with the links resolved by eval: filepath.EvalSymlinks,
// or a memo of it when many policies that share paths are made at once
// (a host with a hundred plugins resolves the same few folders for each).
func (p Policy) CleanWith(home string, eval func(string) (string, error)) Policy {
	p.Read = cleanPaths(p.Read, home, eval)
	p.Write = cleanPaths(p.Write, home, eval)
	p.Hide = cleanPaths(p.Hide, home, eval)
	p.ReadOnly = cleanPaths(p.ReadOnly, home, eval)
	p.Make = cleanPaths(p.Make, home, eval)
	p.Exec = cleanPaths(p.Exec, home, eval)
	if p.State != "" {
		p.State = filepath.Clean(p.State)
	}
	return p
}

func cleanPaths(paths []string, home string, eval func(string) (string, error)) []string {
	var out []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		if p == "~" || strings.HasPrefix(p, "~/") {
			p = filepath.Join(home, strings.TrimPrefix(p, "~"))
		}
		p = filepath.Clean(p)
		if !filepath.IsAbs(p) {
			continue
		}
		if r, err := eval(p); err == nil {
			p = r
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// within reports whether p is at or under dir.
func within(p, dir string) bool { return sandboxinit.Within(p, dir) }

// systemReadPaths are what any dynamically linked program, shell or git
// needs to read: binaries, libraries, and the few files of /etc that name
// users, hosts and certificates. Not /etc as a whole (shadow, ssh host keys),
// and of /etc/ssl and /etc/pki only the certificates and OpenSSL's
// configuration, not their private/ folders: a host running as root runs
// its sandboxed processes as root without capabilities, and root owns
// those keys (red team: the snakeoil TLS key was readable).
var systemReadPaths = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/resolv.conf",
	"/etc/host.conf", "/etc/gai.conf", "/etc/services", "/etc/protocols",
	"/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/ca-certificates", "/etc/ca-certificates.conf",
	"/etc/pki/tls/certs", "/etc/pki/tls/cert.pem", "/etc/pki/tls/openssl.cnf", "/etc/pki/ca-trust",
	"/etc/localtime", "/etc/timezone",
	"/etc/mime.types", "/etc/magic", "/etc/bash.bashrc", "/etc/profile", "/etc/inputrc",
	"/etc/gitconfig", "/etc/gitattributes", "/etc/os-release", "/etc/debian_version",
	"/usr/share/zoneinfo",
}

// nonEmpty drops empty strings.
func nonEmpty(paths []string) []string {
	out := paths[:0:0]
	for _, p := range paths {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// existing returns the paths that exist.
func existing(paths []string) []string {
	var out []string
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// FormatBytes renders a byte count as the config writes it ("256MiB").
func FormatBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for n >= 1024 && n%1024 == 0 && i < len(units)-1 {
		n /= 1024
		i++
	}
	return fmt.Sprintf("%d%s", n, units[i])
}

// ParseBytes parses "256MiB", "1GiB", "512KiB", "1048576" (and the SI forms
// "256MB", "1G", which are taken as powers of 1024 too, as memory limits
// usually mean).
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"TB", 1 << 40}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size such as \"256MiB\" or \"1GiB\"", s)
	}
	return n * mult, nil
}

func sleepBriefly() { time.Sleep(20 * time.Millisecond) }

// VerifyHelper, when set, says whether the file at path, open in f, may
// be run as the helper: the one this build pins (the loader sets it).
// Unset, any file is taken.
var VerifyHelper func(path string, f *os.File) bool

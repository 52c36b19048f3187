// Package sandboxinit is the sandbox's helper: the first process in a
// confined plugin's namespaces. The host (package sandbox) decides the
// policy and starts the helper with a Spec; the helper sets up mounts,
// limits, capabilities and Landlock on itself, starts the plugin, and stays
// as the namespace's init until the plugin exits. It imports nothing of the
// host, so its binary (switchboard-sandbox) starts in a few milliseconds.
package sandboxinit

import (
	"path/filepath"
	"strings"
)

// EnvSpec carries the helper's instructions (Spec as JSON); the helper
// removes it before it starts the plugin.
const EnvSpec = "SWITCHBOARD_SANDBOX"

// Spec is what the host tells the helper.
type Spec struct {
	Path       string   `json:"path"`
	Args       []string `json:"args"`
	Binary     string   `json:"binary,omitempty"`
	Namespaces bool     `json:"namespaces"`
	// UID and GID are the host's own user and group, which the helper maps
	// to themselves in its user namespace (with Namespaces).
	UID        int               `json:"uid,omitempty"`
	GID        int               `json:"gid,omitempty"`
	Landlock   bool              `json:"landlock"`
	Read       []string          `json:"read,omitempty"`
	Write      []string          `json:"write,omitempty"`
	Hide       []string          `json:"hide,omitempty"`
	ReadOnly   []string          `json:"read_only,omitempty"`
	Network    bool              `json:"network"`
	FileSize   int64             `json:"file_size,omitempty"`
	OpenFiles  uint64            `json:"open_files,omitempty"`
	CPUSeconds uint64            `json:"cpu_seconds,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	// Unset names variables of the helper's environment that the plugin
	// must not inherit (set by the host for the helper alone).
	Unset    []string `json:"unset,omitempty"`
	GateFD   int      `json:"gate_fd,omitempty"`
	ExtraFDs int      `json:"extra_fds,omitempty"`
	// PinnedFD says fd 3 is the plugin's binary (an ELF executable) and
	// Path is /proc/self/fd/3, its host having hashed that descriptor: the
	// helper executes it without handing the descriptor on. Inherited, it
	// would reach the real file past the sandbox's read-only mount (its
	// mode and times at once, its contents once it no longer runs) for
	// every process the plugin starts.
	PinnedFD bool `json:"pinned_fd,omitempty"`
	// ExecOnly restricts what may be executed (Landlock's execute right)
	// to Exec and the plugin's own Binary: nothing else the plugin may
	// read runs, a shell included.
	ExecOnly bool     `json:"exec_only,omitempty"`
	Exec     []string `json:"exec,omitempty"`
}

// Within reports whether p is at or under dir.
func Within(p, dir string) bool {
	if dir == "" || p == "" {
		return false
	}
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}

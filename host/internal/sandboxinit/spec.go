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

// EnvSpec carries the helper's instructions (Spec.Encode); the helper
// removes it before it starts the plugin.
const EnvSpec = "SWITCHBOARD_SANDBOX"

// Spec is what the host tells the helper.
type Spec struct {
	Path       string
	Args       []string
	Binary     string
	Namespaces bool
	Landlock   bool
	Read       []string
	Write      []string
	Hide       []string
	ReadOnly   []string
	Network    bool
	FileSize   int64
	OpenFiles  uint64
	CPUSeconds uint64
	Env        map[string]string
	// Unset names variables of the helper's environment that the plugin
	// must not inherit (set by the host for the helper alone).
	Unset    []string
	GateFD   int
	ExtraFDs int
	// PinnedFD says fd 3 is the plugin's binary (an ELF executable) and
	// Path is /proc/self/fd/3, its host having hashed that descriptor: the
	// helper executes it without handing the descriptor on. Inherited, it
	// would reach the real file past the sandbox's read-only mount (its
	// mode and times at once, its contents once it no longer runs) for
	// every process the plugin starts.
	PinnedFD bool
	// ExecOnly restricts what may be executed (Landlock's execute right)
	// to Exec and the plugin's own Binary: nothing else the plugin may
	// read runs, a shell included.
	ExecOnly bool
	Exec     []string
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

// LastWins returns env with one entry per name, the last one (in their
// order), as os/exec passes an environment: a program reads the first
// entry of a name, so passed as it is, a variable set in a server's env
// block would win over what the sandbox appends after it (its
// instructions, its PATH, HOME and TMPDIR among them).
func LastWins(env []string) []string {
	last := make(map[string]int, len(env))
	for i, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		last[name] = i
	}
	out := make([]string, 0, len(last))
	for i, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if last[name] == i {
			out = append(out, kv)
		}
	}
	return out
}

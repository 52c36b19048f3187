// Package builtins is the one list of the plugins that ship inside the
// switchboard binary: filesystem, bash, git, web and switchboard. Everything in the host
// that needs to know them asks here: config (the settings type each
// `builtin "NAME" {}` block decodes into), the loader (what each one's
// sandbox grants by default), and the CLI (which plugin `switchboard
// plugin-serve NAME` serves). The Makefile's PLUGINS list, which builds
// the standalone switchboard-plugin-NAME binaries, is checked against this
// one by a test.
package builtins

import (
	"encoding/json"
	"os"
	"slices"

	"github.com/switchboard-mcp/switchboard/host/internal/pathguard"
	"github.com/switchboard-mcp/switchboard/plugins/bash"
	"github.com/switchboard-mcp/switchboard/plugins/filesystem"
	"github.com/switchboard-mcp/switchboard/plugins/git"
	"github.com/switchboard-mcp/switchboard/plugins/switchboard"
	"github.com/switchboard-mcp/switchboard/plugins/web"
	"github.com/switchboard-mcp/switchboard/sdk"
)

// ServeCommand is the hidden CLI command through which the host re-executes
// itself to serve one built-in: `switchboard plugin-serve NAME`.
const ServeCommand = "plugin-serve"

// BinaryPrefix starts the name of every plugin binary; a built-in also
// builds standalone as BinaryPrefix+Name (./plugins/NAME/cmd/…).
const BinaryPrefix = "switchboard-plugin-"

// Builtin is one built-in plugin.
type Builtin struct {
	// Name is its server name and the label of its config block.
	Name string
	// New returns the plugin, for `switchboard plugin-serve NAME`.
	New func() *sdk.Server
	// NewSettings returns a zero value of the plugin's settings type, which
	// its config block decodes into (hcl tags) and the plugin receives
	// (json tags). Unset attributes keep the plugin's own defaults.
	NewSettings func() any
	// Grants says what its sandbox allows by default, before the
	// operator's sandbox block widens or narrows it (README, Security).
	Grants func(projectDir string, settings []byte) Grants
	// Default means it runs without a block naming it (only
	// `builtin "NAME" { enabled = false }` turns it off); the others run
	// only when a block names them.
	Default bool
	// AskFirst lists its tools that a person approves before they run
	// when no allow rule matches, even under the default policy (allow).
	AskFirst []string
}

// Grants is what a built-in's sandbox allows without a sandbox block.
type Grants struct {
	// Write lists the folders it may read and write.
	Write []string
	// Network lets it reach the network.
	Network bool
	// Processes is its process limit (processes and threads) where the
	// host can make a cgroup, unless its sandbox block sets one.
	Processes int64
	// Memory is its memory limit in bytes, on the same terms.
	Memory int64
	// ExecOnly lets it execute Exec (and its own binary) alone.
	ExecOnly bool
	Exec     []string
	// Env is set in its environment.
	Env map[string]string
}

// BashProcesses is bash's default limit on the processes and threads of
// its sandbox (README, Security).
const BashProcesses = 4096

// GitMemory is git's default memory limit (README, Security): git reads
// files the agent may write (a .git file, configs, objects), and a
// runaway git then stops at this, not at the machine's OOM killer (red
// team round 10 grew it by 150 MB a second). Large repositories' status,
// log and diff fit well below it.
const GitMemory = 2 << 30

// Binary is the name of the built-in's standalone plugin binary.
func (b Builtin) Binary() string { return BinaryPrefix + b.Name }

// all is the list, in the order `switchboard` documents and starts them.
var all = []Builtin{
	{
		Name:        filesystem.Name,
		New:         filesystem.New,
		NewSettings: func() any { return &filesystem.Settings{} },
		// The project folder and the extra roots of its block.
		Grants: func(projectDir string, settings []byte) Grants {
			var s filesystem.Settings
			_ = json.Unmarshal(settings, &s)
			return Grants{Write: append([]string{projectDir}, s.Roots...)}
		},
	},
	{
		Name:        bash.Name,
		New:         bash.New,
		NewSettings: func() any { return &bash.Settings{} },
		// A command may start any number of processes: a fork bomb stops
		// at this limit instead of at the machine's (a build with many
		// parallel compilers and their threads fits well below it).
		Grants: func(projectDir string, _ []byte) Grants {
			return Grants{Write: []string{projectDir}, Processes: BashProcesses}
		},
	},
	{
		Name:        git.Name,
		New:         git.New,
		NewSettings: func() any { return &git.Settings{} },
		// git and its own programs are all it runs: the plugin turns off
		// every program a repository's config may name, and the kernel
		// holds where that falls short (a config changed between the
		// plugin's read of it and git's, red team). Unless the block lets
		// hooks or filters run: those are programs of the repository's.
		Grants: func(projectDir string, settings []byte) Grants {
			var s git.Settings
			_ = json.Unmarshal(settings, &s)
			// git is found on PATH, but never in the project, which the
			// agent may write: a `git` in an activated .venv/bin ran for
			// every call (red team round 5). Its PATH leaves such folders
			// out, so that the plugin finds the git the host granted.
			untrusted := []string{projectDir}
			env := map[string]string{"PATH": pathguard.PathOutside(os.Getenv("PATH"), untrusted)}
			if s.AllowHooks || s.AllowFilters {
				return Grants{Write: []string{projectDir}, Env: env, Memory: GitMemory}
			}
			return Grants{Write: []string{projectDir}, ExecOnly: true, Exec: gitPrograms(untrusted), Env: env, Memory: GitMemory}
		},
	},
	{
		Name:        web.Name,
		New:         web.New,
		NewSettings: func() any { return &web.Settings{} },
		// Fetching pages is its job; it writes nothing of the project.
		Grants: func(string, []byte) Grants { return Grants{Network: true} },
	},
	{
		Name:        switchboard.Name,
		New:         switchboard.New,
		NewSettings: func() any { return &switchboard.Settings{} },
		// It reaches the host only through its back-channel (package
		// hostapi): no file system writes, no network.
		Grants:   func(string, []byte) Grants { return Grants{} },
		Default:  true,
		AskFirst: []string{switchboard.ToolRestart},
	},
}

// Reserved is the server name of the built-in introspection server: no
// plugin block, external server or discovered plugin may take it, even
// while the built-in is turned off.
const Reserved = switchboard.Name

// All returns every built-in, in documented order. The slice is a copy.
func All() []Builtin { return slices.Clone(all) }

// Lookup returns the built-in called name.
func Lookup(name string) (Builtin, bool) {
	i := slices.IndexFunc(all, func(b Builtin) bool { return b.Name == name })
	if i < 0 {
		return Builtin{}, false
	}
	return all[i], true
}

// AskFirst lists the built-ins' tools (canonical "<server>.<tool>") that
// ask before they run unless an allow rule matches (registry.Policy).
func AskFirst() []string {
	var out []string
	for _, b := range all {
		for _, t := range b.AskFirst {
			out = append(out, b.Name+"."+t)
		}
	}
	return out
}

// Names lists the built-ins' names, in documented order.
func Names() []string {
	names := make([]string, len(all))
	for i, b := range all {
		names[i] = b.Name
	}
	return names
}

// ServeBinary is the binary that serves every built-in without the host's
// code (`switchboard-builtins NAME`, host/cmd/switchboard-builtins).
const ServeBinary = "switchboard-builtins"

// ServeBinaryPin is the SHA-256 (hex) of the ServeBinary built with this
// host, set at link time by make build (-X …/builtins.ServeBinaryPin=…)
// after it has built that binary. The host starts built-ins through the
// ServeBinary beside the switchboard binary only when that file hashes to
// this pin; otherwise (a binary from another build, one put there by
// anyone else, or a host built by plain `go build`, which pins none) it
// re-executes itself (`switchboard plugin-serve NAME`).
var ServeBinaryPin string

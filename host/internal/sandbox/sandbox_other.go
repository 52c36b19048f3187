//go:build !linux

package sandbox

import (
	"fmt"
	"os/exec"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
)

// HelperCommand is the hidden subcommand of the switchboard binary that
// runs a plugin inside its sandbox (Linux only).
const HelperCommand = "sandbox-exec"

// Prewarm does nothing here.
func Prewarm(string) {}

// StopSpawners does nothing here: there is no spawner.
func StopSpawners() {}

// Report says what Wrap would enforce: nothing, on this system.
func (s *Sandbox) Report() Report {
	r := Report{Mode: s.Policy.Mode}
	if r.Mode == "" || r.Mode == ModeOff {
		r.Mode = ModeOff
		return r
	}
	r.Missing = []string{"kernel sandbox (implemented on Linux only)"}
	return r
}

// Wrap implements launcher.Sandbox: a required sandbox cannot start here.
func (s *Sandbox) Wrap(*exec.Cmd, string) (launcher.Confinement, error) {
	if s.Policy.Mode == ModeRequired {
		return nil, fmt.Errorf("%w: the kernel sandbox is implemented on Linux only (set sandbox { mode = \"best-effort\" } to run plugins unconfined here)", ErrUnavailable)
	}
	return nil, nil
}

var _ launcher.Sandbox = (*Sandbox)(nil)

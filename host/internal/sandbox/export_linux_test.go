//go:build linux

package sandbox

import (
	"io"
	"os"
	"os/exec"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
)

// LastWinsForTest is lastWins.
var LastWinsForTest = lastWins

// RunForTest runs cmd, which Wrap has made into a helper command, as the
// launcher does (through the Confinement's StartProcess when it has one,
// then Started), and returns its combined output and how it ended, as
// cmd.CombinedOutput does. conf may be nil (an unconfined start).
func RunForTest(conf launcher.Confinement, cmd *exec.Cmd) ([]byte, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Close() }()
	cmd.Stdout, cmd.Stderr = w, w
	var pid int
	var wait func() error
	if ps, ok := conf.(launcher.ProcessStarter); ok {
		p, err := ps.StartProcess(cmd)
		_ = w.Close()
		if err != nil {
			return nil, err
		}
		pid, wait = p.Pid(), p.Wait
	} else {
		err := cmd.Start()
		_ = w.Close()
		if err != nil {
			return nil, err
		}
		pid, wait = cmd.Process.Pid, cmd.Wait
	}
	if conf != nil {
		if err := conf.Started(pid); err != nil {
			_ = wait()
			return nil, err
		}
	}
	out, _ := io.ReadAll(r)
	return out, wait()
}

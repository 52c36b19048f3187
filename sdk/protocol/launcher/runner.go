package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-plugin/runner"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/sysproc"
)

// groupRunner starts a plugin in its own process group with a parent-death
// signal and no stdin, and kills the whole group: SIGTERM, a bounded wait,
// then SIGKILL. go-plugin's own runner only kills the one process.
type groupRunner struct {
	name   string
	path   string // the plugin binary, for diagnostics
	cmd    *exec.Cmd
	stdout io.ReadCloser
	stderr io.ReadCloser
	grace  time.Duration
	conf   Confinement // the sandbox of this start, if any
	// handshake is stdout as go-plugin reads it (handshake.go).
	handshake *handshakeGuard

	stopReason string // set before exited is closed

	pid      int
	proc     Process // set when the Confinement started the process
	exited   chan struct{}
	waitOnce sync.Once
	waitErr  error
}

func newGroupRunner(name, path string, cmd *exec.Cmd, grace time.Duration, conf Confinement, socketDir string) (*groupRunner, error) {
	// go-plugin hands the host's stdin to the plugin; under `serve` that is
	// the MCP client's pipe, which a plugin must never read.
	cmd.Stdin = nil
	// Its own process group, and (on Linux) SIGTERM if the host dies, even
	// by SIGKILL; the SDK then stops its own process group.
	// A Sandbox sets its own attributes, starting from these.
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = sysproc.Attr(syscall.SIGTERM)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	return &groupRunner{name: name, path: path, cmd: cmd, stdout: stdout, stderr: stderr, grace: grace, conf: conf, exited: make(chan struct{}), handshake: &handshakeGuard{rc: stdout, socketDir: socketDir, unixOnly: offline(conf)}}, nil
}

func (r *groupRunner) Start(context.Context) error {
	var err error
	if ps, ok := r.conf.(ProcessStarter); ok {
		r.proc, err = ps.StartProcess(r.cmd)
		// As exec.Cmd does once its child runs: the child's ends of the
		// pipes are the child's alone.
		for _, w := range []any{r.cmd.Stdout, r.cmd.Stderr} {
			if f, ok := w.(*os.File); ok {
				_ = f.Close()
			}
		}
		if err != nil {
			// As exec.Cmd does when a start fails: no pipe is left open.
			r.proc = nil
			_ = r.stdout.Close()
			_ = r.stderr.Close()
		}
	} else {
		err = r.cmd.Start()
	}
	// The child has its own copies of any extra descriptors (a pinned
	// binary) now.
	closeExtra(r.cmd)
	if err != nil {
		if r.conf != nil {
			r.conf.Stopped()
		}
		return err
	}
	if r.proc != nil {
		r.pid = r.proc.Pid()
	} else {
		r.pid = r.cmd.Process.Pid
	}
	if r.conf != nil {
		if err := r.conf.Started(r.pid); err != nil {
			_ = signalGroup(r.pid, syscall.SIGKILL)
			go func() { _ = r.Wait(context.Background()) }() //nolint:gosec // G118: reaps the killed process after the start's context has ended
			return err
		}
	}
	return nil
}

// Wait waits for the plugin process; it may be called more than once.
func (r *groupRunner) Wait(context.Context) error {
	r.waitOnce.Do(func() {
		if r.proc != nil {
			r.waitErr = r.proc.Wait()
			// As exec.Cmd.Wait does: the pipes' read ends close once the
			// process has exited.
			_ = r.stdout.Close()
			_ = r.stderr.Close()
		} else {
			r.waitErr = r.cmd.Wait()
		}
		r.handshake.releaseSocket()
		if r.conf != nil {
			r.stopReason = r.conf.Stopped()
		}
		close(r.exited)
	})
	<-r.exited
	return r.waitErr
}

// Kill stops the process group: SIGTERM, up to grace for the plugin to
// exit, then SIGKILL to the group.
func (r *groupRunner) Kill(context.Context) error {
	if r.pid == 0 {
		return nil
	}
	_ = signalGroup(r.pid, syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(r.grace):
	}
	if err := signalGroup(r.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// sweep kills whatever is left in the plugin's process group (children that
// outlived it), with the same SIGTERM-then-SIGKILL steps.
func (r *groupRunner) sweep() {
	if r.pid == 0 {
		return
	}
	if signalGroup(r.pid, 0) != nil {
		return // the group is empty
	}
	_ = signalGroup(r.pid, syscall.SIGTERM)
	deadline := time.Now().Add(r.grace)
	for time.Now().Before(deadline) {
		if signalGroup(r.pid, 0) != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = signalGroup(r.pid, syscall.SIGKILL)
}

func (r *groupRunner) Stdout() io.ReadCloser { return r.handshake }
func (r *groupRunner) Stderr() io.ReadCloser { return r.stderr }
func (r *groupRunner) Name() string          { return r.name }
func (r *groupRunner) ID() string            { return strconv.Itoa(r.pid) }

func (r *groupRunner) Diagnose(context.Context) string {
	path := r.path
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Sprintf("the plugin binary %s cannot be read: %v", path, err)
	case st.Mode()&0o111 == 0:
		return fmt.Sprintf("the plugin binary %s is not executable (chmod +x it)", path)
	default:
		return fmt.Sprintf("%s did not complete the plugin handshake: is it a Switchboard plugin built for this machine? Check that it is the file you installed (sha256sum, or pin it with sha256 in its block) before you run it by hand to see its output.", path)
	}
}

func (r *groupRunner) PluginToHost(n, a string) (string, string, error) { return n, a, nil }
func (r *groupRunner) HostToPlugin(n, a string) (string, string, error) { return n, a, nil }

var _ runner.Runner = (*groupRunner)(nil)

// offline reports whether conf says its plugin has no network.
func offline(conf Confinement) bool {
	o, ok := conf.(Offline)
	return ok && o.Offline()
}

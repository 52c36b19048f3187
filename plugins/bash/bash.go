// Package bash is the built-in bash plugin: runs shell commands inside the
// project directory with a clean environment, a timeout that kills the
// whole process group, and capped output.
package bash

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/plugins/internal/confine"
	"github.com/switchboard-mcp/switchboard/sdk"
)

// Name is the built-in's server name.
const Name = "bash"

// Version is the plugin's version.
const Version = "0.1.0"

// Defaults for Settings.
const (
	DefaultTimeout   = 2 * time.Minute
	DefaultMaxTime   = 10 * time.Minute
	DefaultOutputCap = 30000
	killGrace        = 2 * time.Second
)

// Settings is the `builtin "bash" {}` block.
type Settings struct {
	// Timeout is the default per-command timeout ("2m").
	Timeout string `hcl:"timeout,optional" json:"timeout,omitempty"`
	// MaxTimeout caps what a caller may ask for with timeout_ms ("10m").
	MaxTimeout string `hcl:"max_timeout,optional" json:"max_timeout,omitempty"`
	// OutputCap is the number of characters of output returned.
	OutputCap int `hcl:"output_cap,optional" json:"output_cap,omitempty"`
	// Env adds variables to the commands' clean environment.
	Env map[string]string `hcl:"env,optional" json:"env,omitempty"`
}

type plugin struct {
	roots     *confine.Roots
	timeout   time.Duration
	maxTime   time.Duration
	outputCap int
	env       []string
}

// New returns the bash plugin.
func New() *sdk.Server {
	s := sdk.NewServer(Name, Version, sdk.WithInstructions(
		"Runs bash commands in the project directory. Commands get no stdin and a clean environment."))
	p := &plugin{}
	s.OnConfigure(func(_ context.Context, cfg sdk.Config) error { return p.configure(cfg) })
	sdk.AddTool(s, sdk.Tool{
		Name:        "run",
		Title:       "Run a bash command",
		Description: "Run a command with bash -c in the project directory (or cwd inside it). Returns the exit code and stdout+stderr in arrival order. On timeout the whole process group is killed.",
		Destructive: sdk.Bool(true),
		OpenWorld:   sdk.Bool(true),
	}, p.run)
	return s
}

func (p *plugin) configure(cfg sdk.Config) error {
	var st Settings
	if err := cfg.Decode(&st); err != nil {
		return err
	}
	var err error
	if p.roots, err = confine.New(cfg.ProjectDir); err != nil {
		return fmt.Errorf("bash: %w", err)
	}
	p.timeout, p.maxTime, p.outputCap = DefaultTimeout, DefaultMaxTime, DefaultOutputCap
	if st.Timeout != "" {
		if p.timeout, err = time.ParseDuration(st.Timeout); err != nil || p.timeout <= 0 {
			return fmt.Errorf("bash: timeout %q is not a positive duration", st.Timeout)
		}
	}
	if st.MaxTimeout != "" {
		if p.maxTime, err = time.ParseDuration(st.MaxTimeout); err != nil || p.maxTime <= 0 {
			return fmt.Errorf("bash: max_timeout %q is not a positive duration", st.MaxTimeout)
		}
	}
	if p.timeout > p.maxTime {
		p.maxTime = p.timeout
	}
	if st.OutputCap > 0 {
		p.outputCap = st.OutputCap
	}
	p.env = CleanEnv(st.Env)
	return nil
}

// CleanEnv is the environment commands run with: PATH, HOME, LANG,
// TERM=dumb and the extras, and nothing else of the host's.
func CleanEnv(extra map[string]string) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	env := []string{"PATH=" + path, "TERM=dumb"}
	for _, k := range []string{"HOME", "LANG", "LC_ALL", "USER", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

type runArgs struct {
	Command     string `json:"command" jsonschema:"description=The command line, run with bash -c"`
	TimeoutMS   int    `json:"timeout_ms,omitempty" jsonschema:"description=Timeout in milliseconds (default 120000),minimum=1"`
	Cwd         string `json:"cwd,omitempty" jsonschema:"description=Working directory inside the project directory"`
	Description string `json:"description,omitempty" jsonschema:"description=What the command does, in a few words"`
}

func (p *plugin) run(ctx context.Context, req *sdk.Request, in runArgs) (*sdk.Result, error) {
	if strings.TrimSpace(in.Command) == "" {
		return sdk.Errorf("command is empty"), nil
	}
	cwd, err := p.roots.Resolve(in.Cwd)
	if err != nil {
		return sdk.Errorf("cwd refused: %v", err), nil
	}
	timeout := p.timeout
	if in.TimeoutMS > 0 {
		timeout = time.Duration(in.TimeoutMS) * time.Millisecond
	}
	if timeout > p.maxTime {
		return sdk.Errorf("timeout_ms %d exceeds the maximum of %d", in.TimeoutMS, p.maxTime.Milliseconds()), nil
	}

	cmd := exec.Command("bash", "-c", in.Command)
	cmd.Dir = cwd
	cmd.Env = p.env
	cmd.Stdin = nil // /dev/null
	out := &lineWriter{onLine: func(line string) { req.Progress(0, 0, line) }}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return sdk.Errorf("cannot start bash: %v", err), nil
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var killed string
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err = <-done:
	case <-timer.C:
		killed = fmt.Sprintf("timed out after %s", timeout)
		err = killGroup(cmd.Process.Pid, done)
	case <-ctx.Done():
		killed = "cancelled"
		err = killGroup(cmd.Process.Pid, done)
	}
	// Children that outlived bash (a background `sleep &`) die with it.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)

	code := 0
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	case err != nil:
		return sdk.Errorf("command failed: %v", err), nil
	}
	text := capMiddle(out.String(), p.outputCap)
	var b strings.Builder
	if killed != "" {
		fmt.Fprintf(&b, "Killed: %s (process group sent SIGTERM, then SIGKILL).\n", killed)
	} else {
		fmt.Fprintf(&b, "Exit code: %d (%.1fs)\n", code, time.Since(start).Seconds())
	}
	b.WriteString(text)
	if killed == "cancelled" && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	r := sdk.Text(b.String())
	if killed != "" || code != 0 {
		r = sdk.Errorf("%s", b.String())
	}
	return r, nil
}

// killGroup sends SIGTERM to the process group, then SIGKILL after a grace
// period, and returns the command's exit error.
func killGroup(pid int, done <-chan error) error {
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case err := <-done:
		return err
	case <-time.After(killGrace):
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	return <-done
}

// capMiddle keeps the head and tail of s within max characters and says
// how much was cut.
func capMiddle(s string, maxChars int) string {
	r := []rune(s)
	if len(r) <= maxChars {
		return s
	}
	half := maxChars / 2
	cut := len(r) - 2*half
	return string(r[:half]) + fmt.Sprintf("\n\n[... %d characters cut from the middle ...]\n\n", cut) + string(r[len(r)-half:])
}

// lineWriter collects output and reports each complete line.
type lineWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	line   []byte
	onLine func(string)
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(b)
	w.line = append(w.line, b...)
	for {
		i := bytes.IndexByte(w.line, '\n')
		if i < 0 {
			break
		}
		w.onLine(string(w.line[:i]))
		w.line = w.line[i+1:]
	}
	return len(b), nil
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

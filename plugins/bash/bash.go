// Package bash is the built-in bash plugin: runs shell commands inside the
// project directory with a clean environment, a timeout that kills the
// whole process group, and capped output.
//
// The run and start tools report one permission pattern per command a line
// would run (see Commands): an allow list auto-allows a line only when it
// names every command the line can run; whatever cannot be known before
// the line runs is an opaque pattern, which needs approval. A redirection
// that reads or writes at or under one of the host's protected paths is
// refused outright. Background jobs belong to the caller that started them
// (sdk.Request.Owner).
package bash

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/plugins/internal/confine"
	"github.com/switchboard-mcp/switchboard/sdk"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/sysproc"
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
	// DefaultMaxSaved caps each saved output file (bytes).
	DefaultMaxSaved = 64 << 20
	// DefaultMaxSavedTotal caps all saved output files together (bytes).
	DefaultMaxSavedTotal = 512 << 20
	killGrace            = 2 * time.Second
)

// Settings is the `builtin "bash" {}` block.
type Settings struct {
	// Timeout is the default per-command timeout ("2m").
	Timeout string `hcl:"timeout,optional" json:"timeout,omitempty"`
	// MaxTimeout caps what a caller may ask for with timeout_ms ("10m").
	MaxTimeout string `hcl:"max_timeout,optional" json:"max_timeout,omitempty"`
	// OutputCap is the number of characters of output returned.
	OutputCap int `hcl:"output_cap,optional" json:"output_cap,omitempty"`
	// MaxSavedBytes caps each saved output file (default 64 MiB): past it
	// the file keeps the head, a note saying what was dropped, and the tail.
	MaxSavedBytes int64 `hcl:"max_saved_bytes,optional" json:"max_saved_bytes,omitempty"`
	// MaxSavedTotalBytes caps the saved outputs together (default 512
	// MiB): the oldest go first, before a new one is written.
	MaxSavedTotalBytes int64 `hcl:"max_saved_total_bytes,optional" json:"max_saved_total_bytes,omitempty"`
	// Env adds variables to the commands' clean environment.
	Env map[string]string `hcl:"env,optional" json:"env,omitempty"`
}

type plugin struct {
	roots     *confine.Roots
	timeout   time.Duration
	maxTime   time.Duration
	outputCap int
	env       []string
	outDir    string
	maxSaved  int64
	maxTotal  int64

	// protected are the host's control-plane paths (Config.ProtectedPaths
	// and HostDataDir), each as given and with symlinks resolved; fsRoot
	// resolves redirection targets the way confine does.
	protected []string
	fsRoot    *confine.Roots

	outMu  sync.Mutex
	outSeq int

	jobs *jobs

	running atomic.Int32 // run calls in progress (reapOrphans)
}

// keepOutputs is how many saved outputs the data directory keeps.
const keepOutputs = 200

// New returns the bash plugin.
func New() *sdk.Server {
	s := sdk.NewServer(Name, Version, sdk.WithInstructions(
		"Runs bash commands in the project directory. Commands get no stdin and a clean environment."))
	p := &plugin{}
	p.jobs = newJobs(p)
	s.OnConfigure(func(_ context.Context, cfg sdk.Config) error {
		if err := p.configure(cfg); err != nil {
			return err
		}
		// run is added once its limit is known: the host's call_timeout
		// must not cut a command the caller gave a longer timeout_ms.
		sdk.AddTool(s, sdk.Tool{
			Name:              "run",
			Title:             "Run a bash command",
			Description:       "Run a command with bash -c in the project directory (or cwd inside it). Returns the exit code and stdout+stderr in arrival order; long output is cut in the middle and saved whole to a file the result names. On timeout the whole process group is killed. For long-running commands use start.",
			Destructive:       sdk.Bool(true),
			OpenWorld:         sdk.Bool(true),
			PermissionPattern: commandPatterns,
			MaxDuration:       p.maxTime,
		}, p.run)
		return nil
	})
	s.OnShutdown(p.jobs.killAll)
	s.BusyWhen(p.jobs.anyRunning)
	p.jobs.addTools(s)
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
	p.maxSaved = DefaultMaxSaved
	switch {
	case st.MaxSavedBytes < 0:
		return fmt.Errorf("bash: max_saved_bytes %d is negative", st.MaxSavedBytes)
	case st.MaxSavedBytes > 0:
		p.maxSaved = st.MaxSavedBytes
	}
	p.maxTotal = DefaultMaxSavedTotal
	switch {
	case st.MaxSavedTotalBytes < 0:
		return fmt.Errorf("bash: max_saved_total_bytes %d is negative", st.MaxSavedTotalBytes)
	case st.MaxSavedTotalBytes > 0:
		p.maxTotal = st.MaxSavedTotalBytes
	}
	p.env = CleanEnv(st.Env)
	if p.fsRoot, err = confine.New("/"); err != nil {
		return fmt.Errorf("bash: %w", err)
	}
	p.protected = nil
	for _, pp := range append(slices.Clone(cfg.ProtectedPaths), cfg.HostDataDir) {
		if pp == "" || !filepath.IsAbs(pp) {
			continue
		}
		p.protected = append(p.protected, filepath.Clean(pp))
		if real, err := p.fsRoot.Resolve(pp); err == nil && real != filepath.Clean(pp) {
			p.protected = append(p.protected, real)
		}
	}
	// A working directory inside a protected path is refused as well.
	p.roots.Exclude(p.protected...)
	p.outDir = filepath.Join(cfg.DataDir, "outputs")
	if cfg.DataDir == "" {
		p.outDir = filepath.Join(os.TempDir(), "switchboard-bash-outputs")
	}
	// Something planted in place of the folder (a symlink, a file) is
	// removed, never followed: it would stop every later start.
	if fi, err := os.Lstat(p.outDir); err == nil && !fi.IsDir() {
		_ = os.Remove(p.outDir)
	}
	if err := os.MkdirAll(p.outDir, 0o700); err != nil {
		return fmt.Errorf("bash: cannot create %s for saved outputs: %w", p.outDir, err)
	}
	return nil
}

// commandPatterns is run's PermissionPattern: one pattern per command the
// line would run (see Commands).
func commandPatterns(_ context.Context, args json.RawMessage) ([]string, error) {
	var a struct {
		Command string `json:"command"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, err
	}
	return Commands(a.Command), nil
}

// CleanEnv is the environment commands run with: PATH, HOME, LANG,
// TERM=dumb and the extras, and nothing else of the host's. PATH keeps only
// its absolute entries: an empty or relative one ("", ".", "bin") would make
// a bare name such as ls resolve to a file in the working directory.
func CleanEnv(extra map[string]string) []string {
	var dirs []string
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if filepath.IsAbs(d) {
			dirs = append(dirs, d)
		}
	}
	path := strings.Join(dirs, string(filepath.ListSeparator))
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	env := []string{"PATH=" + path, "TERM=dumb"}
	for _, k := range []string{"HOME", "LANG"} {
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

// start prepares bash -c line in its own process group with the clean
// environment, no stdin, and output into out.
func (p *plugin) command(line, cwd string, out *capture) *exec.Cmd {
	cmd := exec.Command("bash", "-c", line)
	cmd.Dir = cwd
	cmd.Env = p.env
	cmd.Stdin = nil // /dev/null
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysproc.Attr(syscall.SIGKILL)
	// Once bash has exited, its output is read for at most this long: a
	// process it left behind holding the output open (in its group, or
	// detached with setsid) would otherwise hold the call past bash's end
	// and past its timeout, whose kill reaches bash's group only.
	cmd.WaitDelay = outputGrace
	return cmd
}

// outputGrace is how long a command's output is still read after bash
// has exited.
const outputGrace = time.Second

func (p *plugin) run(ctx context.Context, req *sdk.Request, in runArgs) (*sdk.Result, error) {
	if strings.TrimSpace(in.Command) == "" {
		return sdk.ErrorResult("command is empty"), nil
	}
	cwd, err := p.roots.Resolve(in.Cwd)
	if err != nil {
		return sdk.ErrorResult("cwd refused: %v", err), nil
	}
	if err := p.checkRedirects(in.Command, cwd); err != nil {
		return sdk.ErrorResult("refused: %v", err), nil
	}
	timeout := p.timeout
	if in.TimeoutMS > 0 {
		timeout = time.Duration(in.TimeoutMS) * time.Millisecond
	}
	if timeout > p.maxTime {
		return sdk.ErrorResult("timeout_ms %d exceeds the maximum of %d", in.TimeoutMS, p.maxTime.Milliseconds()), nil
	}
	out, err := p.newCapture("run")
	if err != nil {
		return sdk.ErrorResult("cannot store the command's output: %v", err), nil
	}
	p.running.Add(1)
	defer func() {
		p.running.Add(-1)
		p.reapOrphans()
	}()
	cmd := p.command(in.Command, cwd, out)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		_, _, _ = out.finish(false)
		return sdk.ErrorResult("cannot start bash: %v", err), nil
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	// New output lines go to the caller as progress, a batch at a time;
	// the progress value counts the batches (it must increase: the host
	// drops a report that does not).
	var tick <-chan time.Time
	batches := 0.0
	report := func(msg string) {
		batches++
		req.Progress(batches, 0, msg)
	}
	if req.WantsProgress() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		tick = t.C
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var killed string
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-tick:
			if msg := out.takeLines(); msg != "" {
				report(msg)
			}
		case <-timer.C:
			killed = fmt.Sprintf("timed out after %s", timeout)
			err = killGroup(cmd.Process.Pid, done)
			break wait
		case <-ctx.Done():
			killed = "cancelled"
			err = killGroup(cmd.Process.Pid, done)
			break wait
		}
	}
	// Children that outlived bash (a background `sleep &`) die with it.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if msg := out.takeLines(); msg != "" && req.WantsProgress() {
		report(msg)
	}

	code := 0
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	case errors.Is(err, exec.ErrWaitDelay):
		// bash exited 0; a process it left behind held the output open.
	case err != nil:
		_, _, _ = out.finish(false)
		return sdk.ErrorResult("command failed: %v", err), nil
	}
	text, _, ferr := out.finish(false)
	if ferr != nil {
		return sdk.ErrorResult("reading the command's output: %v", ferr), nil
	}
	if killed == "cancelled" && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var b strings.Builder
	if killed != "" {
		fmt.Fprintf(&b, "Killed: %s (process group sent SIGTERM, then SIGKILL).\n", killed)
	} else {
		fmt.Fprintf(&b, "Exit code: %d (%.1fs)\n", code, time.Since(start).Seconds())
	}
	b.WriteString(text)
	if killed != "" || code != 0 {
		return sdk.ErrorResult("%s", b.String()), nil
	}
	return sdk.Text(b.String()), nil
}

// newCapture opens a new output file under the data directory.
func (p *plugin) newCapture(kind string) (*capture, error) {
	p.outMu.Lock()
	p.outSeq++
	name := fmt.Sprintf("%s-%s-%d-%d.log", kind, time.Now().UTC().Format("20060102T150405"), os.Getpid(), p.outSeq)
	p.outMu.Unlock()
	p.pruneOutputs()
	return newCapture(filepath.Join(p.outDir, name), p.outputCap, p.maxSaved)
}

// pruneOutputs keeps the newest saved outputs: at most keepOutputs of
// them, together at most max_saved_total_bytes (found from outside: 69
// calls filled 4.2 GB of disk).
func (p *plugin) pruneOutputs() {
	ents, err := os.ReadDir(p.outDir)
	if err != nil {
		return
	}
	type f struct {
		name string
		mod  time.Time
		size int64
	}
	var files []f
	for _, e := range ents {
		if info, err := e.Info(); err == nil && !e.IsDir() {
			files = append(files, f{e.Name(), info.ModTime(), info.Size()})
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].mod.After(files[j].mod) })
	var total int64
	for i, file := range files {
		total += file.size
		if i >= keepOutputs || total > p.maxTotal {
			_ = os.Remove(filepath.Join(p.outDir, file.name))
		}
	}
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

// checkRedirects refuses a line with a redirection (in it, or in a bash -c
// or eval string it runs) whose target is at or under a protected path.
// A relative target is resolved against cwd and, when the line changes
// directory, against each directory it names; symlinks are followed where
// the target or its parents exist. Targets that cannot be resolved here
// ($VAR, globs, ~user) are opaque in the permission patterns instead.
//
// This is a check of the line as written, made before it runs: a command in
// the same line that creates a symlink at the target defeats it. The
// kernel sandbox is the boundary; this keeps an allowed echo from writing
// the host's files.
func (p *plugin) checkRedirects(line, cwd string) error {
	if len(p.protected) == 0 {
		return nil
	}
	an := analyze(line)
	home := envValue(p.env, "HOME")
	for _, t := range an.targets {
		for _, cand := range targetCandidates(t, cwd, home, an.dirs) {
			if prot := p.protectedBy(cand); prot != "" {
				return fmt.Errorf("the redirection to %s reaches %s, a protected path (the host's configuration, data and plugin files may not be read or written by tools)", t, prot)
			}
		}
	}
	return nil
}

// protectedBy returns the protected path that abs (absolute) lies at or
// under, judged both as written and with symlinks resolved, or "".
func (p *plugin) protectedBy(abs string) string {
	paths := []string{filepath.Clean(abs)}
	if real, err := p.fsRoot.Resolve(abs); err == nil {
		paths = append(paths, real)
	}
	for _, c := range paths {
		for _, prot := range p.protected {
			if confine.Within(c, prot) {
				return prot
			}
		}
	}
	return ""
}

// targetCandidates returns the absolute paths a redirection target may
// name: ~ and ~/x expanded with home, relative paths against cwd and each
// directory the line cds into.
func targetCandidates(t, cwd, home string, dirs []string) []string {
	expand := func(s string) (string, bool) {
		switch {
		case s == "~" || strings.HasPrefix(s, "~/"):
			if home == "" {
				return "", false
			}
			return home + s[1:], true
		case strings.HasPrefix(s, "~"):
			return "", false // ~user: opaque in the patterns
		}
		return s, true
	}
	t, ok := expand(t)
	if !ok {
		return nil
	}
	if filepath.IsAbs(t) {
		return []string{t}
	}
	out := []string{filepath.Join(cwd, t)}
	for _, d := range dirs {
		if d, ok := expand(d); ok {
			if !filepath.IsAbs(d) {
				d = filepath.Join(cwd, d)
			}
			out = append(out, filepath.Join(d, t))
		}
	}
	return out
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

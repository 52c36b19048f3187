package bash

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/sdk"
)

// maxJobs bounds the running background jobs of one owner.
const maxJobs = 32

// owner is who a job belongs to: the call's sdk.Request.Owner (the
// authenticated caller, else the HTTP session, else the stdio client; ""
// from an older host, which is an owner like any other).
type owner string

// jobKey names a job: ids are numbered per owner, so one owner's ids say
// nothing about another's.
type jobKey struct {
	owner owner
	id    string
}

// jobs are background commands: started by `start`, read by `output`,
// stopped by `kill` or when the plugin stops. A job belongs to the owner
// that started it: to any other owner, output, kill and jobs answer as if
// it did not exist.
type jobs struct {
	p    *plugin
	mu   sync.Mutex
	byID map[jobKey]*job
	keys []jobKey
	next map[owner]int
}

type job struct {
	owner            owner
	id, command, cwd string
	started          time.Time
	cmd              *exec.Cmd
	out              *capture
	done             chan struct{}

	mu       sync.Mutex
	state    string // running, exited, killed
	onEnd    func() // after it ended (the plugin's reapOrphans)
	exitCode int
	ended    time.Time
	cursor   int64 // where the next `output` without offset starts
}

func newJobs(p *plugin) *jobs {
	return &jobs{p: p, byID: map[jobKey]*job{}, next: map[owner]int{}}
}

func (js *jobs) addTools(s *sdk.Server) {
	sdk.AddTool(s, sdk.Tool{
		Name:              "start",
		Title:             "Start a background command",
		Description:       "Start a command with bash -c in the background (a job) and return its id at once. Read its output with output, stop it with kill, list jobs with jobs.",
		OpenWorld:         sdk.Bool(true),
		PermissionPattern: commandPatterns,
	}, js.start)
	sdk.AddTool(s, sdk.Tool{
		Name:               "output",
		Title:              "Read a job's output",
		Description:        "Read a background job's output: by default what is new since the last read; offset and limit (bytes) read any part. Says whether the job is still running.",
		ReadOnly:           true,
		OpenWorld:          sdk.Bool(false),
		SkipDuplicateCheck: true,
	}, js.output)
	sdk.AddTool(s, sdk.Tool{
		Name:        "kill",
		Title:       "Kill a job",
		Description: "Stop a background job and everything it started (SIGTERM, then SIGKILL).",
		Destructive: sdk.Bool(true),
		OpenWorld:   sdk.Bool(false),
	}, js.kill)
	sdk.AddTool(s, sdk.Tool{
		Name:               "jobs",
		Title:              "List jobs",
		Description:        "List background jobs: id, state, exit code, start time, command.",
		ReadOnly:           true,
		OpenWorld:          sdk.Bool(false),
		SkipDuplicateCheck: true,
	}, js.list)
}

type startArgs struct {
	Command string `json:"command" jsonschema:"description=The command line, run with bash -c in the background"`
	Cwd     string `json:"cwd,omitempty" jsonschema:"description=Working directory inside the project directory"`
}

func (js *jobs) start(_ context.Context, req *sdk.Request, in startArgs) (*sdk.Result, error) {
	who := owner(req.Owner)
	if strings.TrimSpace(in.Command) == "" {
		return sdk.ErrorResult("command is empty"), nil
	}
	cwd, err := js.p.roots.Resolve(in.Cwd)
	if err != nil {
		return sdk.ErrorResult("cwd refused: %v", err), nil
	}
	if err := js.p.checkRedirects(in.Command, cwd); err != nil {
		return sdk.ErrorResult("refused: %v", err), nil
	}
	js.mu.Lock()
	running := 0
	for k, j := range js.byID {
		if k.owner == who && j.isRunning() {
			running++
		}
	}
	if running >= maxJobs {
		js.mu.Unlock()
		return sdk.ErrorResult("%d jobs are running already; kill one first", running), nil
	}
	js.next[who]++
	id := fmt.Sprintf("j%d", js.next[who])
	js.mu.Unlock()

	out, err := js.p.newCapture("job-" + id)
	if err != nil {
		return sdk.ErrorResult("cannot store the job's output: %v", err), nil
	}
	j := &job{owner: who, id: id, command: in.Command, cwd: cwd, started: time.Now(), out: out, done: make(chan struct{}), state: "running", onEnd: js.p.reapOrphans}
	j.cmd = js.p.command(in.Command, cwd, out)
	if err := j.cmd.Start(); err != nil {
		_, _, _ = out.finish(false)
		return sdk.ErrorResult("cannot start bash: %v", err), nil
	}
	go j.wait()
	js.mu.Lock()
	key := jobKey{who, id}
	js.byID[key] = j
	js.keys = append(js.keys, key)
	js.mu.Unlock()
	return sdk.Textf("Started job %s (pid %d). Read its output with output {\"job\": %q}.", id, j.cmd.Process.Pid, id), nil
}

func (j *job) wait() {
	err := j.cmd.Wait()
	// Children that outlived bash die with the job.
	_ = syscall.Kill(-j.cmd.Process.Pid, syscall.SIGKILL)
	// The saved tail and note are written before the job says it
	// exited: a reader that sees "exited" reads the whole output.
	_, _, _ = j.out.finish(true) // the job's file is its output store
	j.mu.Lock()
	if j.state == "running" {
		j.state = "exited"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		j.exitCode = ee.ExitCode()
	}
	j.ended = time.Now()
	j.mu.Unlock()
	close(j.done)
	if j.onEnd != nil {
		j.onEnd()
	}
}

func (j *job) isRunning() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.state == "running"
}

func (j *job) status() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	switch j.state {
	case "running":
		return fmt.Sprintf("running for %s", time.Since(j.started).Round(time.Second))
	case "killed":
		return "killed"
	default:
		return fmt.Sprintf("exited with code %d", j.exitCode)
	}
}

// get returns the caller's job id; another owner's job is not found.
func (js *jobs) get(req *sdk.Request, id string) (*job, *sdk.Result) {
	js.mu.Lock()
	defer js.mu.Unlock()
	if j, ok := js.byID[jobKey{owner(req.Owner), id}]; ok {
		return j, nil
	}
	return nil, sdk.ErrorResult("no job %q; list them with jobs", id)
}

type outputArgs struct {
	Job    string `json:"job" jsonschema:"description=The job id from start"`
	Offset *int64 `json:"offset,omitempty" jsonschema:"description=Byte offset to read from (default: where the last read ended),minimum=0"`
	Limit  int    `json:"limit,omitempty" jsonschema:"description=Bytes to read (default 30000),minimum=1"`
}

func (js *jobs) output(_ context.Context, req *sdk.Request, in outputArgs) (*sdk.Result, error) {
	j, errRes := js.get(req, in.Job)
	if errRes != nil {
		return errRes, nil
	}
	j.mu.Lock()
	offset := j.cursor
	j.mu.Unlock()
	if in.Offset != nil {
		offset = *in.Offset
	}
	limit := in.Limit
	if limit <= 0 {
		limit = js.p.outputCap
	}
	// The state before the read: a job that had exited then had written
	// all its output (wait), so "exited" always comes with the whole of
	// it; one that ends during the read is still reported running.
	status := j.status()
	running := strings.HasPrefix(status, "running")
	f, err := os.Open(j.out.path)
	if err != nil {
		return sdk.ErrorResult("job %s: output unavailable: %v", j.id, err), nil
	}
	defer f.Close()
	buf := make([]byte, limit)
	n, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return sdk.ErrorResult("job %s: reading output: %v", j.id, err), nil
	}
	var size int64
	if st, err := f.Stat(); err == nil {
		size = st.Size()
	}
	next := offset + int64(n)
	j.mu.Lock()
	if next > j.cursor {
		j.cursor = next
	}
	j.mu.Unlock()
	text := strings.ToValidUTF8(string(buf[:n]), "\uFFFD")
	capped := ""
	if d := j.out.droppedBytes(); d > 0 && running {
		capped = fmt.Sprintf("; %d bytes past the %d-byte cap on saved output are not kept (the tail is saved when the job ends)", d, js.p.maxSaved)
	}
	return sdk.Textf("%s\n[job %s %s; read bytes %d-%d of %d; next offset %d%s]", text, j.id, status, offset, next, size, next, capped), nil
}

type jobArgs struct {
	Job string `json:"job" jsonschema:"description=The job id from start"`
}

func (js *jobs) kill(_ context.Context, req *sdk.Request, in jobArgs) (*sdk.Result, error) {
	j, errRes := js.get(req, in.Job)
	if errRes != nil {
		return errRes, nil
	}
	if !j.isRunning() {
		return sdk.Textf("job %s already %s", j.id, j.status()), nil
	}
	j.stop()
	return sdk.Textf("job %s killed", j.id), nil
}

// stop kills the job's process group: SIGTERM, a grace period, SIGKILL.
func (j *job) stop() {
	j.mu.Lock()
	if j.state == "running" {
		j.state = "killed"
	}
	j.mu.Unlock()
	pid := j.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-j.done:
	case <-time.After(killGrace):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-j.done
	}
}

func (js *jobs) list(_ context.Context, req *sdk.Request, _ struct{}) (*sdk.Result, error) {
	js.mu.Lock()
	var mine []*job
	for _, k := range js.keys {
		if k.owner == owner(req.Owner) {
			mine = append(mine, js.byID[k])
		}
	}
	js.mu.Unlock()
	if len(mine) == 0 {
		return sdk.Text("No jobs."), nil
	}
	var b strings.Builder
	for _, j := range mine {
		fmt.Fprintf(&b, "%s\t%s\tstarted %s\t%s\n", j.id, j.status(), j.started.UTC().Format(time.RFC3339), j.command)
	}
	return sdk.Text(b.String()), nil
}

// anyRunning reports whether a job is still running: the host does not
// stop an idle bash server then (sdk.Server.BusyWhen).
func (js *jobs) anyRunning() bool {
	js.mu.Lock()
	defer js.mu.Unlock()
	for _, j := range js.byID {
		if j.isRunning() {
			return true
		}
	}
	return false
}

// killAll stops every running job; the plugin runs it when it stops.
func (js *jobs) killAll() {
	js.mu.Lock()
	var running []*job
	for _, j := range js.byID {
		if j.isRunning() {
			running = append(running, j)
		}
	}
	js.mu.Unlock()
	var wg sync.WaitGroup
	for _, j := range running {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j.stop()
		}()
	}
	wg.Wait()
}

package launchertest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

func TestMain(m *testing.M) { fixtures.Main(m) }

func launch(t *testing.T, spec launcher.Spec) *launcher.Plugin {
	t.Helper()
	if spec.Path == "" {
		spec.Path = fixtures.Build(t).TestPlugin
	}
	if spec.Name == "" {
		spec.Name = "fixture"
	}
	if spec.ProjectDir == "" {
		spec.ProjectDir = t.TempDir()
	}
	p, err := launcher.Launch(t.Context(), spec, hclog.NewNullLogger())
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

func text(r *toolcall.Result) string { return r.Text() }

func TestLaunchDescribeCallCancelClose(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "cancelled")
	p := launch(t, launcher.Spec{Env: map[string]string{"FIXTURE_CANCEL_MARKER": marker}})

	if got := p.Describe().Name; got != "fixture" {
		t.Errorf("Describe().Name = %q, want fixture", got)
	}
	if p.ProtocolVersion() != protocol.Version2 {
		t.Errorf("ProtocolVersion() = %d, want %d (the highest both sides speak)", p.ProtocolVersion(), protocol.Version2)
	}
	pid := p.PID()
	if !fixtures.Alive(pid) {
		t.Fatalf("plugin pid %d is not alive", pid)
	}

	res, err := p.Call(t.Context(), "echo", []byte(`{"text":"ping"}`), nil)
	if err != nil || text(res) != "ping" {
		t.Fatalf("echo = %q, %v; want ping", text(res), err)
	}

	// Cancel a call mid-way: the handler sees ctx.Done() and the call
	// returns a cancelled error.
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	_, err = p.Call(ctx, "sleep", []byte(`{"ms":30000}`), nil)
	if !errors.Is(err, protocol.ErrCancelled) {
		t.Fatalf("sleep after cancel: err = %v, want ErrCancelled", err)
	}
	b, rerr := os.ReadFile(marker)
	if rerr != nil || !strings.Contains(string(b), "canceled") {
		t.Errorf("handler's cancellation marker = %q, %v; want it to record context canceled", b, rerr)
	}

	// Progress events arrive in order before the result.
	var steps []string
	res, err = p.Call(t.Context(), "progress", []byte(`{"steps":3}`), func(pr toolcall.Progress) {
		steps = append(steps, pr.Message)
	})
	if err != nil || text(res) != "done 3 steps" {
		t.Fatalf("progress = %q, %v", text(res), err)
	}
	if strings.Join(steps, ",") != "step 1,step 2,step 3" {
		t.Errorf("progress events = %v, want step 1..3", steps)
	}

	// Many calls at once share the carrier; each gets its own answer.
	errs := make(chan error, 64)
	for i := 0; i < 64; i++ {
		go func() {
			want := fmt.Sprintf("call %d %s", i, strings.Repeat("x", i*1000))
			res, err := p.Call(t.Context(), "echo", fmt.Appendf(nil, `{"text":%q}`, want), nil)
			if err == nil && text(res) != want {
				err = fmt.Errorf("call %d got the answer %.20q", i, text(res))
			}
			errs <- err
		}()
	}
	for i := 0; i < 64; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if err := p.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if alive := fixtures.WaitGone([]int{pid}, 5*time.Second); len(alive) > 0 {
		t.Errorf("plugin pid %d still alive after Close", pid)
	}
	// Calls after Close fail cleanly.
	if _, err := p.Call(t.Context(), "echo", []byte(`{}`), nil); !errors.Is(err, protocol.ErrUnavailable) {
		t.Errorf("call after Close: err = %v, want ErrUnavailable", err)
	}
}

func TestVersionMismatchIsRefused(t *testing.T) {
	bin := fixtures.Build(t).TestPlugin
	_, err := launcher.Launch(t.Context(), launcher.Spec{
		Name: "future", Path: bin, ProjectDir: t.TempDir(),
		Env: map[string]string{"FIXTURE_VERSIONS": "3"},
	}, hclog.NewNullLogger())
	var pm *launcher.ProtocolMismatchError
	if !errors.As(err, &pm) {
		t.Fatalf("Launch(v3 plugin) err = %v, want *ProtocolMismatchError", err)
	}
	msg := err.Error()
	for _, want := range []string{"future", "speaks protocol [3]", "this host speaks [1 2]", "upgrade the host"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	// A plugin offering several versions is reported with all of them,
	// not only the one go-plugin's handshake names.
	_, err = launcher.Launch(t.Context(), launcher.Spec{
		Name: "future", Path: bin, ProjectDir: t.TempDir(),
		Env: map[string]string{"FIXTURE_VERSIONS": "3,4"},
	}, hclog.NewNullLogger())
	if !errors.As(err, &pm) || !slices.Equal(pm.PluginVersions, []int{3, 4}) || !strings.Contains(err.Error(), "speaks protocol [3 4]") {
		t.Errorf("Launch([3 4] plugin) err = %v, want it to name [3 4]", err)
	}
	// An old plugin gets the other advice.
	old := &launcher.ProtocolMismatchError{Plugin: "old", PluginVersions: []int{1}, HostVersions: []int{2, 3}}
	if !strings.Contains(old.Error(), "rebuild the plugin") {
		t.Errorf("old plugin advice = %q, want rebuild the plugin", old.Error())
	}

	// A v1 plugin next to it works.
	p := launch(t, launcher.Spec{Path: bin})
	if res, err := p.Call(t.Context(), "echo", []byte(`{"text":"still here"}`), nil); err != nil || text(res) != "still here" {
		t.Errorf("echo = %q, %v", text(res), err)
	}
	// And the host negotiates the highest shared version when offered more.
	p2 := launch(t, launcher.Spec{Path: bin, Env: map[string]string{"FIXTURE_VERSIONS": "1,3"}})
	if p2.ProtocolVersion() != 1 {
		t.Errorf("negotiated %d, want 1", p2.ProtocolVersion())
	}
}

func TestChecksumPin(t *testing.T) {
	bin := fixtures.Build(t).TestPlugin
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	good := hex.EncodeToString(sum[:])
	launch(t, launcher.Spec{Path: bin, SHA256: good})

	bad := strings.Repeat("0", 64)
	_, err = launcher.Launch(t.Context(), launcher.Spec{Name: "pinned", Path: bin, SHA256: bad, ProjectDir: t.TempDir()}, hclog.NewNullLogger())
	if !errors.Is(err, launcher.ErrChecksum) || !strings.Contains(err.Error(), good) || !strings.Contains(err.Error(), bad) {
		t.Errorf("Launch(bad pin) err = %v, want ErrChecksum naming both sums", err)
	}
}

// The attack: the pinned path is swapped for another program between the
// check and the exec (a rename, as an agent with write access to the folder
// would do). The launcher executes the descriptor it hashed, so the other
// program never runs, however the swaps fall.
func TestChecksumPinSwapNeverRunsTheOtherFile(t *testing.T) {
	bin := fixtures.Build(t).TestPlugin
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	dir := t.TempDir()
	marker := filepath.Join(dir, "impostor-ran")
	good, evil, path := filepath.Join(dir, "good"), filepath.Join(dir, "evil"), filepath.Join(dir, "plugin")
	if err := os.WriteFile(good, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(evil, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	swap := func(src string) {
		tmp := path + ".tmp"
		_ = os.Link(src, tmp)
		_ = os.Rename(tmp, path)
	}
	swap(good)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			swap([]string{good, evil}[i%2])
		}
	}()
	started := 0
	for i := 0; i < 15; i++ {
		p, err := launcher.Launch(t.Context(), launcher.Spec{Name: "pinned", Path: path, SHA256: hex.EncodeToString(sum[:]), ProjectDir: t.TempDir(), StartTimeout: 10 * time.Second}, hclog.NewNullLogger())
		if err == nil {
			started++
			_ = p.Close(t.Context())
		} else if !errors.Is(err, launcher.ErrChecksum) {
			t.Errorf("launch %d: %v, want a start or ErrChecksum", i, err)
		}
	}
	close(stop)
	<-done
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the swapped-in program ran although the pin did not match it")
	}
	// The control: the same script does run when it is started by path.
	if err := exec.Command(evil).Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the impostor does not leave its marker when run: %v", err)
	}
	t.Logf("%d of 15 launches started the pinned binary while it was being swapped", started)
}

func TestCleanEnvironment(t *testing.T) {
	t.Setenv("SWITCHBOARD_TEST_SECRET", "hunter2")
	p := launch(t, launcher.Spec{Env: map[string]string{"GREETING": "hi"}})
	res, err := p.Call(t.Context(), "env", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := text(res)
	if strings.Contains(env, "hunter2") {
		t.Errorf("host variable leaked into the plugin environment:\n%s", env)
	}
	if !strings.Contains(env, "GREETING=hi") {
		t.Errorf("block env GREETING=hi missing from:\n%s", env)
	}
	if !strings.Contains(env, "PATH=") {
		t.Errorf("PATH missing from:\n%s", env)
	}
}

func TestPluginDyingMidCall(t *testing.T) {
	for _, name := range []string{"first call", "again"} {
		t.Run(name, func(t *testing.T) {
			p := launch(t, launcher.Spec{})
			_, err := p.Call(t.Context(), "crash", nil, nil)
			if !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), "exited") {
				t.Fatalf("crash: err = %v, want ErrUnavailable saying the plugin exited", err)
			}
			if !p.Exited() {
				t.Error("Exited() = false after the plugin died")
			}
			// Later calls fail the same way.
			if _, err := p.Call(t.Context(), "echo", []byte(`{"text":"x"}`), nil); !errors.Is(err, protocol.ErrUnavailable) {
				t.Errorf("call after the crash: err = %v, want ErrUnavailable", err)
			}
		})
	}
}

func TestCloseKillsChildren(t *testing.T) {
	p := launch(t, launcher.Spec{})
	res, err := p.Call(t.Context(), "child", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(text(res))
	if err != nil || !fixtures.Alive(child) {
		t.Fatalf("child pid %q not alive (%v)", text(res), err)
	}
	t.Cleanup(func() { fixtures.Kill([]int{child}) })
	pid := p.PID()
	if err := p.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if alive := fixtures.WaitGone([]int{pid, child}, 10*time.Second); len(alive) > 0 {
		t.Errorf("still alive after Close: %v (plugin %d, its child %d)", alive, pid, child)
	}
}

func TestNotAPlugin(t *testing.T) {
	_, err := launcher.Launch(t.Context(), launcher.Spec{Name: "true", Path: "/bin/true", ProjectDir: t.TempDir(), StartTimeout: 5 * time.Second}, hclog.NewNullLogger())
	if !errors.Is(err, launcher.ErrStart) {
		t.Errorf("Launch(/bin/true) err = %v, want ErrStart", err)
	}
	_, err = launcher.Launch(t.Context(), launcher.Spec{Name: "missing", Path: "/nonexistent/plugin", ProjectDir: t.TempDir()}, hclog.NewNullLogger())
	if !errors.Is(err, launcher.ErrStart) || !strings.Contains(err.Error(), "/nonexistent/plugin") {
		t.Errorf("Launch(missing) err = %v, want ErrStart naming the path", err)
	}
}

// Codes cross every RPC, not only calls: a real plugin's coded errors from
// Configure, Describe and PermissionPattern reach the host with their codes.
func TestErrorCodesSurviveEveryRPC(t *testing.T) {
	bin := fixtures.Build(t).TestPlugin
	failedLaunch := func(t *testing.T, spec launcher.Spec) error {
		t.Helper()
		spec.Path, spec.Name, spec.ProjectDir = bin, "fixture", t.TempDir()
		p, err := launcher.Launch(t.Context(), spec, hclog.NewNullLogger())
		if err == nil {
			_ = p.Close(context.Background())
			t.Fatal("Launch succeeded, want an error")
		}
		return err
	}
	for _, tt := range []struct {
		name    string
		spec    launcher.Spec
		want    *protocol.Error
		wantMsg string
	}{
		{"configure", launcher.Spec{Env: map[string]string{"FIXTURE_CONFIGURE_ERROR": "ERROR_CODE_PERMISSION_DENIED"}}, protocol.ErrPermissionDenied, "refuses its configuration"},
		{"configure without a code", launcher.Spec{Settings: []byte(`{"unexpected":true}`)}, protocol.ErrInvalidArguments, "takes no settings"},
		{"describe", launcher.Spec{Env: map[string]string{"FIXTURE_DESCRIBE_ERROR": "ERROR_CODE_UNAVAILABLE"}}, protocol.ErrUnavailable, "cannot describe itself"},
		{"describe shutting down", launcher.Spec{Env: map[string]string{"FIXTURE_DESCRIBE_ERROR": "ERROR_CODE_SHUTTING_DOWN"}}, protocol.ErrShuttingDown, "cannot describe itself"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := failedLaunch(t, tt.spec)
			var perr *protocol.Error
			if !errors.As(err, &perr) || perr.Code != tt.want.Code || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Launch err = %v, want an *protocol.Error with %s saying %q", err, tt.want.Code, tt.wantMsg)
			}
			if errors.Is(err, launcher.ErrStart) {
				t.Errorf("Launch err = %v: a refusal is not a failed start", err)
			}
		})
	}

	p := launch(t, launcher.Spec{})
	for _, code := range []*protocol.Error{protocol.ErrInvalidArguments, protocol.ErrPermissionDenied, protocol.ErrUnknownTool, protocol.ErrShuttingDown} {
		t.Run("permission pattern "+code.Error(), func(t *testing.T) {
			_, err := p.PermissionPatterns(t.Context(), "guarded", []byte(`{"code":"`+code.Code.String()+`"}`))
			if !errors.Is(err, code) || !strings.Contains(err.Error(), "cannot judge the call") {
				t.Errorf("PermissionPatterns err = %v, want code %s and the plugin's message", err, code.Code)
			}
		})
	}
	if pats, err := p.PermissionPatterns(t.Context(), "guarded", []byte(`{}`)); err != nil || strings.Join(pats, ",") != "ok" {
		t.Errorf("PermissionPatterns without a code = %v, %v; want [ok]", pats, err)
	}
}

// A plugin flooding stderr (50 MB of 10 KB lines) costs the host's log a
// bounded number of lines, each cut short, and the host says lines were
// dropped; the plugin keeps answering.
func TestStderrFloodIsLimited(t *testing.T) {
	var out fixtures.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Debug})
	start := time.Now()
	p, err := launcher.Launch(t.Context(), launcher.Spec{
		Name: "flood", Path: fixtures.Build(t).TestPlugin, ProjectDir: t.TempDir(),
		Env: map[string]string{"FIXTURE_STDERR_FLOOD": "5000"},
	}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "lines dropped") && time.Now().Before(deadline) {
		if _, err := p.Call(t.Context(), "echo", []byte(`{"text":"still here"}`), nil); err != nil {
			t.Fatalf("echo during the flood: %v", err)
		}
	}
	logged := out.String()
	elapsed := time.Since(start).Seconds()
	if !strings.Contains(logged, "lines dropped") {
		t.Errorf("no report of dropped lines in %d bytes of log", len(logged))
	}
	lines := strings.Count(logged, "\n")
	if limit := 400 + int(200*elapsed) + 100; lines > limit {
		t.Errorf("the host logged %d lines in %.1fs of flood, want at most %d", lines, elapsed, limit)
	}
	for _, l := range strings.Split(logged, "\n") {
		if len(l) > 4096+512 {
			t.Fatalf("a logged line of %d bytes: lines must be cut at 4096", len(l))
		}
	}
}

// A plugin that dies before its handshake is reported with what it said on
// stderr, which is usually why.
func TestFailedStartKeepsStderr(t *testing.T) {
	_, err := launcher.Launch(t.Context(), launcher.Spec{
		Name: "broken", Path: fixtures.Build(t).TestPlugin, ProjectDir: t.TempDir(),
		Env: map[string]string{"FIXTURE_FAIL_START": "cannot read /etc/fixture.conf: no such file"},
	}, hclog.NewNullLogger())
	if err == nil || !errors.Is(err, launcher.ErrStart) || !strings.Contains(err.Error(), "cannot read /etc/fixture.conf: no such file") {
		t.Errorf("Launch err = %v, want ErrStart with the plugin's own words", err)
	}
}

// The plugin's data directory exists before the plugin is configured, with
// no sandbox to make it.
func TestDataDirIsCreated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "plugins", "fixture")
	launch(t, launcher.Spec{DataDir: dir})
	if st, err := os.Stat(dir); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Errorf("data dir %s: %v, %v; want a 0700 folder", dir, st, err)
	}
}

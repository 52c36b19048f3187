package bash_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/plugins/bash"
	"github.com/switchboard-mcp/switchboard/sdk/sdktest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction(sdktest.ReattachWaitFunction))
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && s[i+2] != 'Z'
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if alive(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("process %d survived", pid)
	}
}

var savedRE = regexp.MustCompile(`is in (\S+) \.\.\.`)

func TestRun(t *testing.T) {
	t.Setenv("SWITCHBOARD_TEST_SECRET", "hunter2")
	project := t.TempDir()
	p := sdktest.StartInProcess(t, bash.New(), sdktest.WithProjectDir(project),
		sdktest.WithSettings(map[string]any{"output_cap": 200, "env": map[string]string{"EXTRA": "yes"}}))

	t.Run("exit code and output", func(t *testing.T) {
		res := p.Call("run", map[string]any{"command": "echo out; echo err >&2; exit 3"})
		got := res.Text()
		if !res.IsError || !strings.Contains(got, "Exit code: 3") || !strings.Contains(got, "out\nerr") {
			t.Errorf("run = %q (isError %v)", got, res.IsError)
		}
	})
	t.Run("runs in the project", func(t *testing.T) {
		got := p.Call("run", map[string]any{"command": "pwd"}).Text()
		if !strings.Contains(got, project) {
			t.Errorf("pwd = %q, want %s", got, project)
		}
	})
	t.Run("clean environment", func(t *testing.T) {
		// Only the lines that matter: the output cap is small here.
		got := p.Call("run", map[string]any{"command": "env | grep -E 'EXTRA|TERM|hunter2'"}).Text()
		if strings.Contains(got, "hunter2") {
			t.Errorf("host secret leaked: %q", got)
		}
		if !strings.Contains(got, "EXTRA=yes") || !strings.Contains(got, "TERM=dumb") {
			t.Errorf("env lacks EXTRA=yes or TERM=dumb: %q", got)
		}
	})
	t.Run("stdin is empty", func(t *testing.T) {
		got := p.Call("run", map[string]any{"command": "cat; echo done", "timeout_ms": 5000}).Text()
		if !strings.Contains(got, "Exit code: 0") || !strings.Contains(got, "done") {
			t.Errorf("cat with no stdin = %q", got)
		}
	})
	t.Run("cwd outside refused", func(t *testing.T) {
		for _, cwd := range []string{"/", "..", project + "-evil"} {
			res := p.Call("run", map[string]any{"command": "pwd", "cwd": cwd})
			if !res.IsError || !strings.Contains(res.Text(), "outside") {
				t.Errorf("run cwd=%s = %q", cwd, res.Text())
			}
		}
	})
	t.Run("output capped in the middle and saved whole", func(t *testing.T) {
		got := p.Call("run", map[string]any{"command": "seq 1 100000"}).Text()
		if !strings.Contains(got, "characters cut from the middle") || !strings.Contains(got, "\n1\n2\n") || !strings.HasSuffix(got, "99999\n100000\n") {
			t.Fatalf("capped output = %q", got)
		}
		m := savedRE.FindStringSubmatch(got)
		if m == nil {
			t.Fatalf("result does not name the saved output: %q", got)
		}
		f, err := os.Open(m[1])
		if err != nil {
			t.Fatalf("saved output: %v", err)
		}
		defer f.Close()
		n := 0
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			n++
			if sc.Text() != strconv.Itoa(n) {
				t.Fatalf("saved output line %d = %q", n, sc.Text())
			}
		}
		if n != 100000 {
			t.Errorf("saved output has %d lines, want 100000", n)
		}
	})
	t.Run("multibyte output under the cap is whole", func(t *testing.T) {
		// 150 three-byte characters: under the 200-character cap.
		got := p.Call("run", map[string]any{"command": "printf 'é%.0s' $(seq 1 150)"}).Text()
		if strings.Count(got, "é") != 150 || strings.Contains(got, "cut") {
			t.Errorf("150 × é = %q", got)
		}
	})
	t.Run("binary output", func(t *testing.T) {
		res := p.Call("run", map[string]any{"command": "printf 'ok\\xff\\xfe\\x00bin'"})
		got := res.Text()
		if res.IsError || !utf8.ValidString(got) || !strings.Contains(got, "not valid UTF-8") || !strings.Contains(got, "ok") {
			t.Errorf("binary output = %q", got)
		}
	})
	t.Run("timeout kills grandchildren", func(t *testing.T) {
		res := p.Call("run", map[string]any{"command": "sleep 100 & echo $!; wait", "timeout_ms": 300})
		got := res.Text()
		if !res.IsError || !strings.Contains(got, "timed out") || !strings.Contains(got, "Killed") {
			t.Fatalf("run with timeout = %q", got)
		}
		lines := strings.Split(strings.TrimSpace(got), "\n")
		pid, err := strconv.Atoi(lines[len(lines)-1])
		if err != nil {
			t.Fatalf("no pid in %q", got)
		}
		waitGone(t, pid)
	})
	t.Run("timeout above the maximum", func(t *testing.T) {
		res := p.Call("run", map[string]any{"command": "true", "timeout_ms": 700000})
		if !res.IsError || !strings.Contains(res.Text(), "maximum") {
			t.Errorf("timeout 700000 = %q", res.Text())
		}
	})
	t.Run("progress lines", func(t *testing.T) {
		var msgs []string
		_, err := p.CallContext(t.Context(), "run", map[string]any{"command": "echo a; echo b"}, func(pr sdktest.Progress) {
			msgs = append(msgs, pr.Message)
		})
		if err != nil || strings.Join(msgs, "\n") != "a\nb" {
			t.Errorf("progress = %q, %v; want the lines a and b", msgs, err)
		}
	})
	t.Run("cancel kills the tree", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		pids := make(chan int, 1)
		go func() {
			_, _ = p.CallContext(ctx, "run", map[string]any{"command": "sleep 100 & echo $!; wait"}, func(pr sdktest.Progress) {
				if pid, err := strconv.Atoi(pr.Message); err == nil {
					pids <- pid
				}
			})
		}()
		var pid int
		select {
		case pid = <-pids:
		case <-time.After(10 * time.Second):
			t.Fatal("no pid reported")
		}
		cancel()
		waitGone(t, pid)
	})
	t.Run("permission patterns", func(t *testing.T) {
		pats := p.PermissionPatterns("run", map[string]any{"command": "ls && rm -rf ~"})
		if strings.Join(pats, ",") != "ls,rm" {
			t.Errorf("PermissionPattern(ls && rm) = %v", pats)
		}
	})
}

func TestJobs(t *testing.T) {
	p := sdktest.StartInProcess(t, bash.New())
	started := p.Call("start", map[string]any{"command": "for i in 1 2 3; do echo line$i; sleep 0.1; done"}).Text()
	if !strings.Contains(started, "j1") {
		t.Fatalf("start = %q", started)
	}
	var out strings.Builder
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		got := p.Call("output", map[string]any{"job": "j1"}).Text()
		body, footer, _ := strings.Cut(got, "\n[job j1 ")
		out.WriteString(body)
		if strings.Contains(footer, "exited with code 0") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out.String() != "line1\nline2\nline3\n" {
		t.Errorf("job output read piecewise = %q, want each line once", out.String())
	}
	if got := p.Call("output", map[string]any{"job": "j1", "offset": 6, "limit": 5}).Text(); !strings.HasPrefix(got, "line2") {
		t.Errorf("output offset 6 limit 5 = %q", got)
	}

	p.Call("start", map[string]any{"command": "sleep 100 & echo $!; wait"})
	var pid int
	for time.Now().Before(deadline) && pid == 0 {
		got := p.Call("output", map[string]any{"job": "j2", "offset": 0}).Text()
		pid, _ = strconv.Atoi(strings.SplitN(got, "\n", 2)[0])
		time.Sleep(20 * time.Millisecond)
	}
	if got := p.Call("jobs", nil).Text(); !strings.Contains(got, "j1\texited with code 0") || !strings.Contains(got, "j2\trunning") {
		t.Errorf("jobs = %q", got)
	}
	if got := p.Call("kill", map[string]any{"job": "j2"}).Text(); !strings.Contains(got, "killed") {
		t.Errorf("kill = %q", got)
	}
	waitGone(t, pid)
	if res := p.Call("output", map[string]any{"job": "j9"}); !res.IsError {
		t.Errorf("output of an unknown job = %q", res.Text())
	}
}

// buildPlugin builds the standalone bash plugin binary.
func buildPlugin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "switchboard-plugin-bash")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/switchboard-plugin-bash").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func peakRSS(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return kb
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

func TestFloodDoesNotGrowMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 200 MB")
	}
	p := sdktest.Start(t, buildPlugin(t), nil)
	// 200 MB of output, as lines and as one endless line.
	for _, cmd := range []string{"yes | head -c 200000000", "head -c 200000000 /dev/zero | tr '\\0' x"} {
		res, err := p.CallContext(t.Context(), "run", map[string]any{"command": cmd}, func(sdktest.Progress) {})
		if err != nil {
			t.Fatal(err)
		}
		got := res.Text()
		if !strings.Contains(got, "characters cut from the middle") {
			t.Fatalf("%s: %q", cmd, got[:min(300, len(got))])
		}
		if m := savedRE.FindStringSubmatch(got); m != nil {
			if st, err := os.Stat(m[1]); err != nil || st.Size() > bash.DefaultMaxSaved || st.Size() < bash.DefaultMaxSaved/2 {
				t.Errorf("%s: saved output %v, %v; want about %d bytes (the cap)", cmd, st, err, bash.DefaultMaxSaved)
			}
			_ = os.Remove(m[1])
		}
	}
	kb := peakRSS(t, p.PID)
	t.Logf("plugin peak RSS after 400 MB of output: %d kB", kb)
	if kb > 100*1024 {
		t.Errorf("plugin peak RSS %d kB after 400 MB of output; want it bounded (< 100 MB)", kb)
	}
}

func TestJobsDieWithThePlugin(t *testing.T) {
	p := sdktest.Start(t, buildPlugin(t), nil)
	p.Call("start", map[string]any{"command": "sleep 100 & echo $!; wait"})
	var pid int
	for i := 0; i < 500 && pid == 0; i++ {
		got := p.Call("output", map[string]any{"job": "j1", "offset": 0}).Text()
		pid, _ = strconv.Atoi(strings.SplitN(got, "\n", 2)[0])
		time.Sleep(20 * time.Millisecond)
	}
	if pid == 0 || !alive(pid) {
		t.Fatalf("job's sleep pid %d not alive", pid)
	}
	p.Stop()
	waitGone(t, pid)
}

// TestSavedOutputCap floods past max_saved_bytes: the saved file stays
// under the cap and keeps the head, a note, and the tail.
func TestSavedOutputCap(t *testing.T) {
	const maxSaved = 100000
	p := sdktest.StartInProcess(t, bash.New(), sdktest.WithSettings(map[string]any{"output_cap": 200, "max_saved_bytes": maxSaved}))
	check := func(t *testing.T, b []byte) {
		t.Helper()
		s := string(b)
		if len(b) > maxSaved || len(b) < maxSaved/2 {
			t.Errorf("saved output is %d bytes, want at most the cap %d (and most of it)", len(b), maxSaved)
		}
		if !strings.HasPrefix(s, "1\n2\n3\n") || !strings.HasSuffix(s, "199999\n200000\n") {
			t.Errorf("saved output lacks its head or tail: %q … %q", s[:min(20, len(s))], s[max(0, len(s)-20):])
		}
		if !regexp.MustCompile(`\[\.\.\. \d+ bytes of output dropped here: saved outputs keep at most 100000 bytes`).MatchString(s) {
			t.Errorf("saved output has no note saying what was dropped")
		}
	}
	t.Run("run", func(t *testing.T) {
		got := p.Call("run", map[string]any{"command": "seq 1 200000"}).Text()
		m := savedRE.FindStringSubmatch(got)
		if m == nil || !strings.Contains(got, "capped at 100000 bytes") {
			t.Fatalf("result does not name the capped saved output: %q", got)
		}
		b, err := os.ReadFile(m[1])
		if err != nil {
			t.Fatal(err)
		}
		check(t, b)
	})
	t.Run("job", func(t *testing.T) {
		p.Call("start", map[string]any{"command": "seq 1 200000"})
		deadline := time.Now().Add(20 * time.Second)
		var got string
		for time.Now().Before(deadline) {
			got = p.Call("output", map[string]any{"job": "j1", "offset": 0, "limit": 1 << 20}).Text()
			if strings.Contains(got, "exited") {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		body, _, ok := strings.Cut(got, "\n[job j1 exited")
		if !ok {
			t.Fatalf("job did not finish: %q", got[max(0, len(got)-200):])
		}
		check(t, []byte(body))
	})
}

// A process a command leaves behind holding its output open (detached with
// setsid, out of reach of the group kill) no longer holds the call: run
// returns once bash has exited and the output has had its short grace,
// not when the process ends (red team round 6: a two-minute timeout held
// for ten). The sleep outlasts the test's own deadline, so a call held
// until it ends fails the test.
func TestRunReturnsWhileADetachedProcessHoldsItsOutput(t *testing.T) {
	p := sdktest.StartInProcess(t, bash.New(), sdktest.WithProjectDir(t.TempDir()))
	res := make(chan string, 1)
	go func() {
		res <- p.Call("run", map[string]any{"command": "setsid sleep 600 & echo started $!", "timeout_ms": 300000}).Text()
	}()
	select {
	case got := <-res:
		if !strings.Contains(got, "started") || strings.Contains(got, "timed out") {
			t.Errorf("run = %q, want the output and no timeout", got)
		}
		var pid int
		if _, err := fmt.Sscanf(got[strings.Index(got, "started"):], "started %d", &pid); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("run is still waiting for the detached process's output")
	}
}

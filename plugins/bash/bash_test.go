package bash_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/plugins/bash"
	"github.com/switchboard-mcp/switchboard/sdk/pluginv1"
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

func TestRun(t *testing.T) {
	t.Setenv("SWITCHBOARD_TEST_SECRET", "hunter2")
	project := t.TempDir()
	p := sdktest.StartInProcess(t, bash.New(), sdktest.WithProjectDir(project),
		sdktest.WithSettings(map[string]any{"output_cap": 200, "env": map[string]string{"EXTRA": "yes"}}))

	t.Run("exit code and output", func(t *testing.T) {
		res := p.Call("run", map[string]any{"command": "echo out; echo err >&2; exit 3"})
		got := sdktest.Text(res)
		if !res.GetIsError() || !strings.Contains(got, "Exit code: 3") || !strings.Contains(got, "out\nerr") {
			t.Errorf("run = %q (isError %v)", got, res.GetIsError())
		}
	})
	t.Run("runs in the project", func(t *testing.T) {
		got := sdktest.Text(p.Call("run", map[string]any{"command": "pwd"}))
		if !strings.Contains(got, project) {
			t.Errorf("pwd = %q, want %s", got, project)
		}
	})
	t.Run("clean environment", func(t *testing.T) {
		got := sdktest.Text(p.Call("run", map[string]any{"command": "env"}))
		if strings.Contains(got, "hunter2") {
			t.Errorf("host secret leaked: %q", got)
		}
		if !strings.Contains(got, "EXTRA=yes") || !strings.Contains(got, "TERM=dumb") {
			t.Errorf("env lacks EXTRA=yes or TERM=dumb: %q", got)
		}
	})
	t.Run("cwd outside refused", func(t *testing.T) {
		res := p.Call("run", map[string]any{"command": "pwd", "cwd": "/"})
		if !res.GetIsError() || !strings.Contains(sdktest.Text(res), "outside") {
			t.Errorf("run cwd=/ = %q", sdktest.Text(res))
		}
	})
	t.Run("output capped in the middle", func(t *testing.T) {
		got := sdktest.Text(p.Call("run", map[string]any{"command": "seq 1 1000"}))
		if !strings.Contains(got, "characters cut from the middle") || !strings.HasPrefix(strings.SplitN(got, "\n", 2)[1], "1\n2\n") || !strings.HasSuffix(got, "1000\n") {
			t.Errorf("capped output = %q", got)
		}
	})
	t.Run("timeout kills grandchildren", func(t *testing.T) {
		res := p.Call("run", map[string]any{"command": "sleep 100 & echo $!; wait", "timeout_ms": 300})
		got := sdktest.Text(res)
		if !res.GetIsError() || !strings.Contains(got, "timed out") {
			t.Fatalf("run with timeout = %q", got)
		}
		lines := strings.Split(strings.TrimSpace(got), "\n")
		pid, err := strconv.Atoi(lines[len(lines)-1])
		if err != nil {
			t.Fatalf("no pid in %q", got)
		}
		deadline := time.Now().Add(5 * time.Second)
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("background sleep %d survived the timeout", pid)
		}
	})
	t.Run("progress lines", func(t *testing.T) {
		var lines []string
		_, err := p.CallContext(t.Context(), "run", map[string]any{"command": "echo a; echo b"}, func(ev *pluginv1.CallToolEvent) {
			if pr := ev.GetProgress(); pr != nil {
				lines = append(lines, pr.GetMessage())
			}
		})
		if err != nil || strings.Join(lines, ",") != "a,b" {
			t.Errorf("progress = %v, %v; want a,b", lines, err)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		_, err := p.CallContext(ctx, "run", map[string]any{"command": "sleep 100"}, nil)
		if err == nil {
			t.Error("cancelled run returned no error")
		}
	})
}

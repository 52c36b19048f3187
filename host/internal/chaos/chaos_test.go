// Package chaos is `make chaos`: callers over stdio and HTTP while the
// plugin behind the host is SIGKILLed, SIGSTOPped and the config reloaded,
// reporting what a user would count. It is not part of `make test`
// (SWITCHBOARD_CHAOS=1 runs it; bounded to a few minutes).
package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

func TestMain(m *testing.M) { fixtures.Main(m) }

// counts are one front end's calls.
type counts struct{ sent, ok, failed, unanswered atomic.Int64 }

func (c *counts) String() string {
	return fmt.Sprintf("sent %d, answered with a result %d, answered with an error %d, unanswered %d",
		c.sent.Load(), c.ok.Load(), c.failed.Load(), c.unanswered.Load())
}

// hammer runs callers until stop, each call bounded so that one that is
// never answered is counted as such.
func hammer(c *client.Client, callers int, stop <-chan struct{}, n *counts) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				n.sent.Add(1)
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				req := mcp.CallToolRequest{}
				req.Params.Name = "fx__echo"
				req.Params.Arguments = map[string]any{"text": strconv.Itoa(k)}
				res, err := c.CallTool(ctx, req)
				switch {
				case ctx.Err() != nil:
					n.unanswered.Add(1)
				case err != nil || res.IsError:
					n.failed.Add(1)
				default:
					n.ok.Add(1)
				}
				cancel()
			}
		}()
	}
	return &wg
}

func rssKB(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	return 0
}

func threads(pid int) int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	return len(ents)
}

// TestChaos is the chaos run. SWITCHBOARD_CHAOS=1 enables it;
// SWITCHBOARD_CHAOS_SECONDS sets its length (default 90).
func TestChaos(t *testing.T) {
	if os.Getenv("SWITCHBOARD_CHAOS") == "" {
		t.Skip("make chaos runs it (SWITCHBOARD_CHAOS=1)")
	}
	secs := 90
	if n, err := strconv.Atoi(os.Getenv("SWITCHBOARD_CHAOS_SECONDS")); err == nil && n > 0 {
		secs = n
	}
	bins := fixtures.Build(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "p"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.hcl")
	body := fmt.Sprintf("project_dir = \"p\"\ndata_dir = \"state\"\nwatch_config = false\nduplicate_call_limit = 0\ncall_timeout = \"5s\"\npermissions { default = \"allow\" }\nplugin \"fx\" {\n  path = %q\n  restart {\n    base_delay = \"100ms\"\n    max_delay = \"1s\"\n    max_attempts = 0\n    health_interval = \"1s\"\n    health_timeout = \"1s\"\n  }\n}\n", bins.TestPlugin)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}

	// Over stdio.
	var host *exec.Cmd
	c, err := client.NewStdioMCPClientWithOptions(bins.Switchboard, nil, []string{"serve", "--config", cfg},
		transport.WithCommandFunc(func(ctx context.Context, command string, _ []string, args []string) (*exec.Cmd, error) {
			host = exec.CommandContext(ctx, command, args...)
			host.Env = append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=error")
			return host, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	init.Params.ClientInfo = mcp.Implementation{Name: "chaos", Version: "1"}
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatal(err)
	}
	hostPID := host.Process.Pid
	time.Sleep(2 * time.Second) // let the host settle before the first RSS reading
	rssBefore, threadsBefore := rssKB(hostPID), threads(hostPID)

	stop := make(chan struct{})
	var stdio counts
	wg := hammer(c, 32, stop, &stdio)

	// The faults, in turn, for the run's length.
	fxPID := func() int {
		out, _ := exec.Command(bins.Switchboard, "status", "--json", "--config", cfg).Output()
		var all []struct {
			Servers []struct {
				Name string
				PID  int
			} `json:"servers"`
		}
		_ = json.Unmarshal(out, &all)
		for _, h := range all {
			for _, s := range h.Servers {
				if s.Name == "fx" {
					return s.PID
				}
			}
		}
		return 0
	}
	faults := map[string]int{}
	deadline := time.Now().Add(time.Duration(secs) * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		switch i % 3 {
		case 0:
			if pid := fxPID(); pid > 0 && syscall.Kill(pid, syscall.SIGKILL) == nil {
				faults["SIGKILL"]++
			}
		case 1:
			if pid := fxPID(); pid > 0 && syscall.Kill(pid, syscall.SIGSTOP) == nil {
				faults["SIGSTOP"]++
				time.Sleep(3 * time.Second)
				_ = syscall.Kill(pid, syscall.SIGCONT)
			}
		case 2:
			if exec.Command(bins.Switchboard, "reload", "--config", cfg).Run() == nil {
				faults["reload"]++
			}
		}
		time.Sleep(2 * time.Second)
	}
	close(stop)
	wg.Wait()
	time.Sleep(3 * time.Second) // settle: the last restarts
	rssAfter, threadsAfter := rssKB(hostPID), threads(hostPID)
	_ = c.Close()
	_ = host.Wait()
	time.Sleep(time.Second)
	left := fixtures.ProcessesMatching(bins.TestPlugin)

	report := fmt.Sprintf("chaos over stdio, %d s, faults %v:\n  calls: %s\n  host RSS %d kB before, %d kB after; threads %d before, %d after\n  processes left after the host exited: %d",
		secs, faults, stdio.String(), rssBefore, rssAfter, threadsBefore, threadsAfter, len(left))
	fmt.Println(report)
	w := bufio.NewWriter(os.Stdout)
	_ = w.Flush()
	if stdio.unanswered.Load() != 0 {
		t.Errorf("%d calls were never answered", stdio.unanswered.Load())
	}
	if len(left) != 0 {
		t.Errorf("processes left: %v", left)
		fixtures.Kill(left)
	}
	if rssAfter > 2*rssBefore+50*1024 {
		t.Errorf("host RSS grew from %d to %d kB (bound: twice, plus 50 MB)", rssBefore, rssAfter)
	}
	if stdio.ok.Load() == 0 {
		t.Error("no call succeeded at all")
	}
}

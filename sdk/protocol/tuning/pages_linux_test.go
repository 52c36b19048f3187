//go:build linux

package tuning_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/tuning"
)

// envPagesChild makes the test binary a process that tunes itself as a
// plugin does and then waits to be killed.
const envPagesChild = "TUNING_TEST_PLUGIN_PAGES"

func init() {
	if os.Getenv(envPagesChild) == "" {
		return
	}
	tuning.Plugin(hclog.NewNullLogger(), false)
	fmt.Println("ready")
	time.Sleep(time.Minute)
	os.Exit(0)
}

// binaryKB reads how much of a process's binary is resident: the Rss of
// its read-only mappings of exe (the writable data is not released).
func binaryKB(t *testing.T, pid int, exe string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		t.Fatal(err)
	}
	kb, ours := 0, false
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && len(f[1]) == 4:
			ours = len(f) >= 6 && f[5] == exe && !strings.Contains(f[1], "w")
		case ours && len(f) == 3 && f[0] == "Rss:":
			n, _ := strconv.Atoi(f[1])
			kb += n
		}
	}
	return kb
}

// A plugin process gives back the pages of its binary that starting
// touched, SettleDelay after it starts (as the host does). Not all of
// them stay away: the kernel maps a few back, in blocks, as the process
// goes on (the release's own code, the runtime's timers).
func TestPluginReleasesStartupPages(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envPagesChild+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("child said %q, %v", line, err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	started := binaryKB(t, cmd.Process.Pid, exe)
	if started == 0 {
		t.Fatalf("no resident mapping of %s in the child", exe)
	}
	deadline := time.Now().Add(20 * tuning.SettleDelay)
	for {
		now := binaryKB(t, cmd.Process.Pid, exe)
		if now <= started*3/4 {
			t.Logf("resident pages of the binary: %d kB at start, %d kB after", started, now)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("resident pages of the binary: %d kB at start, still %d kB after %s", started, now, 20*tuning.SettleDelay)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

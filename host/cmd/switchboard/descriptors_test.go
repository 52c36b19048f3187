package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

// A descriptor whoever started the host left open without close-on-exec
// (here a file opened read-write) stays with the host: no server, sandbox
// helper or command started by a tool holds it (red team round 6 found the
// host's stray descriptors in every sandbox's helper). The control: the
// host itself holds it, so it was handed to the host.
func TestHostsStrayDescriptorsStayWithTheHost(t *testing.T) {
	e := setupWith(t, `permissions { default = "allow" }`)
	stray := filepath.Join(t.TempDir(), "stray-secret")
	f, err := os.OpenFile(stray, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, cmd := mcpClient(t, e, func(cmd *exec.Cmd) {
		cmd.ExtraFiles = []*os.File{f} // fd 3 of the host, inheritable
	})
	initialize(t, c)
	// A command running in bash's sandbox while the descriptors are read.
	res, err := callTool(t.Context(), c, "bash__start", map[string]any{"command": "sleep 30"}, nil)
	if err != nil || res.IsError {
		t.Fatalf("bash.start: %v %v", err, res)
	}
	holders := func(pid int) []string {
		var out []string
		entries, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, d := range entries {
			if to, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, d.Name())); err == nil && to == stray {
				comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
				out = append(out, fmt.Sprintf("%d (%s) fd %s", pid, strings.TrimSpace(string(comm)), d.Name()))
			}
		}
		return out
	}
	host := cmd.Process.Pid
	if len(holders(host)) == 0 {
		t.Fatalf("control: the host does not hold the descriptor it was given")
	}
	kids := fixtures.Descendants(host)
	if len(kids) < 6 {
		t.Fatalf("only %d processes under the host; the servers are not up", len(kids))
	}
	var leaked []string
	for _, pid := range kids {
		leaked = append(leaked, holders(pid)...)
	}
	if len(leaked) > 0 {
		t.Errorf("processes the host started hold its stray descriptor: %v", leaked)
	}
}

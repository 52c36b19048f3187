//go:build linux

package external

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/host/internal/sandbox"
	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

// parentOf is the parent of process pid.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	ppid := fixtures.ParentOf(pid)
	if ppid == 0 {
		t.Fatalf("process %d is gone", pid)
	}
	return ppid
}

// A stdio server confined in namespaces is started by the sandbox's
// spawner, as plugins are: the host never forks itself into new
// namespaces (a full copy of its page tables per start). It answers, its
// stderr reaches the host's log, its exit is heard, and Close leaves none
// of its processes behind.
func TestConfinedStdioServerStartsThroughTheSpawner(t *testing.T) {
	bins := fixtures.Build(t)
	out := &fixtures.Buffer{}
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: out})
	box := &sandbox.Sandbox{Name: "ext", Helper: bins.Sandbox, Policy: sandbox.Policy{Mode: sandbox.ModeRequired}.Clean(os.Getenv("HOME"))}
	s, err := Connect(t.Context(), Spec{Name: "ext", Command: bins.MCPServer, Timeout: 30 * time.Second, Sandbox: box}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(t.Context()) })
	helper := s.PID()
	spawner := parentOf(t, helper)
	if spawner == os.Getpid() {
		t.Fatalf("the server's sandbox helper %d is the host's own child: the host forked itself into its namespaces", helper)
	}
	// The spawner's working half runs in a user namespace its first half,
	// the host's child, started it in.
	if parentOf(t, parentOf(t, spawner)) != os.Getpid() {
		t.Fatalf("the helper's parent %d is not the spawner the host started", spawner)
	}
	if cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(spawner) + "/cmdline"); !strings.Contains(string(cmdline), "switchboard-sandbox") {
		t.Fatalf("the helper's parent %d is not the sandbox spawner (command line %q)", spawner, cmdline)
	}
	if res, err := s.Call(t.Context(), "echo", []byte(`{"text":"confined"}`), nil); err != nil || res.IsError || !strings.Contains(res.Content[0].Text, "confined") {
		t.Fatalf("echo: %v, %v", res, err)
	}
	if res, err := s.Call(t.Context(), "fault", []byte(`{"kind":"stderr","mb":1}`), nil); err != nil || res.IsError {
		t.Fatalf("fault: %v, %v", res, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), `{"jsonrpc":"2.0","id":`) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(out.String(), `{"jsonrpc":"2.0","id":`) {
		t.Errorf("what the server wrote on stderr is not in the host's log: %.500q", out.String())
	}

	// Its exit is heard (the host is not its parent: the spawner tells).
	inside := append(fixtures.Descendants(helper), helper)
	fixtures.Kill(fixtures.Descendants(helper))
	deadline = time.Now().Add(10 * time.Second)
	for !s.Exited() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !s.Exited() {
		t.Fatal("the server was killed and the host did not notice")
	}
	_ = s.Close(t.Context())
	if alive := fixtures.WaitGone(inside, 5*time.Second); len(alive) > 0 {
		t.Errorf("processes of the server outlived it: %v", alive)
	}
}

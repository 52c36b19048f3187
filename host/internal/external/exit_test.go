package external

import (
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

// A stdio server that dies while a process it started keeps its output
// open is noticed at once: its output does not end, its process does.
func TestStdioServerExitHeardWhileItsOutputStaysOpen(t *testing.T) {
	s, err := Connect(t.Context(), Spec{Name: "ext", Command: "sh", Args: []string{"-c", "sleep 60 & exec " + fixtures.Build(t).MCPServer}, Timeout: 30 * time.Second}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(t.Context()) }) // ends the sleep too: its process group
	if s.Exited() {
		t.Fatal("exited before it was killed")
	}
	if err := syscall.Kill(s.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the server was killed and the host did not notice (its output is still open in its child)")
	}
}

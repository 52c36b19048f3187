package external

import (
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

// Calls to a stdio server make no system call through the runtime's
// bookkeeping in the host: its pipes are read and written quietly
// (sdk/protocol/quietio), as a plugin's connection is.
func TestStdioServerCallsMakeNoSystemCalls(t *testing.T) {
	s, err := Connect(t.Context(), Spec{Name: "ext", Command: fixtures.Build(t).MCPServer, Timeout: 30 * time.Second}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(t.Context()) })
	echo := func() {
		if res, err := s.Call(t.Context(), "echo", []byte(`{"text":"ping"}`), nil); err != nil || res.IsError {
			t.Fatalf("echo: %v, %v", res, err)
		}
	}
	echo()
	const n = 200
	fixtures.QuietCalls(t, "calls to a stdio server", n, func() {
		for range n {
			echo()
		}
	})
}

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// rawCall sends tools/call for name as a raw request and returns the
// result as JSON values (numbers kept as written).
func rawCall(t *testing.T, c *client.Client, name string) map[string]any {
	t.Helper()
	resp, err := c.GetTransport().SendRequest(t.Context(), transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId("raw-" + name), Method: "tools/call",
		Params: map[string]any{"name": name, "arguments": map[string]any{}},
	})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	if resp.Error != nil {
		t.Fatalf("tools/call %s: %s", name, resp.Error.Message)
	}
	dec := json.NewDecoder(bytes.NewReader(resp.Result))
	dec.UseNumber()
	var res map[string]any
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("tools/call %s: result %s: %v", name, resp.Result, err)
	}
	return res
}

// An external server's results reach a client through the host unchanged:
// content annotations, each item's _meta, content types the host does not
// know, the result's _meta and structured content (big numbers exact), over
// stdio and over HTTP.
func TestExternalResultsPassThrough(t *testing.T) {
	bins := setup(t).bins
	url := httpMCPServer(t, bins.MCPServer, filepath.Join(t.TempDir(), "cancelled"))
	e := setupWith(t, fmt.Sprintf(`
external "ext" {
  command = %q
}
external "remote" {
  url = %q
}`, bins.MCPServer, url))

	// What the server says, asked directly.
	direct, err := client.NewStdioMCPClient(bins.MCPServer, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = direct.Close() })
	initialize(t, direct)
	want := rawCall(t, direct, "rich")
	if _, ok := want["_meta"]; !ok {
		t.Fatalf("the fixture's result has no _meta: %v", want)
	}

	c, _ := mcpClient(t, e)
	initialize(t, c)
	for _, name := range []string{"ext__rich", "remote__rich"} {
		got := rawCall(t, c, name)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s through the host differs from the server's own answer (-server +host):\n%s", name, diff)
		}
	}
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// httpMCPServer runs the fixture MCP server over streamable HTTP on
// 127.0.0.1 and returns its URL.
func httpMCPServer(t *testing.T, bin, marker string, flag ...string) string {
	t.Helper()
	mode := "--http"
	if len(flag) > 0 {
		mode = flag[0]
	}
	cmd := exec.Command(bin, mode, "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "MCP_CANCEL_MARKER="+marker)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("fixture HTTP server: %v", err)
	}
	return strings.TrimSpace(line)
}

func waitFile(path string, d time.Duration) bool {
	return eventually(d, func() bool {
		_, err := os.Stat(path)
		return err == nil
	})
}

func TestExternalServers(t *testing.T) {
	dir := t.TempDir()
	stdioMarker, httpMarker := filepath.Join(dir, "stdio-cancelled"), filepath.Join(dir, "http-cancelled")
	bins := setup(t).bins
	url := httpMCPServer(t, bins.MCPServer, httpMarker)
	sseURL := httpMCPServer(t, bins.MCPServer, filepath.Join(dir, "sse-cancelled"), "--sse")
	e := setupWith(t, fmt.Sprintf(`
external "ext" {
  command = %q
  env     = { MCP_CANCEL_MARKER = %q }
  sandbox { write = [%q] }   # where the fixture leaves its cancellation marker
}
external "remote" {
  url = %q
}
external "oldsse" {
  url = %q
}`, bins.MCPServer, stdioMarker, dir, url, sseURL))
	c, _ := mcpClient(t, e)
	var mu sync.Mutex
	progress := map[string][]string{}
	changes := 0
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		mu.Lock()
		defer mu.Unlock()
		switch n.Method {
		case "notifications/progress":
			tok := fmt.Sprint(n.Params.AdditionalFields["progressToken"])
			progress[tok] = append(progress[tok], fmt.Sprint(n.Params.AdditionalFields["message"]))
		case "notifications/tools/list_changed":
			changes++
		}
	})
	initialize(t, c)

	tools, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var echo *mcp.Tool
	for i, tl := range tools.Tools {
		if tl.Name == "ext__echo" {
			echo = &tools.Tools[i]
		}
	}
	if echo == nil {
		t.Fatal("ext__echo is not listed")
	}
	// The raw request shows the schema exactly as the server sent it.
	raw, err := c.GetTransport().SendRequest(t.Context(), rawList())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"$schema":"https://json-schema.org/draft/2020-12/schema"`, `"description":"What to echo."`, `"anyOf":[{"type":"integer"},{"type":"null"}]`, `"readOnlyHint":true`} {
		if !strings.Contains(string(raw.Result), want) {
			t.Errorf("tools/list lost %s from the external schema", want)
		}
	}

	for _, srv := range []string{"ext", "remote"} {
		t.Run(srv, func(t *testing.T) {
			if got, isErr := mustCall(t, c, srv+"__echo", map[string]any{"text": "hi " + srv}); isErr || got != "hi "+srv {
				t.Errorf("%s__echo = %q", srv, got)
			}
			tok := "tok-" + srv
			res, err := callTool(t.Context(), c, srv+"__slow", map[string]any{"steps": 3}, tok)
			if err != nil || resultText(res) != "did 3 steps" {
				t.Fatalf("%s__slow = %v, %v", srv, res, err)
			}
			eventually(5*time.Second, func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(progress[tok]) >= 3
			})
			mu.Lock()
			got := strings.Join(progress[tok], ",")
			mu.Unlock()
			if got != "step 1,step 2,step 3" {
				t.Errorf("%s progress = %q", srv, got)
			}
			// Cancel once the call is running on the server.
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			cancelTok := "cancel-" + srv
			go func() {
				defer close(done)
				_, _ = callTool(ctx, c, srv+"__slow", map[string]any{"steps": 1000}, cancelTok)
			}()
			waitFor(t, srv+"__slow's first progress", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(progress[cancelTok]) > 0
			})
			cancel()
			<-done
			marker := stdioMarker
			if srv == "remote" {
				marker = httpMarker
			}
			if !waitFile(marker, 10*time.Second) {
				t.Errorf("%s never saw the cancellation", srv)
			}
		})
	}

	if got, isErr := mustCall(t, c, "oldsse__echo", map[string]any{"text": "over sse"}); isErr || got != "over sse" {
		t.Errorf("oldsse__echo (SSE fallback) = %q", got)
	}

	var all []hostStatus
	out, _, _ := run(t, e, "status", "--json", "--config", e.config)
	if err := json.Unmarshal([]byte(out), &all); err != nil || len(all) != 1 {
		t.Fatalf("status = %q", out)
	}
	kinds := map[string]string{}
	for _, s := range all[0].Servers {
		kinds[s.Name] = s.Status
	}
	if kinds["ext"] != "ready" || kinds["remote"] != "ready" {
		t.Errorf("status of external servers = %v", kinds)
	}

	// Connect and disconnect at runtime.
	if out, errOut, code := run(t, e, "connect", "--config", e.config, "rt", "--", bins.MCPServer); code != 0 {
		t.Fatalf("connect = %d %q %q", code, out, errOut)
	}
	if got, isErr := mustCall(t, c, "rt__echo", map[string]any{"text": "runtime"}); isErr || got != "runtime" {
		t.Errorf("rt__echo = %q", got)
	}
	if out, errOut, code := run(t, e, "disconnect", "--config", e.config, "rt"); code != 0 {
		t.Fatalf("disconnect = %d %q %q", code, out, errOut)
	}
	if _, err := callTool(t.Context(), c, "rt__echo", map[string]any{"text": "gone"}, nil); err == nil {
		t.Error("rt__echo still answers after disconnect")
	}
	if !eventually(5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return changes >= 2
	}) {
		t.Errorf("saw %d list_changed for connect and disconnect, want 2", changes)
	}
}

func rawList() transport.JSONRPCRequest {
	return transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId("raw-list"), Method: "tools/list"}
}

// TestExternalServerIsSupervised: an external stdio server that dies is
// restarted like a plugin.
func TestExternalServerIsSupervised(t *testing.T) {
	bins := setup(t).bins
	e := setupWith(t, fmt.Sprintf(`
restart {
  base_delay = "200ms"
}
external "ext" {
  command = %q
}`, bins.MCPServer))
	c, _ := mcpClient(t, e)
	initialize(t, c)
	before := readyPIDs(t, e)["ext"]
	if before == 0 {
		t.Fatal("ext has no pid")
	}
	if err := syscall.Kill(before, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !eventually(15*time.Second, func() bool {
		now := readyPIDs(t, e)["ext"]
		return now != 0 && now != before
	}) {
		t.Fatal("the external server was not restarted")
	}
	if got, isErr := mustCall(t, c, "ext__echo", map[string]any{"text": "back"}); isErr || got != "back" {
		t.Errorf("ext__echo after restart = %q", got)
	}
}

package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

func TestServeHTTP(t *testing.T) {
	e := setup(t)
	cmd := exec.Command(e.bins.Switchboard, "serve", "--config", e.config, "--http", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=warn")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	url := ""
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "switchboard: serving MCP at "); ok {
			url = u
			break
		}
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("no URL announced (got %q)", url)
	}
	go func() {
		for sc.Scan() {
		}
	}()

	c, err := client.NewStreamableHttpClient(url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var progress []string
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" {
			mu.Lock()
			progress = append(progress, fmt.Sprint(n.Params.AdditionalFields["message"]))
			mu.Unlock()
		}
	})
	initialize(t, c)
	tools, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil || len(tools.Tools) < 10 {
		t.Fatalf("ListTools over HTTP = %d tools, %v", len(tools.Tools), err)
	}
	if got, isErr := mustCall(t, c, "hello__greet", map[string]any{"name": "Http"}); isErr || !strings.Contains(got, "Http") {
		t.Errorf("hello__greet over HTTP = %q", got)
	}
	res, err := callTool(t.Context(), c, "fx__progress", map[string]any{"steps": 3}, "http-tok")
	if err != nil || resultText(res) != "done 3 steps" {
		t.Fatalf("fx__progress over HTTP = %v, %v", res, err)
	}
	mu.Lock()
	gotProgress := len(progress)
	mu.Unlock()
	if gotProgress == 0 {
		t.Error("no progress notifications over HTTP")
	}

	// A page of another origin is refused; loopback origins are fine.
	for origin, want := range map[string]int{"http://evil.example": http.StatusForbidden, "null": http.StatusForbidden} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Origin", origin)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Origin %s: status %d, want %d", origin, resp.StatusCode, want)
		}
	}

	// SIGTERM stops the host and every plugin.
	pids := fixtures.Descendants(cmd.Process.Pid)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("serve --http did not stop on SIGTERM")
	}
	if alive := fixtures.WaitGone(pids, 10*time.Second); len(alive) > 0 {
		t.Errorf("plugins alive after SIGTERM: %v", alive)
	}
}

func TestServeHTTPRefusesRemoteBind(t *testing.T) {
	e := setup(t)
	_, errOut, code := run(t, e, "serve", "--config", e.config, "--http", "0.0.0.0:0")
	if code != 2 || !strings.Contains(errOut, "no token or issuer") {
		t.Errorf("serve --http 0.0.0.0:0 = %d %q", code, errOut)
	}
}

// serve --http logs that it serves over HTTP, with its URL, and never that
// it serves over stdio (it did: issue 16).
func TestServeHTTPLogsHTTP(t *testing.T) {
	e := setup(t)
	cmd := exec.Command(e.bins.Switchboard, "serve", "--config", e.config, "--http", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=info")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	var lines []string
	url := ""
	for url == "" && sc.Scan() {
		lines = append(lines, sc.Text())
		if u, ok := strings.CutPrefix(sc.Text(), "switchboard: serving MCP at "); ok {
			url = u
		}
	}
	if url == "" {
		t.Fatalf("no URL announced; stderr:\n%s", strings.Join(lines, "\n"))
	}
	go func() {
		for sc.Scan() {
		}
	}()
	log := strings.Join(lines, "\n")
	if !strings.Contains(log, "serving MCP over HTTP at "+url) {
		t.Errorf("no log line %q; stderr:\n%s", "serving MCP over HTTP at "+url, log)
	}
	if strings.Contains(log, "over stdio") {
		t.Errorf("serve --http logged that it serves over stdio; stderr:\n%s", log)
	}
}

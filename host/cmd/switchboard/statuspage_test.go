package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium is the browser the page test drives (Debian's chromium
// package; .ci/run installs it).
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("SWITCHBOARD_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed; .ci/run installs it (apt-get install chromium)")
	}
	t.Skip("chromium is not installed (apt-get install chromium); the status page test needs a browser")
	return ""
}

// TestStatusPageInABrowser: headless Chromium opens the HTTP front end's
// status page; a call and a refusal made through MCP appear on it (pushed
// over server-sent events, no reload), beside the servers and their state.
// A screenshot is saved under the test's temp dir (and in
// $SWITCHBOARD_SCREENSHOT_DIR when set, for the README).
func TestStatusPageInABrowser(t *testing.T) {
	browser := chromium(t)
	e := setupWith(t, `permissions {
  default = "allow"
  deny    = ["fx.echo"]
}`)
	url := startServeHTTP(t, e)
	page := strings.TrimSuffix(url, "/mcp") + "/status"

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.WindowSize(1200, 900), chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelT()

	step := func(what string, a chromedp.Action[chromedp.Void]) {
		t.Helper()
		if _, err := chromedp.Run(ctx, a); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.TextContent(sel))
		if err != nil {
			t.Fatalf("reading %s: %v", sel, err)
		}
		return s
	}
	step("opening "+page, chromedp.Navigate(page))
	step("waiting for the servers", chromedp.WaitVisible("#servers tr"))
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("live").textContent === "live"`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the page never went live: %v", err)
	}
	servers := text("#servers")
	for _, want := range []string{"filesystem", "ready", "hello", "confined"} {
		if !strings.Contains(servers, want) {
			t.Errorf("the servers table lacks %q:\n%s", want, servers)
		}
	}

	c := newHTTPClient(t, url)
	initialize(t, c)
	start := time.Now()
	if _, err := callTool(t.Context(), c, "hello__greet", map[string]any{"name": "page"}, nil); err != nil {
		t.Fatal(err)
	}
	_, _ = callTool(t.Context(), c, "fx__echo", map[string]any{"text": "no"}, nil) // denied
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("calls").textContent.includes("hello.greet") && document.getElementById("refusals").textContent.includes("fx.echo")`,
		chromedp.WithPollingTimeout(10*time.Second), chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		t.Fatalf("the calls did not appear on the page: %v\n%s", err, text("#calls"))
	}
	t.Logf("the calls appeared on the page %s after the first was made", time.Since(start).Round(time.Millisecond))
	calls, refusals := text("#calls"), text("#refusals")
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(calls, "ok") {
		t.Errorf("the call's outcome is not on the page:\n%s", calls)
	}
	if !strings.Contains(refusals, "deny") || !strings.Contains(refusals, "fx.echo") {
		t.Errorf("the refusal and its rule are not on the page:\n%s", refusals)
	}
	shot := filepath.Join(t.TempDir(), "status.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("SWITCHBOARD_SCREENSHOT_DIR"); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, "status-page.png"), png, 0o644)
	}

	// The page refuses another origin, like /mcp.
	req, _ := http.NewRequest("GET", page+"/snapshot", nil)
	req.Header.Set("Origin", "http://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("status page from another origin = %s, want 403", resp.Status)
	}
}

// TestUIBesideAStdioHost: `switchboard ui` serves the page of a stdio
// host through its control socket; a call made over stdio shows up.
func TestUIBesideAStdioHost(t *testing.T) {
	e := setup(t)
	c, _ := mcpClient(t, e)
	initialize(t, c)
	ui := exec.Command(e.bins.Switchboard, "ui", "--listen", "127.0.0.1:0", "--config", e.config)
	stderr, err := ui.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ui.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ui.Process.Kill(); _ = ui.Wait() })
	sc := bufio.NewScanner(stderr)
	page := ""
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "switchboard: status page at "); ok {
			page = u
			break
		}
	}
	if page == "" {
		t.Fatal("ui announced no address")
	}
	if _, err := callTool(t.Context(), c, "hello__greet", map[string]any{"name": "ui"}, nil); err != nil {
		t.Fatal(err)
	}
	if !eventually(10*time.Second, func() bool {
		resp, err := http.Get(page + "/snapshot")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var s struct {
			Calls   []struct{ Tool, Outcome string }
			Servers []struct{ Name, Status string }
		}
		if json.NewDecoder(resp.Body).Decode(&s) != nil {
			return false
		}
		for _, c := range s.Calls {
			if c.Tool == "hello.greet" && c.Outcome == "ok" && len(s.Servers) >= servers {
				return true
			}
		}
		return false
	}) {
		t.Error("the stdio host's call never showed on the ui's page")
	}
	resp, err := http.Get(page)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("GET %s = %s %s", page, resp.Status, resp.Header.Get("Content-Type"))
	}
}

package frontend

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// httpClient starts an mcp-go client of the 2025-11-25 era (a session)
// whose progress notifications add to started.
func httpClient(t *testing.T, url string, started *atomic.Int64) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithLegacyProtocolOnly())
	t.Cleanup(func() { _ = c.Close() })
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationProgress) {
			started.Add(1)
		}
	})
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "inflight-test", Version: "1"}
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatal(err)
	}
	return c
}

func sleepCall(ms int, token string) mcp.CallToolRequest {
	req := mcp.CallToolRequest{}
	req.Params.Name = "fx__sleep"
	req.Params.Arguments = map[string]any{"ms": ms}
	if token != "" {
		req.Params.Meta = &mcp.Meta{ProgressToken: token}
	}
	return req
}

// Over HTTP, requests in flight are bounded per session and in all: with
// a session's bound (4) and the total (6) taken by slow calls, one more
// call on that session is refused naming the session's bound, one on
// another session naming the total (429 with Retry-After and a JSON-RPC
// error for the request's id, on the wire); notifications still pass;
// every call let in is answered, and once they are, calls are let in
// again.
func TestHTTPInFlightBound(t *testing.T) {
	reg, _ := fixtureRegistry(t, nil)
	url, _ := serveRegistryHTTP(t, reg, HTTPOptions{MaxInFlight: 4, MaxInFlightTotal: 6})
	var started atomic.Int64
	a := httpClient(t, url, &started)
	b := httpClient(t, url, &started)

	// The slow calls: 4 on a, 2 on b. Each reports progress once it has
	// reached the plugin, so it is in flight.
	const slowMS = 8000
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i, c := range []*client.Client{a, a, a, a, b, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.CallTool(t.Context(), sleepCall(slowMS, "slow-"+string(rune('a'+i))))
			if err == nil && res.IsError {
				err = io.ErrUnexpectedEOF
			}
			errs <- err
		}()
	}
	deadline := time.Now().Add(time.Minute)
	for started.Load() < 6 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of the 6 slow calls reached the plugin", started.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Past the session's bound.
	_, err := a.CallTool(t.Context(), sleepCall(1, ""))
	if err == nil || !strings.Contains(err.Error(), "this session has 4 requests in flight") || !strings.Contains(err.Error(), "--max-inflight") {
		t.Errorf("a 5th call on a session with 4 in flight: err = %v, want a refusal naming the session's bound", err)
	}
	// Past the total, on the wire: a new session with nothing in flight.
	h := newRawHTTP(t, url)
	id := h.initialize()
	resp := h.do(http.MethodPost, `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"fx__sleep","arguments":{"ms":1}}}`, legacyHeader(id))
	body, _ := io.ReadAll(resp.Body)
	var rpc struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
		json.Unmarshal(body, &rpc) != nil || string(rpc.ID) != "42" || rpc.Error.Code != CodeTooManyInFlight ||
		!strings.Contains(rpc.Error.Message, "6 requests in flight") || !strings.Contains(rpc.Error.Message, "--max-inflight-total") {
		t.Errorf("a call with 6 in flight in all: %s, Retry-After %q, body %s; want 429, Retry-After and a JSON-RPC error naming the total", resp.Status, resp.Header.Get("Retry-After"), body)
	}
	// Notifications are not requests: they pass at the bound.
	if got := h.status(http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}`, legacyHeader(id)); got != http.StatusAccepted {
		t.Errorf("a notification at the bound: HTTP %d, want 202", got)
	}

	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a slow call let in: %v, want its result", err)
		}
	}
	// The places are given back.
	for _, c := range []*client.Client{a, b} {
		if res, err := c.CallTool(t.Context(), sleepCall(1, "")); err != nil || res.IsError {
			t.Errorf("a call once the slow ones were answered: %v, %v", res, err)
		}
	}
}

// TestHTTPEventStreamsBounded: a session may hold MaxStreamsPerSession GET
// event streams; one more is refused (429) without being opened, and a
// place is free again once a stream closes. (15,000 streams on one session
// took the host to 767 MB before this bound, found from outside.)
func TestHTTPEventStreamsBounded(t *testing.T) {
	reg, _ := fixtureRegistry(t, nil)
	url, _ := serveRegistryHTTP(t, reg, HTTPOptions{})
	h := newRawHTTP(t, url)
	id := h.initialize()
	var open []*http.Response
	for range MaxStreamsPerSession {
		resp := h.do(http.MethodGet, "", legacyHeader(id))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET stream %d: %s", len(open)+1, resp.Status)
		}
		open = append(open, resp)
	}
	resp := h.do(http.MethodGet, "", legacyHeader(id))
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "event streams (GET) open") {
		t.Errorf("GET stream %d: %s %q, want 429 naming the bound", MaxStreamsPerSession+1, resp.Status, body)
	}
	// Another session is not affected.
	if got := h.status(http.MethodGet, "", legacyHeader(h.initialize())); got != http.StatusOK {
		t.Errorf("another session's first GET stream: %d, want 200", got)
	}
	open[0].Body.Close()
	if !eventuallyOK(10*time.Second, func() bool {
		return h.status(http.MethodGet, "", legacyHeader(id)) == http.StatusOK
	}) {
		t.Error("a closed stream's place was not given back")
	}
	for _, r := range open[1:] {
		r.Body.Close()
	}
}

func eventuallyOK(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}

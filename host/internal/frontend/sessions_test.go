package frontend

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
)

// rawHTTP is a raw streamable HTTP client: it shows what a client library
// hides (status codes, a response that should not be there).
type rawHTTP struct {
	t   *testing.T
	url string
	c   *http.Client
}

func newRawHTTP(t *testing.T, url string) *rawHTTP {
	c := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(c.CloseIdleConnections)
	return &rawHTTP{t: t, url: url, c: c}
}

// do sends one request and returns the response with its body open.
func (h *rawHTTP) do(method, body string, header map[string]string) *http.Response {
	h.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(h.t.Context(), method, h.url, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := h.c.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// status sends one request and returns its status, reading the body.
func (h *rawHTTP) status(method, body string, header map[string]string) int {
	h.t.Helper()
	resp := h.do(method, body, header)
	if method != http.MethodGet {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	resp.Body.Close() // a GET that got through is an endless stream
	return resp.StatusCode
}

// initialize starts a legacy session and returns its ID.
func (h *rawHTTP) initialize() string {
	h.t.Helper()
	resp := h.do(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, nil)
	_, _ = io.Copy(io.Discard, resp.Body)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		h.t.Fatalf("initialize: %s, session %q", resp.Status, id)
	}
	if got := h.status(http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, legacyHeader(id)); got != http.StatusAccepted {
		h.t.Fatalf("notifications/initialized: %d", got)
	}
	return id
}

func legacyHeader(session string) map[string]string {
	h := map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	if session != "" {
		h["Mcp-Session-Id"] = session
	}
	return h
}

const listTools = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`

// Sessions of the 2025-11-25 era are enforced as the spec says: a request
// without Mcp-Session-Id gets 400, one with an ID the host did not mint or
// has ended gets 404, and DELETE ends the session, its GET stream included.
// (mcp-go alone accepted any well-formed ID, and DELETE changed nothing.) The 2026-07-28 era has
// no sessions: its requests need no ID.
func TestHTTPSessions(t *testing.T) {
	url, _ := serveHTTP(t, HTTPOptions{})
	h := newRawHTTP(t, url)
	id := h.initialize()
	forged := "mcp-session-0b7e9f8e-3c1d-4e57-9d43-4a8a3b0d2a6c" // well-formed, never minted

	check := func(what string, got, want int) {
		t.Helper()
		if got != want {
			t.Errorf("%s: HTTP %d, want %d", what, got, want)
		}
	}
	check("POST with the session", h.status(http.MethodPost, listTools, legacyHeader(id)), http.StatusOK)
	check("POST without a session", h.status(http.MethodPost, listTools, legacyHeader("")), http.StatusBadRequest)
	check("POST with a forged session", h.status(http.MethodPost, listTools, legacyHeader(forged)), http.StatusNotFound)
	check("GET without a session", h.status(http.MethodGet, "", legacyHeader("")), http.StatusBadRequest)
	check("GET with a forged session", h.status(http.MethodGet, "", legacyHeader(forged)), http.StatusNotFound)
	check("DELETE with a forged session", h.status(http.MethodDelete, "", legacyHeader(forged)), http.StatusNotFound)
	stream := h.do(http.MethodGet, "", legacyHeader(id))
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("GET with the session: HTTP %d", stream.StatusCode)
	}
	streamEnded := make(chan struct{})
	go func() {
		defer close(streamEnded)
		_, _ = io.Copy(io.Discard, stream.Body)
	}()
	check("DELETE", h.status(http.MethodDelete, "", legacyHeader(id)), http.StatusOK)
	select {
	case <-streamEnded:
	case <-time.After(10 * time.Second):
		t.Error("the session's GET stream stayed open after DELETE")
		stream.Body.Close()
		<-streamEnded
	}
	check("POST after DELETE", h.status(http.MethodPost, listTools, legacyHeader(id)), http.StatusNotFound)
	check("GET after DELETE", h.status(http.MethodGet, "", legacyHeader(id)), http.StatusNotFound)
	check("DELETE after DELETE", h.status(http.MethodDelete, "", legacyHeader(id)), http.StatusNotFound)
	// Another session is unaffected by the first one's end.
	other := h.initialize()
	check("POST with a new session", h.status(http.MethodPost, listTools, legacyHeader(other)), http.StatusOK)

	modern := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
	check("2026-07-28 POST without a session", h.status(http.MethodPost,
		`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, modern),
		http.StatusOK)
}

// Sessions are capped: a new one ends the idle session used longest ago
// (its ID then gets 404), and when every session has a request open the
// new one is refused with 503 and a reason. Before, 10,000 sessions held
// 250 MB until their idle TTL.
func TestHTTPSessionCap(t *testing.T) {
	url, _ := serveHTTP(t, HTTPOptions{MaxSessions: 3})
	h := newRawHTTP(t, url)
	a, b, c := h.initialize(), h.initialize(), h.initialize()
	if got := h.status(http.MethodPost, listTools, legacyHeader(a)); got != http.StatusOK { // a is now the most recent
		t.Fatalf("POST a: %d", got)
	}
	d := h.initialize() // full: b, used longest ago, makes room
	for id, want := range map[string]int{a: http.StatusOK, b: http.StatusNotFound, c: http.StatusOK, d: http.StatusOK} {
		if got := h.status(http.MethodPost, listTools, legacyHeader(id)); got != want {
			t.Errorf("session %s after the cap: HTTP %d, want %d", id, got, want)
		}
	}
	// Hold every session busy with an open GET stream: a new one is refused.
	for _, id := range []string{a, c, d} {
		if resp := h.do(http.MethodGet, "", legacyHeader(id)); resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", id, resp.StatusCode)
		}
	}
	resp := h.do(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, nil)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "--max-sessions") {
		t.Errorf("initialize with every session busy: %s %q, want 503 naming --max-sessions", resp.Status, body)
	}
}

// A 2026-07-28 client may send notifications and requests without _meta
// (the Go SDK's notifications/cancelled, ping and logging/setLevel):
// mcp-go v1.2.1 answered them 400, which ended the Go SDK's session after
// one cancellation. They are accepted.
func TestHTTPModernMessagesWithoutMeta(t *testing.T) {
	url, _ := serveHTTP(t, HTTPOptions{})
	h := newRawHTTP(t, url)
	header := func(method string) map[string]string {
		return map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method}
	}
	for _, c := range []struct {
		name, body string
		want       int
	}{
		{"notifications/cancelled", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"context canceled"}}`, http.StatusAccepted},
		{"notification without params", `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`, http.StatusAccepted},
		{"ping", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, http.StatusOK},
		{"logging/setLevel", `{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			var m struct {
				Method string `json:"method"`
			}
			_ = json.Unmarshal([]byte(c.body), &m)
			resp := h.do(http.MethodPost, c.body, header(m.Method))
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != c.want {
				t.Fatalf("HTTP %d, want %d: %s", resp.StatusCode, c.want, b)
			}
			if c.want == http.StatusOK {
				var r struct {
					ID     json.RawMessage `json:"id"`
					Result json.RawMessage `json:"result"`
				}
				if err := json.Unmarshal(b, &r); err != nil || string(r.Result) != "{}" {
					t.Errorf("answer %s, want an empty result", b)
				}
			}
		})
	}
}

// A call cancelled with notifications/cancelled gets no response over HTTP
// either: its POST's stream ends without one.
func TestHTTPCancelledCallUnanswered(t *testing.T) {
	reg, marker := fixtureRegistry(t, (*registry.Policy)(nil))
	url, _ := serveRegistryHTTP(t, reg, HTTPOptions{})
	h := newRawHTTP(t, url)
	id := h.initialize()
	resp := h.do(http.MethodPost, `{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"fx__sleep","arguments":{"ms":30000},"_meta":{"progressToken":"slow"}}}`, legacyHeader(id))
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("tools/call: %s, %s; want an SSE stream (its first event is the call's progress)", resp.Status, ct)
	}
	events := bufio.NewScanner(resp.Body)
	started := false
	for !started && events.Scan() {
		started = strings.Contains(events.Text(), `"progressToken":"slow"`)
	}
	if !started {
		t.Fatal("the stream ended before the call started")
	}
	if got := h.status(http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow","reason":"changed my mind"}}`, legacyHeader(id)); got != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: HTTP %d", got)
	}
	for events.Scan() { // until the stream ends
		if strings.Contains(events.Text(), `"id":"slow"`) {
			t.Errorf("the cancelled call was answered: %s", events.Text())
		}
	}
	waitFile(t, marker)
}

// On the wire, a call's progress and its result share the POST's response:
// an SSE stream with every progress event first and the result last, in
// both eras, also when mcp-go chose a JSON response for the result (the
// tool answers right after its last progress).
func TestHTTPProgressThenResultOnTheWire(t *testing.T) {
	reg, _ := fixtureRegistry(t, nil)
	url, _ := serveRegistryHTTP(t, reg, HTTPOptions{})
	h := newRawHTTP(t, url)
	session := h.initialize()
	const modernMeta = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},`
	for _, era := range []struct {
		name, meta string
		header     map[string]string
	}{
		{"legacy 2025-11-25", "", legacyHeader(session)},
		{"2026-07-28", modernMeta, map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "fx__progress_values"}},
	} {
		t.Run(era.name, func(t *testing.T) {
			for i := range progressRounds {
				resp := h.do(http.MethodPost, `{"jsonrpc":"2.0","id":"p","method":"tools/call","params":{"name":"fx__progress_values","arguments":{"values":[0,50,100],"total":100},"_meta":{`+era.meta+`"progressToken":"w"}}}`, era.header)
				b, _ := io.ReadAll(resp.Body)
				if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
					t.Fatalf("HTTP %d, %s: %s", resp.StatusCode, ct, b)
				}
				var got []string
				for _, line := range strings.Split(string(b), "\n") {
					data, ok := strings.CutPrefix(line, "data: ")
					if !ok {
						continue
					}
					var m struct {
						ID     string `json:"id"`
						Params struct {
							Progress float64 `json:"progress"`
						} `json:"params"`
						Method string `json:"method"`
					}
					if err := json.Unmarshal([]byte(data), &m); err != nil {
						t.Fatalf("event %q: %v", data, err)
					}
					if m.Method == "notifications/progress" {
						got = append(got, fmt.Sprint(m.Params.Progress))
					} else {
						got = append(got, "result "+m.ID)
					}
				}
				if want := []string{"0", "50", "100", "result p"}; !reflect.DeepEqual(got, want) {
					t.Errorf("round %d: events %v, want %v", i, got, want)
				}
			}
		})
	}
}

// Over HTTP too, a batch or an id that is not a string or an integer is an
// Invalid Request (-32600, null id), not an echo or a Parse error.
func TestInvalidRequestsOverHTTP(t *testing.T) {
	url, _ := serveHTTP(t, HTTPOptions{})
	h := newRawHTTP(t, url)
	for _, body := range []string{
		`[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}]`,
		`{"jsonrpc":"2.0","id":7.5,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":true,"method":"ping"}`,
	} {
		resp := h.do(http.MethodPost, body, nil)
		b, _ := io.ReadAll(resp.Body)
		var m struct {
			ID    any `json:"id"`
			Error struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if json.Unmarshal(b, &m) != nil || m.ID != nil || m.Error.Code != -32600 {
			t.Errorf("%s\n  answered %s %s, want -32600 with a null id", body, resp.Status, b)
		}
	}
}

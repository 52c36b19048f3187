package frontend

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboard-mcp/switchboard/host/internal/auth"
	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
)

// bearerClient is an mcp-go streamable HTTP client that sends token and
// answers elicitations with el.
func bearerClient(t *testing.T, url, token string, el *answering) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithElicitationHandler(el))
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAlwaysDecisionsArePerCaller: over HTTP with tokens, ann's "always
// allow" lets her later calls run without a question, in a new session
// too, while bob is still asked about the same call (and his "deny"
// keeps it from running); a request without a token gets 401 and the
// metadata pointer.
func TestAlwaysDecisionsArePerCaller(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.Config{File: filepath.Join(dir, "config.hcl"), DataDir: dir, Auth: &config.Auth{TokensFile: filepath.Join(dir, "tokens.json")}}
	annTok, err := auth.NewToken(cfg.Auth.TokensFile, "ann", "write")
	if err != nil {
		t.Fatal(err)
	}
	bobTok, err := auth.NewToken(cfg.Auth.TokensFile, "bob", "write")
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pol := &registry.Policy{Default: registry.Ask}
	if err := pol.Load(filepath.Join(dir, "permissions.json")); err != nil {
		t.Fatal(err)
	}
	srv := &patternServer{}
	reg := registry.New(pol, registry.WithDuplicateLimit(0))
	if err := reg.Register(srv, registry.KindPlugin, "test"); err != nil {
		t.Fatal(err)
	}
	url, _ := serveRegistryHTTP(t, reg, HTTPOptions{Auth: v})

	resp, err := post(t, url, strings.NewReader(initBody), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ch := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(ch, `resource_metadata="http://127.0.0.1:`) || !strings.Contains(ch, auth.MetadataPath+`/mcp"`) {
		t.Fatalf("no token: %d, WWW-Authenticate %q; want 401 naming the metadata", resp.StatusCode, ch)
	}

	call := func(c *client.Client) *mcp.CallToolResult {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name = "sh__run"
		req.Params.Arguments = map[string]any{"command": "curl"}
		res, err := c.CallTool(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	ann := &answering{answer: "always_allow"}
	if res := call(bearerClient(t, url, annTok, ann)); res.IsError || srv.calls.Load() != 1 {
		t.Fatalf("ann's first call: %+v, ran %d; want it approved and run", res.Content, srv.calls.Load())
	}
	ann2 := &answering{answer: "deny"}
	if res := call(bearerClient(t, url, annTok, ann2)); res.IsError || srv.calls.Load() != 2 || len(ann2.asked) != 0 {
		t.Fatalf("ann's call in a new session: %+v, ran %d, asked %d; want it run without a question", res.Content, srv.calls.Load(), len(ann2.asked))
	}
	bob := &answering{answer: "deny"}
	if res := call(bearerClient(t, url, bobTok, bob)); !res.IsError || srv.calls.Load() != 2 || len(bob.asked) != 1 {
		t.Fatalf("bob's call: %+v, ran %d, asked %d; want him asked, and refused on his deny", res.Content, srv.calls.Load(), len(bob.asked))
	}
	if allow, _ := pol.RememberedBy("ann"); len(allow) != 1 {
		t.Errorf("ann's saved answers = %v", allow)
	}
	if allow, _ := pol.Remembered(); len(allow) != 0 {
		t.Errorf("global saved answers = %v, want none (ann's answer is hers)", allow)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "permissions.json"))
	if !strings.Contains(string(b), `"ann"`) {
		t.Errorf("permissions.json = %s, want ann's answer under her name", b)
	}
}

// TestSessionBelongsToItsCaller: a 2025-11-25 session started with ann's
// token is not found by a request with bob's token that carries its ID.
func TestSessionBelongsToItsCaller(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.Config{File: filepath.Join(dir, "config.hcl"), DataDir: dir, Auth: &config.Auth{TokensFile: filepath.Join(dir, "tokens.json")}}
	annTok, _ := auth.NewToken(cfg.Auth.TokensFile, "ann", "write")
	bobTok, _ := auth.NewToken(cfg.Auth.TokensFile, "bob", "write")
	v, err := auth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	url, _ := serveHTTP(t, HTTPOptions{Auth: v})
	resp, err := post(t, url, strings.NewReader(initBody), map[string]string{"Authorization": "Bearer " + annTok})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("ann's initialize = %d, session %q", resp.StatusCode, id)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	// ann uses her session first (as her client does: notifications/
	// initialized), then bob tries it.
	for _, step := range []struct {
		who  string
		want int
	}{{annTok, http.StatusOK}, {bobTok, http.StatusNotFound}, {annTok, http.StatusOK}} {
		who, want := step.who, step.want
		resp, err := post(t, url, strings.NewReader(list), map[string]string{"Authorization": "Bearer " + who, "Mcp-Session-Id": id, "Mcp-Protocol-Version": "2025-06-18"})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("tools/list in ann's session with token %s…: %d, want %d", who[:8], resp.StatusCode, want)
		}
	}
}

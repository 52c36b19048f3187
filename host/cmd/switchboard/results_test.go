package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

// resultsSetup writes a config with the fixture plugin's big and paged
// tools as "fx", a top-level max_result_chars of 1000, a tool block that
// raises it for fx.big_json... (see below), and the filesystem built-in
// with a root that holds data_dir (which it must still refuse).
func resultsSetup(t *testing.T) (fixtures.Binaries, string, string) {
	t.Helper()
	bins := fixtures.Build(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "project"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`
project_dir      = "project"
data_dir         = "state"
max_result_chars = 1000
max_image_bytes  = 2000
builtin "filesystem" {
  roots = [%[2]q]
}
plugin "fx" {
  path = %[1]q
  env  = { FIXTURE_BIG = "1" }
  tool "paged" {
    max_result_chars = 3000
  }
}
`, bins.TestPlugin, dir)
	path := filepath.Join(dir, "config.hcl")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return bins, path, filepath.Join(dir, "state")
}

func fitCall(t *testing.T, c *client.Client, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(t.Context(), req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func resultTexts(res *mcp.CallToolResult) []string {
	var out []string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return out
}

func resultLinks(res *mcp.CallToolResult) []mcp.ResourceLink {
	var out []mcp.ResourceLink
	for _, c := range res.Content {
		if l, ok := c.(mcp.ResourceLink); ok {
			out = append(out, l)
		}
	}
	return out
}

// readPages reads a saved result through resources/read, page after page
// as each page's _meta says, and returns the whole and the pages read.
func readPages(t *testing.T, c *client.Client, uri string) (string, int) {
	t.Helper()
	var b strings.Builder
	pages := 0
	for uri != "" {
		req := mcp.ReadResourceRequest{}
		req.Params.URI = uri
		res, err := c.ReadResource(t.Context(), req)
		if err != nil {
			t.Fatalf("resources/read %s: %v", uri, err)
		}
		if len(res.Contents) != 1 {
			t.Fatalf("resources/read %s: %d contents, want 1", uri, len(res.Contents))
		}
		tc, ok := res.Contents[0].(mcp.TextResourceContents)
		if !ok {
			t.Fatalf("resources/read %s: %T, want text", uri, res.Contents[0])
		}
		b.WriteString(tc.Text)
		pages++
		page, _ := tc.Meta["switchboard/page"].(map[string]any)
		uri, _ = page["next"].(string)
		if pages > 100 {
			t.Fatal("pages without end")
		}
	}
	return b.String(), pages
}

// TestResultsFit: a real MCP client against `switchboard serve` gets
// results held to max_result_chars (at the limit, one over, several
// items, JSON, a tool's own limit, paging arguments), reads what was cut
// through the resource link in pages, and the filesystem built-in cannot
// read the saved file even with data_dir inside one of its roots.
func TestResultsFit(t *testing.T) {
	bins, cfg, state := resultsSetup(t)
	c, _ := featureMCPClientWith(t, bins, cfg, make(chan mcp.JSONRPCNotification, 64), false)

	t.Run("exactly at the limit", func(t *testing.T) {
		res := fitCall(t, c, "fx__big", map[string]any{"chars": 1000})
		if got := resultTexts(res); len(got) != 1 || len(got[0]) != 1000 || len(resultLinks(res)) != 0 {
			t.Fatalf("got %d texts (%d links), want the whole 1000 characters alone", len(got), len(resultLinks(res)))
		}
	})

	var savedURI string
	t.Run("one over, read back in pages", func(t *testing.T) {
		res := fitCall(t, c, "fx__big", map[string]any{"chars": 2501, "char": "é"})
		got := resultTexts(res)
		if len(got) != 2 || got[0] != strings.Repeat("é", 1000) {
			t.Fatalf("texts = %d, want the first 1000 characters and a marker", len(got))
		}
		if !strings.Contains(got[1], "1501 characters were left out") || !strings.Contains(got[1], "resources/read") {
			t.Errorf("marker = %q", got[1])
		}
		ls := resultLinks(res)
		if len(ls) != 1 || !strings.HasPrefix(ls[0].URI, "switchboard://results/") {
			t.Fatalf("links = %+v, want one saved result", ls)
		}
		savedURI = ls[0].URI
		whole, pages := readPages(t, c, ls[0].URI)
		if whole != strings.Repeat("é", 2501) {
			t.Errorf("the pages read back hold %d characters, want the 2501 the tool returned", len([]rune(whole)))
		}
		if pages != 3 {
			t.Errorf("read in %d pages, want 3 pages of 1000 characters", pages)
		}
		// A page of the client's own size.
		req := mcp.ReadResourceRequest{}
		req.Params.URI = ls[0].URI + "?offset=2500&limit=10"
		r, err := c.ReadResource(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if tc := r.Contents[0].(mcp.TextResourceContents); tc.Text != "é" {
			t.Errorf("offset=2500&limit=10 = %q, want the last character", tc.Text)
		}
	})

	t.Run("several items", func(t *testing.T) {
		res := fitCall(t, c, "fx__big", map[string]any{"chars": 400, "items": 3})
		got := resultTexts(res)
		if len(got) != 4 || len(got[0]) != 400 || len(got[1]) != 400 || len(got[2]) != 200 {
			t.Fatalf("texts = %d items, want 400, 400, 200 and the marker", len(got))
		}
		if !strings.Contains(got[3], "returned 1200 characters of text and only the first 1000 are here") {
			t.Errorf("marker = %q", got[3])
		}
	})

	t.Run("JSON stays JSON", func(t *testing.T) {
		res := fitCall(t, c, "fx__big", map[string]any{"chars": 300, "json": true})
		got := resultTexts(res)
		if len(got) != 2 {
			t.Fatalf("texts = %d, want the JSON and the marker", len(got))
		}
		var v struct {
			Rows []map[string]any `json:"rows"`
		}
		if err := json.Unmarshal([]byte(got[0]), &v); err != nil || len(v.Rows) == 0 {
			t.Errorf("the cut JSON text does not parse: %v", err)
		}
		sc, err := json.Marshal(res.StructuredContent)
		if err != nil || len(sc) > 1000 {
			t.Errorf("structured content of %d bytes (%v), want at most 1000", len(sc), err)
		}
		if err := json.Unmarshal(sc, &v); err != nil || len(v.Rows) == 0 {
			t.Errorf("the structured content lost its shape: %v", err)
		}
	})

	t.Run("the tool's own limit and its paging arguments", func(t *testing.T) {
		res := fitCall(t, c, "fx__paged", map[string]any{"chars": 3000})
		if got := resultTexts(res); len(got) != 1 {
			t.Fatalf("3000 characters under the tool's own limit of 3000 were cut: %d items", len(got))
		}
		res = fitCall(t, c, "fx__paged", map[string]any{"chars": 3001})
		got := resultTexts(res)
		if len(got) != 2 || len(got[0]) != 3000 || !strings.Contains(got[1], "paging arguments (offset, limit)") {
			t.Fatalf("texts = %d, want 3000 characters and a marker naming offset and limit", len(got))
		}
		if !strings.Contains(got[1], `tool "paged" { max_result_chars } in the fx block = 3000`) {
			t.Errorf("marker = %q, want it to name the tool block", got[1])
		}
		if len(resultLinks(res)) != 0 {
			t.Error("a tool with paging arguments got a saved result")
		}
	})

	t.Run("images over max_image_bytes", func(t *testing.T) {
		res := fitCall(t, c, "fx__big", map[string]any{"chars": 3, "image_bytes": 2000})
		if len(res.Content) != 2 {
			t.Fatalf("an image exactly at max_image_bytes: %d items, want text and image", len(res.Content))
		}
		res = fitCall(t, c, "fx__big", map[string]any{"chars": 3, "image_bytes": 2001})
		for _, item := range res.Content {
			if _, ok := item.(mcp.ImageContent); ok {
				t.Fatal("an image over max_image_bytes was sent")
			}
		}
		if got := resultTexts(res); len(got) != 2 || !strings.Contains(got[1], "over max_image_bytes") {
			t.Errorf("texts = %q, want the reason", got)
		}
	})

	t.Run("the saved file is out of the tools' reach", func(t *testing.T) {
		if savedURI == "" {
			t.Skip("nothing saved")
		}
		path := filepath.Join(state, "results", strings.TrimPrefix(savedURI, "switchboard://results/"))
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("the saved result is not under data_dir/results: %v", err)
		}
		res := fitCall(t, c, "filesystem__read_text_file", map[string]any{"path": path})
		if !res.IsError {
			t.Fatalf("filesystem read the saved result: %q", resultTexts(res))
		}
		if got := strings.Join(resultTexts(res), " "); strings.Contains(got, "éé") {
			t.Errorf("the refusal leaks the content: %.200s", got)
		}
	})
}

// TestSavedResultsStayWithTheirHost: two stdio hosts on one config share
// data_dir, and every stdio session is the same to mcp-go: the second
// host read the first one's saved result (red team round 4). The control:
// the first host reads it.
func TestSavedResultsStayWithTheirHost(t *testing.T) {
	bins, cfg, _ := resultsSetup(t)
	c1, _ := featureMCPClientWith(t, bins, cfg, make(chan mcp.JSONRPCNotification, 64), false)
	c2, _ := featureMCPClientWith(t, bins, cfg, make(chan mcp.JSONRPCNotification, 64), false)
	ls := resultLinks(fitCall(t, c1, "fx__big", map[string]any{"chars": 1500}))
	if len(ls) != 1 {
		t.Fatalf("links = %+v, want one saved result", ls)
	}
	if whole, _ := readPages(t, c1, ls[0].URI); len(whole) != 1500 {
		t.Fatalf("control: the first host read back %d characters, want 1500", len(whole))
	}
	req := mcp.ReadResourceRequest{}
	req.Params.URI = ls[0].URI
	res, err := c2.ReadResource(t.Context(), req)
	if err == nil {
		t.Errorf("the second host's client read the first host's saved result: %d contents", len(res.Contents))
	} else if !strings.Contains(err.Error(), "belongs to another client session") {
		t.Errorf("the second host's refusal = %v", err)
	}
}

// TestServersCannotOfferTheHostsScheme: switchboard:// is the host's own
// (its saved results). A plugin offered a resource and a template in it,
// so a result could link to a "saved result" the plugin made up (red team
// round 5): both are refused, and reading such a URI reaches the host.
func TestServersCannotOfferTheHostsScheme(t *testing.T) {
	bins := fixtures.Build(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "project"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("project_dir = \"project\"\ndata_dir = \"state\"\nplugin \"fx\" {\n  path = %q\n  env = { FIXTURE_FEATURES = \"1\", FIXTURE_HOST_SCHEME = \"1\" }\n}\n", bins.TestPlugin)
	path := filepath.Join(dir, "config.hcl")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := featureMCPClientWith(t, bins, path, make(chan mcp.JSONRPCNotification, 64), false)
	list, err := c.ListResources(t.Context(), mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range list.Resources {
		uris = append(uris, r.URI)
	}
	if !slices.Contains(uris, "fixture://static") {
		t.Fatalf("control: the plugin's own resource is not listed: %v", uris)
	}
	for _, u := range uris {
		if strings.HasPrefix(u, "switchboard:") {
			t.Errorf("a plugin's resource in the host's scheme is listed: %s", u)
		}
	}
	templates, err := c.ListResourceTemplates(t.Context(), mcp.ListResourceTemplatesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range templates.ResourceTemplates {
		if raw := tl.URITemplate.Raw(); raw != "fixture://notes/{id}" && !strings.HasPrefix(raw, "switchboard://results/") {
			t.Errorf("a plugin's template that may expand into the host's scheme is listed: %s", raw)
		}
	}
	for _, uri := range []string{"switchboard://results/00000000000000000000000000000000", "SWITCHBOARD://results/0", "switchboard:results/0"} {
		req := mcp.ReadResourceRequest{}
		req.Params.URI = uri
		res, err := c.ReadResource(t.Context(), req)
		if err != nil {
			continue
		}
		for _, ct := range res.Contents {
			if tc, ok := ct.(mcp.TextResourceContents); ok && strings.Contains(tc.Text, "FORGED") {
				t.Errorf("reading %s returned the plugin's forged content", uri)
			}
		}
	}
}

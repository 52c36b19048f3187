package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboard-mcp/switchboard/host/internal/toolsearch"
	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

// listing returns the size of a full tools/list (every page) as a client
// receives it: the tools' JSON in bytes, and how many tools.
func (p *mcpProc) listing(b *testing.B) (bytes, tools int) {
	b.Helper()
	req := mcp.ListToolsRequest{}
	var all []mcp.Tool
	for {
		res, err := p.c.ListTools(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		all = append(all, res.Tools...)
		if res.NextCursor == "" {
			break
		}
		req.Params.Cursor = res.NextCursor
	}
	raw, err := json.Marshal(all)
	if err != nil {
		b.Fatal(err)
	}
	return len(raw), len(all)
}

// waitServers waits until each of servers answers a call of its pid tool
// (serve does not wait for every plugin's start), through
// switchboard__call_tool in search mode or directly.
func (p *mcpProc) waitServers(b *testing.B, servers []string) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for _, s := range servers {
		for {
			req := mcp.CallToolRequest{}
			req.Params.Name = "switchboard__call_tool"
			req.Params.Arguments = map[string]any{"name": s + ".pid"}
			res, err := p.c.CallTool(context.Background(), req)
			if err != nil || res.IsError {
				req.Params.Name = s + "__pid"
				req.Params.Arguments = nil
				res, err = p.c.CallTool(context.Background(), req)
			}
			if err == nil && !res.IsError {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("server %s did not come up: %v", s, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// search returns a call of switchboard__search_tools cycling through
// queries.
func (p *mcpProc) search(queries []string) func(context.Context) error {
	i := 0
	return func(ctx context.Context) error {
		req := mcp.CallToolRequest{}
		req.Params.Name = "switchboard__search_tools"
		req.Params.Arguments = map[string]any{"query": queries[i%len(queries)], "k": 5}
		i++
		res, err := p.c.CallTool(ctx, req)
		if err == nil && res.IsError {
			err = fmt.Errorf("search: %v", res.Content)
		}
		return err
	}
}

// BenchmarkToolSearch prints what search mode saves and costs: the size of
// the tool listing (bytes, and tokens estimated as bytes / 4) with every
// tool listed and in search mode, for the four built-ins and for 100
// servers of about 50 tools; the latency of a search among those 5,000;
// and retrieval quality (recall@k) on the committed query set.
func BenchmarkToolSearch(b *testing.B) {
	if b.N < 100 {
		return
	}
	bins := fixtures.Build(b)
	fmt.Printf("\n%-44s %14s %10s %8s\n", "tool listing", "bytes", "~tokens", "tools")
	sizes := func(name, body string, servers []string) *mcpProc {
		var search *mcpProc
		for _, mode := range []string{"all", "search"} {
			p, _ := startMCP(b, nil, bins.Switchboard, "serve", "--config", writeConfig(b, fmt.Sprintf("expose = %q\n%s", mode, body)))
			p.waitServers(b, servers)
			n, tools := p.listing(b)
			fmt.Printf("%-44s %14d %10d %8d\n", name+", expose = "+mode, n, n/4, tools)
			if mode == "search" {
				search = p
			} else {
				_ = p.c.Close()
			}
		}
		return search
	}
	builtins := sizes("4 built-ins", "builtin \"filesystem\" {}\nbuiltin \"bash\" {}\nbuiltin \"git\" {}\nbuiltin \"web\" {}\n", nil)
	_ = builtins.c.Close()
	var hundred strings.Builder
	var servers []string
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&hundred, "plugin \"s%03d\" {\n  path = %q\n  env = { FIXTURE_EXTRA_TOOLS = \"40\" }\n}\n", i, bins.TestPlugin)
		servers = append(servers, fmt.Sprintf("s%03d", i))
	}
	big := sizes("100 servers x ~56 tools", hundred.String(), servers)

	queries := []string{"what is the plugin's process id", "echo some text back", "report progress in steps", "sleep for a while", "count the calls"}
	st := measure(b, 200, 1, big.search(queries))
	fmt.Printf("\n%-44s %14s %10s\n", "switchboard__search_tools, 100 servers", "p50", "p99")
	fmt.Printf("%-44s %14s %10s\n", "one caller, through switchboard serve", ms(st.p50), ms(st.p99))

	dir := filepath.Join(fixtures.RepoRoot(), "host", "internal", "toolsearch", "testdata")
	docs, err := toolsearch.LoadCatalogue(filepath.Join(dir, "catalogue.json"))
	if err != nil {
		b.Fatal(err)
	}
	qs, err := toolsearch.LoadQueries(filepath.Join(dir, "queries.json"))
	if err != nil {
		b.Fatal(err)
	}
	ix := toolsearch.New(docs)
	fmt.Printf("\nretrieval quality, %d requests over %d tools (toolsearch/testdata)\n", len(qs), len(docs))
	for _, k := range []int{1, 3, 5, 10} {
		r, _ := toolsearch.Recall(ix, qs, k)
		fmt.Printf("  recall@%-2d %.3f\n", k, r)
	}
}

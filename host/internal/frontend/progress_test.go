package frontend

import (
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// progressCases are calls of the fixture's progress_values tool, which
// reports its values back to back and answers at once (the case where
// mcp-go let progress follow the result), and the progress values the
// client must see.
var progressCases = []struct {
	name   string
	values []float64
	total  float64
	want   []float64
}{
	{"percent from 0", []float64{0, 50, 100}, 100, []float64{0, 50, 100}},
	{"fractions of 1", []float64{0.25, 0.5, 0.75, 1}, 1, []float64{0.25, 0.5, 0.75, 1}},
	// A value that does not increase is dropped, never rewritten.
	{"not increasing", []float64{1, 1, 0.5, 2}, 0, []float64{1, 2}},
}

// progressRounds is how many times each case runs on each route: progress
// after the result was a race, seen in up to 5 of 12 calls.
const progressRounds = 10

// Over stdio, on both routes, a call's progress notifications all come
// before its response, with the plugin's values unchanged.
func TestProgressOverStdio(t *testing.T) {
	for _, route := range []struct {
		name        string
		noShortPath bool
	}{{"short path", false}, {"mcp-go", true}} {
		t.Run(route.name, func(t *testing.T) {
			s := newSession(t, nil, route.noShortPath)
			for round := range progressRounds {
				for i, c := range progressCases {
					id := fmt.Sprintf("%d-%d", round, i)
					s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":"fx__progress_values","arguments":{"values":%s,"total":%v},"_meta":{"progressToken":%q}}}`,
						id, mustJSON(c.values), c.total, "tok-"+id))
					resp, notes := s.response(id)
					if res, _ := resp["result"].(map[string]any); res == nil || res["isError"] == true {
						t.Fatalf("%s: answer %v", c.name, resp)
					}
					var got []float64
					for _, n := range notes {
						params, _ := n["params"].(map[string]any)
						if n["method"] != string(mcp.MethodNotificationProgress) {
							continue
						}
						if tok := params["progressToken"]; tok != "tok-"+id {
							t.Errorf("%s: progress of %v came after that call's result: %v", c.name, tok, n)
							continue
						}
						got = append(got, params["progress"].(float64))
						if c.total > 0 && params["total"] != c.total {
							t.Errorf("%s: total %v, want %v", c.name, params["total"], c.total)
						}
					}
					if !reflect.DeepEqual(got, c.want) {
						t.Errorf("%s (round %d): progress before the result = %v, want %v", c.name, round, got, c.want)
					}
				}
			}
			_ = s.in.Close()
			for m := range s.lines {
				if m["method"] == string(mcp.MethodNotificationProgress) {
					t.Errorf("progress after the last result: %v", m)
				}
			}
		})
	}
}

// Over streamable HTTP, in both protocol eras, mcp-go's own client sees
// every progress notification of a call before the call returns, with the
// plugin's values unchanged. (mcp-go's server lost the ones a tool sent
// just before answering, or sent them on another request's stream.)
func TestProgressOverHTTP(t *testing.T) {
	reg, _ := fixtureRegistry(t, nil)
	url, _ := serveRegistryHTTP(t, reg, HTTPOptions{})
	for _, era := range []struct {
		name string
		opts []client.ClientOption
	}{{"2026-07-28", nil}, {"legacy 2025-11-25", []client.ClientOption{client.WithLegacyProtocolOnly()}}} {
		t.Run(era.name, func(t *testing.T) {
			tr, err := transport.NewStreamableHTTP(url)
			if err != nil {
				t.Fatal(err)
			}
			c := client.NewClient(tr, era.opts...)
			t.Cleanup(func() { _ = c.Close() })
			var mu sync.Mutex
			progress := map[string][]float64{}
			c.OnNotification(func(n mcp.JSONRPCNotification) {
				if n.Method != string(mcp.MethodNotificationProgress) {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				tok := fmt.Sprint(n.Params.AdditionalFields["progressToken"])
				p, _ := n.Params.AdditionalFields["progress"].(float64)
				progress[tok] = append(progress[tok], p)
			})
			if err := c.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			init := mcp.InitializeRequest{}
			init.Params.ClientInfo = mcp.Implementation{Name: "progress-test", Version: "1"}
			if _, err := c.Initialize(t.Context(), init); err != nil {
				t.Fatal(err)
			}
			for round := range progressRounds {
				for i, pc := range progressCases {
					tok := fmt.Sprintf("tok-%d-%d", round, i)
					req := mcp.CallToolRequest{}
					req.Params.Name = "fx__progress_values"
					req.Params.Arguments = map[string]any{"values": pc.values, "total": pc.total}
					req.Params.Meta = &mcp.Meta{ProgressToken: tok}
					res, err := c.CallTool(t.Context(), req)
					if err != nil || res.IsError {
						t.Fatalf("%s: CallTool = %v, %v", pc.name, res, err)
					}
					mu.Lock()
					got := progress[tok]
					mu.Unlock()
					if !reflect.DeepEqual(got, pc.want) {
						t.Errorf("%s (round %d): progress before the result = %v, want %v", pc.name, round, got, pc.want)
					}
				}
			}
		})
	}
}

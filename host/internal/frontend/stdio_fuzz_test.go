package frontend

import (
	"context"
	"encoding/json"
	"testing"
)

// FuzzDecodeCall feeds the short path's decoder arbitrary lines: it must
// never panic, and whatever it accepts must be a tools/call with a plain id
// that protocolContext can take (or hand to mcp-go).
func FuzzDecodeCall(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"hi"}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","_meta":{"progressToken":7}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":"nope"}}}`,
		`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{}}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"x","task":{}}}`,
		`[{"jsonrpc":"2.0","id":5,"method":"tools/call"}]`,
		`"tools/call"`,
		`{"method":"tools/call","params":{"_meta":null}}`,
	} {
		f.Add([]byte(seed))
	}
	p := &fastPath{ctx: context.Background()}
	f.Fuzz(func(t *testing.T, line []byte) {
		m, ok := decodeCall(line)
		if !ok {
			return
		}
		if m.Method != "tools/call" || m.JSONRPC != "2.0" || !plainID(m.ID) {
			t.Fatalf("accepted %q", line)
		}
		var id any
		if json.Unmarshal(m.ID, &id) != nil {
			t.Fatalf("accepted an id that is not JSON: %q", m.ID)
		}
		if ctx, _, ok := p.protocolContext(m.Params.Meta); ok && ctx == nil {
			t.Fatal("protocolContext accepted without a context")
		}
	})
}

package frontend

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
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

// FuzzResponseID: wherever responseID reads an id without decoding the
// line, it is the id a full decode finds, in a response (no method).
func FuzzResponseID(f *testing.F) {
	for _, seed := range responseIDCorpus() {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		id, ok := responseID(line)
		if !ok {
			return
		}
		var m message
		if err := json.Unmarshal(line, &m); err != nil {
			// Only the head is read: a line cut short after it is
			// still a response to that id as far as the filter goes.
			// mcp-go writes whole JSON; the id must still be JSON.
			var v any
			if json.Unmarshal(id, &v) != nil {
				t.Fatalf("responseID(%q) = %q, not JSON", line, id)
			}
			return
		}
		if m.Method != "" || idKey(m.ID) != idKey(id) {
			t.Fatalf("responseID(%q) = %q; a full decode finds id %q, method %q", line, id, m.ID, m.Method)
		}
	})
}

func responseIDCorpus() []string {
	response := func(id, result any) mcp.JSONRPCResponse {
		return mcp.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id), Result: result}
	}
	var out []string
	for _, m := range []any{
		response(int64(7), mcp.NewToolResultText("hi")),
		response(int64(-3), map[string]any{}),
		response("abc", mcp.NewToolResultText(`"id":9,"result"`)),
		response(`a"b`, map[string]any{}),
		mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(int64(12)), Error: mcp.JSONRPCErrorDetails{Code: mcp.INTERNAL_ERROR, Message: "boom"}},
		mcp.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(int64(4)), Request: mcp.Request{Method: "sampling/createMessage"}},
		mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{Method: "notifications/tools/list_changed"}},
	} {
		b, err := json.Marshal(m)
		if err != nil {
			panic(err)
		}
		out = append(out, string(b))
	}
	return append(out, `{"jsonrpc":"2.0","id":7.5,"result":{}}`, `{"jsonrpc":"2.0","id":-,"result":{}}`, `{"jsonrpc":"2.0","id":1,"method":"x","result":{}}`, `{"jsonrpc":"2.0","id":1`)
}

// The filter reads the ids of mcp-go's responses from their head, and
// falls back to a full decode for everything else: both agree on every
// message mcp-go writes.
func TestResponseID(t *testing.T) {
	fast := 0
	for _, line := range responseIDCorpus() {
		id, ok := responseID([]byte(line))
		var m message
		full := json.Unmarshal([]byte(line), &m) == nil && m.Method == ""
		switch {
		case ok && full && idKey(id) != idKey(m.ID):
			t.Errorf("%s: head id %s, full decode %s", line, id, m.ID)
		case ok && !full && json.Valid([]byte(line)):
			t.Errorf("%s: read as a response, but it is not one", line)
		case ok:
			fast++
		}
	}
	// Responses with numbers, a plain string and an error: read from the
	// head; an escaped string id, a fraction, requests and notifications:
	// left to the full decode.
	if fast != 4 {
		t.Errorf("%d lines read from the head, want 4", fast)
	}
}

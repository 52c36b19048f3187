package frontend

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// ToMCP writes the items a plugin sends in MCP's shapes, sends items that
// came from an MCP server as they came, and keeps structured content and
// _meta raw.
func TestToMCP(t *testing.T) {
	res := &toolcall.Result{
		IsError: true,
		Content: []toolcall.Content{
			toolcall.TextContent("hi"),
			{Type: toolcall.TypeImage, Data: []byte{1, 2}, MIMEType: "image/png"},
			{Type: toolcall.TypeResourceLink, URI: "file:///a", Name: "a"},
			{Type: toolcall.TypeResource, URI: "file:///b", MIMEType: "application/octet-stream", Blob: []byte{3}},
			{Type: "hologram", Raw: json.RawMessage(`{"type":"hologram","frames":[1],"annotations":{"priority":1}}`)},
		},
		StructuredContent: json.RawMessage(`{"n":12345678901234567890}`),
		Meta:              json.RawMessage(`{"example.com/big":12345678901234567890}`),
	}
	b, err := json.Marshal(ToMCP(res))
	if err != nil {
		t.Fatal(err)
	}
	var got, want map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(`{
		"isError": true,
		"content": [
			{"type":"text","text":"hi"},
			{"type":"image","data":"AQI=","mimeType":"image/png"},
			{"type":"resource_link","uri":"file:///a","name":"a","description":"","mimeType":""},
			{"type":"resource","resource":{"uri":"file:///b","mimeType":"application/octet-stream","blob":"Aw=="}},
			{"type":"hologram","frames":[1],"annotations":{"priority":1}}
		],
		"structuredContent": {"n":12345678901234567890},
		"_meta": {"example.com/big":12345678901234567890}
	}`), &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ToMCP (-want +got):\n%s\nJSON: %s", diff, b)
	}
	for _, exact := range []string{`"structuredContent":{"n":12345678901234567890}`, `"_meta":{"example.com/big":12345678901234567890}`} {
		if !strings.Contains(string(b), exact) {
			t.Errorf("ToMCP lost %s: %s", exact, b)
		}
	}
}

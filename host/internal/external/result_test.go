package external

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// An MCP result keeps every item raw, and the fields the host reads are
// filled for the types it knows.
func TestResultFromRaw(t *testing.T) {
	items := []string{
		`{"type":"text","text":"hi","annotations":{"priority":0.5}}`,
		`{"type":"image","data":"AQI=","mimeType":"image/png"}`,
		`{"type":"resource_link","uri":"file:///a","name":"a","description":"d","mimeType":"text/plain","size":3}`,
		`{"type":"resource","resource":{"uri":"file:///b","mimeType":"text/plain","text":"b"}}`,
		`{"type":"resource","resource":{"uri":"file:///c","blob":"Aw=="}}`,
		`{"type":"hologram","frames":[1]}`,
		`"not an object"`,
	}
	raw := `{"content":[` + items[0]
	for _, it := range items[1:] {
		raw += "," + it
	}
	raw += `],"structuredContent":{"n":1},"isError":true,"_meta":{"example.com/k":"v"}}`
	got, err := resultFromRaw(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	want := &toolcall.Result{
		IsError:           true,
		StructuredContent: json.RawMessage(`{"n":1}`),
		Meta:              json.RawMessage(`{"example.com/k":"v"}`),
		Content: []toolcall.Content{
			{Type: "text", Text: "hi"},
			{Type: "image", Data: []byte{1, 2}, MIMEType: "image/png"},
			{Type: "resource_link", URI: "file:///a", Name: "a", Description: "d", MIMEType: "text/plain"},
			{Type: "resource", URI: "file:///b", MIMEType: "text/plain", Text: "b"},
			{Type: "resource", URI: "file:///c", Blob: []byte{3}},
			{Type: "hologram"},
			{},
		},
	}
	for i := range want.Content {
		want.Content[i].Raw = json.RawMessage(items[i])
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resultFromRaw (-want +got):\n%s", diff)
	}

	if _, err := resultFromRaw(json.RawMessage(`{"content":`)); err == nil {
		t.Error("resultFromRaw accepted JSON cut short")
	}
	if r, err := resultFromRaw(json.RawMessage(`{"content":[],"structuredContent":null,"_meta":null}`)); err != nil || r.StructuredContent != nil || r.Meta != nil {
		t.Errorf("null structured content and _meta = %+v, %v; want none", r, err)
	}
}

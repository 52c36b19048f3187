package frontend

import (
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// metaVersion reads the protocol version in params' _meta exactly as
// mcp-go's own reading (mcp.Meta.ProtocolVersion after decoding _meta)
// does, on the shapes clients send and on malformed ones.
func TestMetaVersionAsMCPGoReadsIt(t *testing.T) {
	reference := func(params json.RawMessage) string {
		var p struct {
			Meta *mcp.Meta `json:"_meta"`
		}
		if len(params) == 0 || json.Unmarshal(params, &p) != nil {
			return ""
		}
		return p.Meta.ProtocolVersion()
	}
	for _, params := range []string{
		``,
		`{}`,
		`{"name":"echo","arguments":{"text":"x"}}`,
		`{"_meta":null}`,
		`{"_meta":{}}`,
		`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`,
		`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","progressToken":7,"x":{"y":[1,2]}},"arguments":{"a":1}}`,
		`{"_meta":{"io.modelcontextprotocol/protocolVersion":20260728}}`,
		`{"_meta":{"io.modelcontextprotocol/protocolVersion":null}}`,
		`{"_meta":{"IO.MODELCONTEXTPROTOCOL/PROTOCOLVERSION":"2026-07-28"}}`,
		`{"_META":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`,
		`{"_meta":"2026-07-28"}`,
		`{"_meta":[1]}`,
		`[1,2]`,
		`"text"`,
		`{"_meta":{"io.modelcontextprotocol/protocolVersion":"a\u0062c"}}`,
		`{"\u005fmeta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`,
		`{"_m\u0065ta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`,
		`{"_MeTa":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`,
		`{"arguments":{"_meta":1},"_mEta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`,
	} {
		if got, want := metaVersion(json.RawMessage(params)), reference(json.RawMessage(params)); got != want {
			t.Errorf("metaVersion(%s) = %q, mcp-go reads %q", params, got, want)
		}
	}
}

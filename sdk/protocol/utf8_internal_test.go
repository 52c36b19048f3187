package protocol

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
)

func echoEvent(text string) *pluginv1.CallToolEvent {
	return &pluginv1.CallToolEvent{CallId: 7, Kind: &pluginv1.CallToolEvent_Result{Result: &pluginv1.Result{
		Content: []*pluginv1.Content{{Kind: &pluginv1.Content_Text{Text: &pluginv1.TextContent{Text: text}}}},
	}}}
}

func TestToValidUTF8(t *testing.T) {
	ev := echoEvent("caf\xe9 ok")
	if _, err := proto.Marshal(ev); !invalidUTF8(err) {
		t.Fatalf("protobuf marshals a string that is not UTF-8 (err %v): the codec's premise is gone", err)
	}
	b, err := utf8Codec.Marshal(ev)
	if err != nil {
		t.Fatalf("codec: %v", err)
	}
	var got pluginv1.CallToolEvent
	if err := proto.Unmarshal(b.Materialize(), &got); err != nil {
		t.Fatal(err)
	}
	if text := got.GetResult().GetContent()[0].GetText().GetText(); text != "caf\uFFFD ok" {
		t.Errorf("text = %q, want %q", text, "caf\uFFFD ok")
	}
	if ev.GetResult().GetContent()[0].GetText().GetText() != "caf\xe9 ok" {
		t.Error("the codec changed the caller's message")
	}
}

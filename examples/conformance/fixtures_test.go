package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/sdk/sdktest"
)

// kinds returns the content types of a result, in order.
func kinds(r *sdktest.Result) []string {
	var out []string
	for _, c := range r.Content {
		out = append(out, c.Type)
	}
	return out
}

func TestTools(t *testing.T) {
	p := sdktest.StartInProcess(t, New(), sdktest.WithClient(func(method string, params json.RawMessage) (json.RawMessage, error) {
		switch method {
		case "sampling/createMessage":
			return json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"hi from the model"},"model":"test-model"}`), nil
		case "elicitation/create":
			return json.RawMessage(`{"action":"accept","content":{"response":"yes"}}`), nil
		}
		t.Errorf("client asked %s, want sampling or elicitation", method)
		return nil, nil
	}))
	tests := []struct {
		tool      string
		args      any
		wantKinds []string
		wantText  string
		wantError bool
	}{
		{tool: "test_simple_text", wantKinds: []string{"text"}, wantText: "simple text response"},
		{tool: "test_image_content", wantKinds: []string{"image"}},
		{tool: "test_audio_content", wantKinds: []string{"audio"}},
		{tool: "test_embedded_resource", wantKinds: []string{"resource"}},
		{tool: "test_multiple_content_types", wantKinds: []string{"text", "image", "resource"}},
		{tool: "test_tool_with_logging", wantKinds: []string{"text"}, wantText: "successfully"},
		{tool: "test_error_handling", wantKinds: []string{"text"}, wantText: "intentionally", wantError: true},
		{tool: "test_reconnection", wantKinds: []string{"text"}, wantText: "completed successfully"},
		{tool: "test_sampling", args: map[string]any{"prompt": "hello"}, wantKinds: []string{"text"}, wantText: "LLM response: hi from the model"},
		{tool: "test_elicitation", args: map[string]any{"message": "ok?"}, wantKinds: []string{"text"}, wantText: `action=accept, content={"response":"yes"}`},
		{tool: "test_elicitation_sep1034_defaults", wantKinds: []string{"text"}, wantText: "action=accept"},
		{tool: "test_elicitation_sep1330_enums", wantKinds: []string{"text"}, wantText: "action=accept"},
		{tool: "json_schema_2020_12_tool", args: map[string]any{"name": "Ada"}, wantKinds: []string{"text"}, wantText: `"name":"Ada"`},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			args := tt.args
			if args == nil {
				args = map[string]any{}
			}
			res := p.Call(tt.tool, args)
			if diff := cmp.Diff(tt.wantKinds, kinds(res)); diff != "" {
				t.Errorf("%s: content types (-want +got):\n%s", tt.tool, diff)
			}
			if !strings.Contains(res.Text(), tt.wantText) || res.IsError != tt.wantError {
				t.Errorf("%s = %q (isError %v), want it to contain %q (isError %v)", tt.tool, res.Text(), res.IsError, tt.wantText, tt.wantError)
			}
			if d := p.Tool(tt.tool).Description; d == "" {
				t.Errorf("%s has no description; the suite's tools-list refuses that", tt.tool)
			}
		})
	}
}

func TestProgress(t *testing.T) {
	p := sdktest.StartInProcess(t, New())
	var got []float64
	_, err := p.CallContext(t.Context(), "test_tool_with_progress", map[string]any{}, func(pr sdktest.Progress) {
		got = append(got, pr.Progress)
		if pr.Total != 100 {
			t.Errorf("progress total = %v, want 100", pr.Total)
		}
	})
	if err != nil {
		t.Fatalf("test_tool_with_progress: %v", err)
	}
	if diff := cmp.Diff([]float64{0, 50, 100}, got); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
}

func TestJSONSchema202012Preserved(t *testing.T) {
	p := sdktest.StartInProcess(t, New())
	var schema map[string]any
	if err := json.Unmarshal(p.Tool("json_schema_2020_12_tool").InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"$schema", "$defs", "additionalProperties"} {
		if _, ok := schema[key]; !ok {
			t.Errorf("input schema of json_schema_2020_12_tool lost %s: %v", key, schema)
		}
	}
}

func TestResources(t *testing.T) {
	p := sdktest.StartInProcess(t, New())
	tests := []struct {
		uri, wantMIME, wantText string
		wantBlob                bool
	}{
		{uri: "test://static-text", wantMIME: "text/plain", wantText: "static text resource"},
		{uri: "test://static-binary", wantMIME: "image/png", wantBlob: true},
		{uri: "test://watched-resource", wantMIME: "text/plain", wantText: "Watched"},
		{uri: "test://template/123/data", wantMIME: "application/json", wantText: `"id":"123"`},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			got := p.ReadResource(tt.uri)
			if len(got) != 1 {
				t.Fatalf("ReadResource(%q) = %d contents, want 1", tt.uri, len(got))
			}
			c := got[0]
			if c.URI != tt.uri || c.MIMEType != tt.wantMIME || !strings.Contains(c.Text, tt.wantText) || (len(c.Blob) > 0) != tt.wantBlob {
				t.Errorf("ReadResource(%q) = %+v, want MIME %s, text with %q, blob %v", tt.uri, c, tt.wantMIME, tt.wantText, tt.wantBlob)
			}
		})
	}
}

func TestPrompts(t *testing.T) {
	p := sdktest.StartInProcess(t, New())
	simple := p.GetPrompt("test_simple_prompt", nil)
	if len(simple.Messages) != 1 || simple.Messages[0].Role != "user" || simple.Messages[0].Text == "" {
		t.Errorf("test_simple_prompt = %+v, want one user text message", simple.Messages)
	}
	args := p.GetPrompt("test_prompt_with_arguments", map[string]string{"arg1": "a-one", "arg2": "a-two"})
	if text := args.Messages[0].Text; !strings.Contains(text, "a-one") || !strings.Contains(text, "a-two") {
		t.Errorf("test_prompt_with_arguments = %q, want both arguments in it", text)
	}
	embedded := p.GetPrompt("test_prompt_with_embedded_resource", map[string]string{"resourceUri": "test://example-resource"})
	if r := embedded.Messages[0].Resource; r == nil || r.URI != "test://example-resource" {
		t.Errorf("test_prompt_with_embedded_resource first message = %+v, want the resource test://example-resource", embedded.Messages[0])
	}
	image := p.GetPrompt("test_prompt_with_image", nil)
	if m := image.Messages[0]; len(m.Image) == 0 || m.MIMEType != "image/png" {
		t.Errorf("test_prompt_with_image first message = %+v, want a PNG image", m)
	}
	if got := p.Complete("prompt", "test_prompt_with_arguments", "arg1", "par", nil); !cmp.Equal(got, []string{"paris", "park", "party"}) {
		t.Errorf("Complete(arg1, par) = %v, want [paris park party]", got)
	}
}

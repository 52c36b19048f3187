package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/sdk"
)

// The fixtures' binary payloads, as the suite's reference server has them:
// a 1x1 red PNG and a minimal WAV file.
var (
	testImage = mustBase64("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")
	testAudio = mustBase64("UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=")
)

// stepDelay is the pause between the notifications of the logging and
// progress tools, as in the reference server.
const stepDelay = 50 * time.Millisecond

// jsonSchema202012 is the input schema of json_schema_2020_12_tool (SEP-1613):
// the suite checks that $schema, $defs and additionalProperties reach the
// client unchanged.
const jsonSchema202012 = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "$defs": {
    "address": {
      "type": "object",
      "properties": {
        "street": {"type": "string"},
        "city": {"type": "string"}
      }
    }
  },
  "properties": {
    "name": {"type": "string"},
    "address": {"$ref": "#/$defs/address"}
  },
  "additionalProperties": false
}`

// The elicitation schemas the suite checks field by field: SEP-1034 (a
// default for every primitive type) and SEP-1330 (the five enum variants).
const (
	elicitDefaultsSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "description": "User name", "default": "John Doe"},
    "age": {"type": "integer", "description": "User age", "default": 30},
    "score": {"type": "number", "description": "User score", "default": 95.5},
    "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
    "verified": {"type": "boolean", "description": "Verification status", "default": true}
  },
  "required": []
}`
	elicitEnumsSchema = `{
  "type": "object",
  "properties": {
    "untitledSingle": {"type": "string", "description": "Select one option", "enum": ["option1", "option2", "option3"]},
    "titledSingle": {"type": "string", "description": "Select one option with titles", "oneOf": [
      {"const": "value1", "title": "First Option"},
      {"const": "value2", "title": "Second Option"},
      {"const": "value3", "title": "Third Option"}
    ]},
    "legacyEnum": {"type": "string", "description": "Select one option (legacy)", "enum": ["opt1", "opt2", "opt3"],
      "enumNames": ["Option One", "Option Two", "Option Three"]},
    "untitledMulti": {"type": "array", "description": "Select multiple options", "minItems": 1, "maxItems": 3,
      "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
    "titledMulti": {"type": "array", "description": "Select multiple options with titles", "minItems": 1, "maxItems": 3,
      "items": {"anyOf": [
        {"const": "value1", "title": "First Choice"},
        {"const": "value2", "title": "Second Choice"},
        {"const": "value3", "title": "Third Choice"}
      ]}}
  },
  "required": []
}`
	elicitResponseSchema = `{
  "type": "object",
  "properties": {"response": {"type": "string", "description": "User's response"}},
  "required": ["response"]
}`
)

// noArgs is the input of the tools that take no arguments.
type noArgs struct{}

type samplingArgs struct {
	Prompt string `json:"prompt" jsonschema:"description=The prompt to send to the LLM"`
}

type elicitationArgs struct {
	Message string `json:"message" jsonschema:"description=The message to show the user"`
}

// New returns the conformance plugin: the tools, resources, resource
// template and prompts that the MCP conformance suite's server scenarios
// call by name, with the behaviour each scenario checks.
func New() *sdk.Server {
	s := sdk.NewServer("conformance", "1.0.0",
		sdk.WithInstructions("Fixtures for the MCP conformance suite's server scenarios."))
	addTools(s)
	addResources(s)
	addPrompts(s)
	return s
}

func addTools(s *sdk.Server) {
	static := func(name, description string, result func() *sdk.Result) {
		sdk.AddTool(s, sdk.Tool{Name: name, Description: description, ReadOnly: true},
			func(context.Context, *sdk.Request, noArgs) (*sdk.Result, error) { return result(), nil })
	}
	static("test_simple_text", "Tests simple text content response", func() *sdk.Result {
		return sdk.Text("This is a simple text response for testing.")
	})
	static("test_image_content", "Tests image content response", func() *sdk.Result {
		return (&sdk.Result{}).WithImage(testImage, "image/png")
	})
	static("test_audio_content", "Tests audio content response", func() *sdk.Result {
		return (&sdk.Result{}).WithAudio(testAudio, "audio/wav")
	})
	static("test_embedded_resource", "Tests embedded resource content response", func() *sdk.Result {
		return (&sdk.Result{}).WithResource(sdk.ResourceContents{
			URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource content.",
		})
	})
	static("test_multiple_content_types", "Tests response with multiple content types (text, image, resource)", func() *sdk.Result {
		return sdk.Text("Multiple content types test:").
			WithImage(testImage, "image/png").
			WithResource(sdk.ResourceContents{
				URI: "test://mixed-content-resource", MIMEType: "application/json", Text: `{"test":"data","value":123}`,
			})
	})

	sdk.AddTool(s, sdk.Tool{Name: "test_tool_with_logging", Description: "Tests tool that emits log messages during execution", ReadOnly: true},
		func(ctx context.Context, req *sdk.Request, _ noArgs) (*sdk.Result, error) {
			steps := []string{"Tool execution started", "Tool processing data", "Tool execution completed"}
			for i, msg := range steps {
				if i > 0 {
					if err := sleep(ctx, stepDelay); err != nil {
						return nil, err
					}
				}
				req.Log(slog.LevelInfo, msg)
			}
			return sdk.Text("Tool with logging executed successfully"), nil
		})

	sdk.AddTool(s, sdk.Tool{Name: "test_tool_with_progress", Description: "Tests tool that reports progress notifications", ReadOnly: true},
		func(ctx context.Context, req *sdk.Request, _ noArgs) (*sdk.Result, error) {
			for i, p := range []float64{0, 50, 100} {
				if i > 0 {
					if err := sleep(ctx, stepDelay); err != nil {
						return nil, err
					}
				}
				req.Progress(p, 100, fmt.Sprintf("Completed step %g of 100", p))
			}
			return sdk.Text("Progress reported: 0, 50 and 100 of 100"), nil
		})

	sdk.AddTool(s, sdk.Tool{Name: "test_error_handling", Description: "Tests error response handling", ReadOnly: true},
		func(context.Context, *sdk.Request, noArgs) (*sdk.Result, error) {
			return sdk.ErrorResult("This tool intentionally returns an error for testing"), nil
		})

	// The reference server closes the SSE stream mid-call here (SEP-1699);
	// a plugin cannot, so whether the stream is polled is the host's doing.
	sdk.AddTool(s, sdk.Tool{
		Name:        "test_reconnection",
		Description: "Tests SSE stream disconnection and client reconnection (SEP-1699): answers after a short pause.",
		ReadOnly:    true,
	}, func(ctx context.Context, _ *sdk.Request, _ noArgs) (*sdk.Result, error) {
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
		return sdk.Text("Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure."), nil
	})

	sdk.AddTool(s, sdk.Tool{Name: "test_sampling", Description: "Tests server-initiated sampling (LLM completion request)", ReadOnly: true},
		func(ctx context.Context, req *sdk.Request, in samplingArgs) (*sdk.Result, error) {
			res, err := req.CreateMessage(ctx, sdk.SamplingRequest{
				Messages:  []sdk.SamplingMessage{{Role: "user", Content: sdk.SamplingContent{Type: "text", Text: in.Prompt}}},
				MaxTokens: 100,
			})
			if err != nil {
				return sdk.ErrorResult("Sampling not supported or error: %v", err), nil
			}
			return sdk.Textf("LLM response: %s", res.Content.Text), nil
		})

	ask := func(ctx context.Context, req *sdk.Request, text, schema, prefix string) (*sdk.Result, error) {
		res, err := req.Elicit(ctx, text, json.RawMessage(schema))
		if err != nil {
			return sdk.ErrorResult("Elicitation not supported or error: %v", err), nil
		}
		content, err := json.Marshal(res.Content)
		if err != nil || res.Content == nil {
			content = []byte("{}")
		}
		return sdk.Textf("%s: action=%s, content=%s", prefix, res.Action, content), nil
	}
	sdk.AddTool(s, sdk.Tool{Name: "test_elicitation", Description: "Tests server-initiated elicitation (user input request)", ReadOnly: true},
		func(ctx context.Context, req *sdk.Request, in elicitationArgs) (*sdk.Result, error) {
			return ask(ctx, req, in.Message, elicitResponseSchema, "User response")
		})
	// The SEP tools take no arguments: the suite calls them with {}.
	for _, t := range []struct{ name, description, message, schema string }{
		{"test_elicitation_sep1034_defaults", "Tests elicitation with default values per SEP-1034", "Please review and update the form fields with defaults", elicitDefaultsSchema},
		{"test_elicitation_sep1330_enums", "Tests elicitation with enum schema improvements per SEP-1330", "Please select options from the enum fields", elicitEnumsSchema},
	} {
		sdk.AddTool(s, sdk.Tool{Name: t.name, Description: t.description, ReadOnly: true},
			func(ctx context.Context, req *sdk.Request, _ struct{}) (*sdk.Result, error) {
				return ask(ctx, req, t.message, t.schema, "Elicitation completed")
			})
	}

	sdk.AddRawTool(s, sdk.Tool{
		Name:        "json_schema_2020_12_tool",
		Description: "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
		ReadOnly:    true,
	}, json.RawMessage(jsonSchema202012), func(_ context.Context, req *sdk.Request) (*sdk.Result, error) {
		args := req.Arguments
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		return sdk.Textf("JSON Schema 2020-12 tool called with: %s", args), nil
	})
}

func addResources(s *sdk.Server) {
	text := func(uri, name, title, description, mimeType, body string) {
		sdk.AddResource(s, sdk.Resource{URI: uri, Name: name, Title: title, Description: description, MIMEType: mimeType},
			func(context.Context, *sdk.ResourceRequest) ([]sdk.ResourceContents, error) {
				return []sdk.ResourceContents{{URI: uri, MIMEType: mimeType, Text: body}}, nil
			})
	}
	text("test://static-text", "static-text", "Static Text Resource", "A static text resource for testing",
		"text/plain", "This is the content of the static text resource.")
	text("test://watched-resource", "watched-resource", "Watched Resource", "A resource clients can subscribe to",
		"text/plain", "Watched resource content")
	sdk.AddResource(s, sdk.Resource{
		URI: "test://static-binary", Name: "static-binary", Title: "Static Binary Resource",
		Description: "A static binary resource (image) for testing", MIMEType: "image/png", Size: int64(len(testImage)),
	}, func(context.Context, *sdk.ResourceRequest) ([]sdk.ResourceContents, error) {
		return []sdk.ResourceContents{{URI: "test://static-binary", MIMEType: "image/png", Blob: testImage}}, nil
	})
	sdk.AddResourceTemplate(s, sdk.ResourceTemplate{
		URITemplate: "test://template/{id}/data", Name: "template", Title: "Resource Template",
		Description: "A resource template with parameter substitution", MIMEType: "application/json",
	}, func(_ context.Context, req *sdk.ResourceRequest) ([]sdk.ResourceContents, error) {
		id := req.Variables["id"]
		body, err := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
		if err != nil {
			return nil, err
		}
		return []sdk.ResourceContents{{URI: req.URI, MIMEType: "application/json", Text: string(body)}}, nil
	})
}

func addPrompts(s *sdk.Server) {
	sdk.AddPrompt(s, sdk.Prompt{Name: "test_simple_prompt", Title: "Simple Test Prompt", Description: "A simple prompt without arguments"},
		func(context.Context, *sdk.PromptRequest) (*sdk.PromptResult, error) {
			return &sdk.PromptResult{Messages: []sdk.PromptMessage{{Role: "user", Text: "This is a simple prompt for testing."}}}, nil
		})

	sdk.AddPrompt(s, sdk.Prompt{
		Name: "test_prompt_with_arguments", Title: "Prompt With Arguments", Description: "A prompt with required arguments",
		Arguments: []sdk.PromptArgument{
			{Name: "arg1", Description: "First test argument", Required: true, Complete: completeFrom("paris", "park", "party", "test", "testing")},
			{Name: "arg2", Description: "Second test argument", Required: true},
		},
	}, func(_ context.Context, req *sdk.PromptRequest) (*sdk.PromptResult, error) {
		text := fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", req.Arguments["arg1"], req.Arguments["arg2"])
		return &sdk.PromptResult{Messages: []sdk.PromptMessage{{Role: "user", Text: text}}}, nil
	})

	sdk.AddPrompt(s, sdk.Prompt{
		Name: "test_prompt_with_embedded_resource", Title: "Prompt With Embedded Resource",
		Description: "A prompt that includes an embedded resource",
		Arguments:   []sdk.PromptArgument{{Name: "resourceUri", Description: "URI of the resource to embed", Required: true}},
	}, func(_ context.Context, req *sdk.PromptRequest) (*sdk.PromptResult, error) {
		return &sdk.PromptResult{Messages: []sdk.PromptMessage{
			{Role: "user", Resource: &sdk.ResourceContents{
				URI: req.Arguments["resourceUri"], MIMEType: "text/plain", Text: "Embedded resource content for testing.",
			}},
			{Role: "user", Text: "Please process the embedded resource above."},
		}}, nil
	})

	sdk.AddPrompt(s, sdk.Prompt{Name: "test_prompt_with_image", Title: "Prompt With Image", Description: "A prompt that includes image content"},
		func(context.Context, *sdk.PromptRequest) (*sdk.PromptResult, error) {
			return &sdk.PromptResult{Messages: []sdk.PromptMessage{
				{Role: "user", Image: testImage, MIMEType: "image/png"},
				{Role: "user", Text: "Please analyze the image above."},
			}}, nil
		})
}

// completeFrom suggests the candidates that start with what was typed.
func completeFrom(candidates ...string) func(context.Context, string, map[string]string) ([]string, error) {
	return func(_ context.Context, value string, _ map[string]string) ([]string, error) {
		var out []string
		for _, c := range candidates {
			if strings.HasPrefix(c, value) {
				out = append(out, c)
			}
		}
		return out, nil
	}
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func mustBase64(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

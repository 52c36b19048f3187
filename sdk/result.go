package sdk

import (
	"encoding/json"
	"fmt"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
)

// Result is what a tool returns: content blocks, optional structured
// content, and whether the tool failed. Build one with Text, JSON or ErrorResult
// and add to it with the With methods.
type Result struct {
	content    []*pluginv1.Content
	structured json.RawMessage
	isError    bool
}

// Text returns a result with one text block.
func Text(text string) *Result {
	return (&Result{}).WithText(text)
}

// Textf returns a result with one formatted text block.
func Textf(format string, args ...any) *Result { return Text(fmt.Sprintf(format, args...)) }

// JSON returns a result whose structured content is v, with the same JSON
// as a text block for clients that only read text.
func JSON(v any) (*Result, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("sdk: result is not JSON: %w", err)
	}
	return &Result{
		content:    []*pluginv1.Content{textContent(string(b))},
		structured: b,
	}, nil
}

// ErrorResult returns a result that reports a failure to the model (MCP's
// isError): the tool ran and failed, and the formatted message tells the
// model why and what to do. It is a result, not a Go error: return it with a
// nil error. (A Go error returned by a handler becomes such a result too.)
func ErrorResult(format string, args ...any) *Result {
	r := Text(fmt.Sprintf(format, args...))
	r.isError = true
	return r
}

// WithText appends a text block.
func (r *Result) WithText(text string) *Result {
	r.content = append(r.content, textContent(text))
	return r
}

// WithImage appends an image block.
func (r *Result) WithImage(data []byte, mimeType string) *Result {
	r.content = append(r.content, &pluginv1.Content{Kind: &pluginv1.Content_Image{
		Image: &pluginv1.BinaryContent{Data: data, MimeType: mimeType},
	}})
	return r
}

// WithAudio appends an audio block.
func (r *Result) WithAudio(data []byte, mimeType string) *Result {
	r.content = append(r.content, &pluginv1.Content{Kind: &pluginv1.Content_Audio{
		Audio: &pluginv1.BinaryContent{Data: data, MimeType: mimeType},
	}})
	return r
}

// WithResourceLink appends a link to a resource.
func (r *Result) WithResourceLink(uri, name, description, mimeType string) *Result {
	r.content = append(r.content, &pluginv1.Content{Kind: &pluginv1.Content_ResourceLink{
		ResourceLink: &pluginv1.ResourceLink{Uri: uri, Name: name, Description: description, MimeType: mimeType},
	}})
	return r
}

// WithResource appends an embedded resource: its contents inline, Text or
// Blob, under its URI and MIMEType (MCP's "resource" content).
func (r *Result) WithResource(c ResourceContents) *Result {
	r.content = append(r.content, &pluginv1.Content{Kind: &pluginv1.Content_Resource{Resource: embedded(c, "")}})
	return r
}

// WithStructured sets the structured content (raw JSON, passed through).
func (r *Result) WithStructured(raw json.RawMessage) *Result {
	r.structured = raw
	return r
}

// Texts returns the result's text blocks.
func (r *Result) Texts() []string {
	var out []string
	for _, c := range r.content {
		if t := c.GetText(); t != nil {
			out = append(out, t.GetText())
		}
	}
	return out
}

// IsError reports whether the result is an error result.
func (r *Result) IsError() bool { return r.isError }

func (r *Result) wire() *pluginv1.Result {
	return &pluginv1.Result{Content: r.content, StructuredContent: r.structured, IsError: r.isError}
}

func textContent(s string) *pluginv1.Content {
	return &pluginv1.Content{Kind: &pluginv1.Content_Text{Text: &pluginv1.TextContent{Text: s}}}
}

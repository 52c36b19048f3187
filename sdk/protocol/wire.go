package protocol

import (
	"encoding/json"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// This file is where the plugin protocol's generated call types become the
// host's (package toolcall); nothing past Client.Call sees them.

// resultFromWire converts a plugin's result.
func resultFromWire(r *pluginv1.Result) *toolcall.Result {
	out := &toolcall.Result{IsError: r.GetIsError(), Content: make([]toolcall.Content, 0, len(r.GetContent()))}
	if len(r.GetStructuredContent()) > 0 {
		out.StructuredContent = json.RawMessage(r.GetStructuredContent())
	}
	for _, c := range r.GetContent() {
		if item, ok := ContentFromWire(c); ok {
			out.Content = append(out.Content, item)
		}
	}
	return out
}

// ContentFromWire converts one content item of a plugin's result or
// prompt; ok is false for a kind from a newer plugin that this host does
// not know (it is dropped: the host could not show it to a client anyway).
func ContentFromWire(c *pluginv1.Content) (item toolcall.Content, ok bool) {
	switch k := c.GetKind().(type) {
	case *pluginv1.Content_Text:
		return toolcall.TextContent(k.Text.GetText()), true
	case *pluginv1.Content_Image:
		return toolcall.Content{Type: toolcall.TypeImage, Data: k.Image.GetData(), MIMEType: k.Image.GetMimeType()}, true
	case *pluginv1.Content_Audio:
		return toolcall.Content{Type: toolcall.TypeAudio, Data: k.Audio.GetData(), MIMEType: k.Audio.GetMimeType()}, true
	case *pluginv1.Content_ResourceLink:
		l := k.ResourceLink
		return toolcall.Content{Type: toolcall.TypeResourceLink, URI: l.GetUri(), Name: l.GetName(), Description: l.GetDescription(), MIMEType: l.GetMimeType()}, true
	case *pluginv1.Content_Resource:
		return ResourceFromWire(k.Resource), true
	}
	return toolcall.Content{}, false
}

// ResourceFromWire converts an embedded resource (a resource's contents).
func ResourceFromWire(r *pluginv1.EmbeddedResource) toolcall.Content {
	return toolcall.Content{Type: toolcall.TypeResource, URI: r.GetUri(), MIMEType: r.GetMimeType(), Text: r.GetText(), Blob: r.GetBlob()}
}

// progressFromWire converts a progress event.
func progressFromWire(p *pluginv1.Progress) toolcall.Progress {
	return toolcall.Progress{Progress: p.GetProgress(), Total: p.GetTotal(), Message: p.GetMessage()}
}

// logEvent logs a plugin's log event on log (nil drops it), with its
// fields and the tool's name.
// maxLogFields bounds the JSON of one log event's fields the host decodes
// and logs.
const maxLogFields = 16 << 10

func logEvent(log hclog.Logger, tool string, l *pluginv1.Log) {
	if log == nil {
		return
	}
	var kv []any
	if n := len(l.GetFieldsJson()); n > maxLogFields {
		kv = append(kv, "fields", fmt.Sprintf("[%d bytes of fields, not logged]", n))
	} else if n > 0 {
		var m map[string]any
		if json.Unmarshal(l.GetFieldsJson(), &m) == nil {
			for k, v := range m {
				kv = append(kv, k, v)
			}
		}
	}
	kv = append(kv, "tool", tool)
	level := hclog.Info
	switch l.GetLevel() {
	case pluginv1.LogLevel_LOG_LEVEL_TRACE:
		level = hclog.Trace
	case pluginv1.LogLevel_LOG_LEVEL_DEBUG:
		level = hclog.Debug
	case pluginv1.LogLevel_LOG_LEVEL_WARN:
		level = hclog.Warn
	case pluginv1.LogLevel_LOG_LEVEL_ERROR:
		level = hclog.Error
	}
	log.Log(level, l.GetMessage(), kv...)
}

// logFromWire converts a log event to the host's terms (MCP's levels).
func logFromWire(l *pluginv1.Log) toolcall.Log {
	level := "info"
	switch l.GetLevel() {
	case pluginv1.LogLevel_LOG_LEVEL_TRACE, pluginv1.LogLevel_LOG_LEVEL_DEBUG:
		level = "debug"
	case pluginv1.LogLevel_LOG_LEVEL_WARN:
		level = "warning"
	case pluginv1.LogLevel_LOG_LEVEL_ERROR:
		level = "error"
	}
	out := toolcall.Log{Level: level, Message: l.GetMessage()}
	if len(l.GetFieldsJson()) > 0 {
		out.Fields = json.RawMessage(l.GetFieldsJson())
	}
	return out
}

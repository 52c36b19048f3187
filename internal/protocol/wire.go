package protocol

import (
	"encoding/json"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/internal/pluginv1"
	"github.com/switchboard-mcp/switchboard/internal/toolcall"
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
		switch k := c.GetKind().(type) {
		case *pluginv1.Content_Text:
			out.Content = append(out.Content, toolcall.TextContent(k.Text.GetText()))
		case *pluginv1.Content_Image:
			out.Content = append(out.Content, toolcall.Content{Type: toolcall.TypeImage, Data: k.Image.GetData(), MIMEType: k.Image.GetMimeType()})
		case *pluginv1.Content_Audio:
			out.Content = append(out.Content, toolcall.Content{Type: toolcall.TypeAudio, Data: k.Audio.GetData(), MIMEType: k.Audio.GetMimeType()})
		case *pluginv1.Content_ResourceLink:
			l := k.ResourceLink
			out.Content = append(out.Content, toolcall.Content{Type: toolcall.TypeResourceLink, URI: l.GetUri(), Name: l.GetName(), Description: l.GetDescription(), MIMEType: l.GetMimeType()})
		case *pluginv1.Content_Resource:
			res := k.Resource
			out.Content = append(out.Content, toolcall.Content{Type: toolcall.TypeResource, URI: res.GetUri(), MIMEType: res.GetMimeType(), Text: res.GetText(), Blob: res.GetBlob()})
		}
		// A kind from a newer plugin that this host does not know is
		// dropped: the host could not show it to a client anyway.
	}
	return out
}

// progressFromWire converts a progress event.
func progressFromWire(p *pluginv1.Progress) toolcall.Progress {
	return toolcall.Progress{Progress: p.GetProgress(), Total: p.GetTotal(), Message: p.GetMessage()}
}

// logEvent logs a plugin's log event on log (nil drops it), with its
// fields and the tool's name.
func logEvent(log hclog.Logger, tool string, l *pluginv1.Log) {
	if log == nil {
		return
	}
	var kv []any
	if len(l.GetFieldsJson()) > 0 {
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

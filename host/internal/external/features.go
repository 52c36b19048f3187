package external

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/feature"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// An external server's resources, resource templates, prompts and
// completion, passed through. Requests are sent raw (as for tools) so that
// what mcp-go's types drop survives: resource contents and prompt content
// items keep the server's JSON (toolcall.Content.Raw).

// eventQueue is how many notifications wait for Watch; more are dropped
// (the read loop must never block).
const eventQueue = 256

// request sends one request raw and returns its result.
func (s *Server) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	resp, err := s.tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: s.id(), Method: method, Params: params})
	if err != nil {
		if ctx.Err() != nil {
			return nil, protocol.Errorf(protocol.CodeCancelled, "%s: %v", method, err)
		}
		return nil, protocol.Errorf(protocol.CodeUnavailable, "external %s: %s: %v", s.spec.Name, method, err)
	}
	if resp.Error != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "external %s: %s: %s", s.spec.Name, method, resp.Error.Message)
	}
	return resp.Result, nil
}

// listAll reads a paginated list (resources/list …), item by item.
func (s *Server) listAll(ctx context.Context, method, field string) ([]json.RawMessage, error) {
	var out []json.RawMessage
	cursor := ""
	for page := 0; page < 100; page++ {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		res, err := s.request(ctx, method, params)
		if err != nil {
			return nil, err
		}
		var r map[string]json.RawMessage
		if err := json.Unmarshal(res, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		var items []json.RawMessage
		if raw, ok := r[field]; ok && present(raw) {
			if err := json.Unmarshal(raw, &items); err != nil {
				return nil, fmt.Errorf("%s: %w", method, err)
			}
		}
		out = append(out, items...)
		var next string
		if raw, ok := r["nextCursor"]; ok && present(raw) {
			_ = json.Unmarshal(raw, &next)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	return out, nil
}

// listFeatures fills info with the resources, templates and prompts the
// server's capabilities announce.
func (s *Server) listFeatures(ctx context.Context, info *toolcall.Description) error {
	if s.caps.Resources != nil {
		items, err := s.listAll(ctx, "resources/list", "resources")
		if err != nil {
			return err
		}
		for _, raw := range items {
			var r struct {
				URI, Name, Title, Description, MIMEType string
				Size                                    int64
				Annotations                             json.RawMessage
			}
			if err := json.Unmarshal(raw, &r); err != nil {
				return fmt.Errorf("resources/list: %w", err)
			}
			res := &toolcall.Resource{URI: r.URI, Name: r.Name, Title: r.Title, Description: r.Description, MIMEType: r.MIMEType, Size: r.Size}
			if present(r.Annotations) {
				res.AnnotationsJSON = r.Annotations
			}
			info.Resources = append(info.Resources, res)
		}
		templates, err := s.listAll(ctx, "resources/templates/list", "resourceTemplates")
		if err != nil {
			// Templates are optional in practice: some servers with
			// resources answer "method not found".
			s.log.Debug("resources/templates/list failed", "error", err)
		}
		for _, raw := range templates {
			var t struct {
				URITemplate                        string `json:"uriTemplate"`
				Name, Title, Description, MIMEType string
				Annotations                        json.RawMessage
			}
			if err := json.Unmarshal(raw, &t); err != nil {
				return fmt.Errorf("resources/templates/list: %w", err)
			}
			rt := &toolcall.ResourceTemplate{URITemplate: t.URITemplate, Name: t.Name, Title: t.Title, Description: t.Description, MIMEType: t.MIMEType}
			if present(t.Annotations) {
				rt.AnnotationsJSON = t.Annotations
			}
			info.ResourceTemplates = append(info.ResourceTemplates, rt)
		}
		info.ResourceSubscribe = s.caps.Resources.Subscribe
	}
	if s.caps.Prompts != nil {
		items, err := s.listAll(ctx, "prompts/list", "prompts")
		if err != nil {
			return err
		}
		for _, raw := range items {
			var p struct {
				Name, Title, Description string
				Arguments                []struct {
					Name, Title, Description string
					Required                 bool
				}
			}
			if err := json.Unmarshal(raw, &p); err != nil {
				return fmt.Errorf("prompts/list: %w", err)
			}
			pp := &toolcall.Prompt{Name: p.Name, Title: p.Title, Description: p.Description}
			for _, a := range p.Arguments {
				pp.Arguments = append(pp.Arguments, &toolcall.PromptArgument{Name: a.Name, Title: a.Title, Description: a.Description, Required: a.Required})
			}
			info.Prompts = append(info.Prompts, pp)
		}
	}
	info.Completions = s.caps.Completions != nil
	return nil
}

// ReadResource sends resources/read; each item keeps the server's JSON.
func (s *Server) ReadResource(ctx context.Context, uri string) ([]toolcall.Content, error) {
	res, err := s.request(ctx, "resources/read", map[string]any{"uri": uri})
	if err != nil {
		return nil, err
	}
	var r struct {
		Contents []json.RawMessage `json:"contents"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "resources/read: %v", err)
	}
	out := make([]toolcall.Content, 0, len(r.Contents))
	for _, raw := range r.Contents {
		var v struct {
			URI, MIMEType, Text, Blob string
		}
		c := toolcall.Content{Type: toolcall.TypeResource, Raw: raw}
		if json.Unmarshal(raw, &v) == nil {
			c.URI, c.MIMEType, c.Text = v.URI, v.MIMEType, v.Text
			if v.Blob != "" {
				c.Blob, _ = base64.StdEncoding.DecodeString(v.Blob)
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// GetPrompt sends prompts/get; content items keep the server's JSON.
func (s *Server) GetPrompt(ctx context.Context, name string, args map[string]string) (*feature.PromptResult, error) {
	params := map[string]any{"name": name}
	if len(args) > 0 {
		params["arguments"] = args
	}
	res, err := s.request(ctx, "prompts/get", params)
	if err != nil {
		return nil, err
	}
	var r struct {
		Description string
		Messages    []struct {
			Role    string
			Content json.RawMessage
		}
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "prompts/get: %v", err)
	}
	out := &feature.PromptResult{Description: r.Description}
	for _, m := range r.Messages {
		out.Messages = append(out.Messages, feature.PromptMessage{Role: m.Role, Content: contentFromRaw(m.Content)})
	}
	return out, nil
}

// Complete sends completion/complete.
func (s *Server) Complete(ctx context.Context, req feature.CompleteRequest) (*feature.Completion, error) {
	ref := map[string]any{}
	switch req.RefType {
	case feature.RefPrompt:
		ref["type"], ref["name"] = "ref/prompt", req.Ref
	default:
		ref["type"], ref["uri"] = "ref/resource", req.Ref
	}
	params := map[string]any{"ref": ref, "argument": map[string]any{"name": req.Argument, "value": req.Value}}
	if len(req.Context) > 0 {
		params["context"] = map[string]any{"arguments": maps.Clone(req.Context)}
	}
	res, err := s.request(ctx, "completion/complete", params)
	if err != nil {
		return nil, err
	}
	var r struct {
		Completion struct {
			Values  []string
			Total   int
			HasMore bool
		}
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "completion/complete: %v", err)
	}
	return &feature.Completion{Values: r.Completion.Values, Total: r.Completion.Total, HasMore: r.Completion.HasMore}, nil
}

// Subscribe sends resources/subscribe or resources/unsubscribe.
func (s *Server) Subscribe(ctx context.Context, uri string, on bool) error {
	method := "resources/subscribe"
	if !on {
		method = "resources/unsubscribe"
	}
	_, err := s.request(ctx, method, map[string]any{"uri": uri})
	return err
}

// queueEvent hands a notification to Watch without blocking the read
// loop; one that does not fit is dropped (and logged).
func (s *Server) queueEvent(n mcp.JSONRPCNotification) {
	select {
	case s.events <- n:
	default:
		s.drops.dropped(s.log, "notifications dropped: too many waiting", "method", n.Method)
	}
}

// Watch turns the server's notifications into events until ctx ends or the
// connection goes: a list_changed re-lists tools, resources, templates and
// prompts (on this goroutine, never on the client's read loop) before the
// ListChanged event; notifications/message becomes a Log event. Only one
// Watch at a time gets the events.
func (s *Server) Watch(ctx context.Context, fn func(feature.Event)) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return protocol.ErrUnavailable
		case n := <-s.events:
			if ev, ok := s.event(ctx, n); ok {
				fn(ev)
			}
		}
	}
}

// event converts one notification.
func (s *Server) event(ctx context.Context, n mcp.JSONRPCNotification) (feature.Event, bool) {
	f := n.Params.AdditionalFields
	switch n.Method {
	case string(mcp.MethodNotificationResourceUpdated):
		uri, _ := f["uri"].(string)
		return feature.Event{Kind: feature.ResourceUpdated, URI: uri}, uri != ""
	case string(mcp.MethodNotificationResourcesListChanged), string(mcp.MethodNotificationPromptsListChanged), string(mcp.MethodNotificationToolsListChanged):
		if err := s.relist(ctx); err != nil {
			s.log.Warn("the server's lists changed but listing them again failed", "error", err)
			return feature.Event{}, false
		}
		return feature.Event{Kind: feature.ListChanged}, true
	case string(mcp.MethodNotificationMessage):
		ev := feature.Event{Kind: feature.Log}
		ev.Level, _ = f["level"].(string)
		ev.Logger, _ = f["logger"].(string)
		ev.Data, _ = json.Marshal(f["data"])
		return ev, true
	}
	return feature.Event{}, false
}

// relist reads every list again and replaces the description.
func (s *Server) relist(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.spec.Timeout)
	defer cancel()
	tools, err := s.listTools(ctx)
	if err != nil {
		return err
	}
	old := s.Describe()
	info := &toolcall.Description{Name: old.Name, PluginVersion: old.PluginVersion, SDKVersion: old.SDKVersion, Instructions: old.Instructions, Tools: tools}
	if err := s.listFeatures(ctx, info); err != nil {
		return err
	}
	s.info.Store(info)
	return nil
}

var _ feature.Server = (*Server)(nil)

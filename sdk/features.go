package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/yosida95/uritemplate/v3"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
)

// Resource is a resource the plugin offers (MCP resources/list). URI and
// Name are required.
type Resource struct {
	URI, Name, Title, Description, MIMEType string
	// Size in bytes, 0 when unknown.
	Size int64
}

// ResourceTemplate is a family of resources named by an RFC 6570 URI
// template such as "notes://{id}" (MCP resources/templates/list).
type ResourceTemplate struct {
	URITemplate, Name, Title, Description, MIMEType string
	// Complete, if set, suggests values for one of the template's
	// variables given what the user typed so far and the variables already
	// resolved (MCP completion/complete).
	Complete func(ctx context.Context, variable, value string, resolved map[string]string) ([]string, error)
}

// ResourceRequest is one resources/read as a handler sees it.
type ResourceRequest struct {
	// URI is the URI the client asked for.
	URI string
	// Variables are the template's variables matched from URI (nil for a
	// listed resource).
	Variables map[string]string
	// Owner is who asks, as in Request.Owner.
	Owner string
}

// ResourceContents is one block of a resource's contents: Text, or Blob for
// binary data.
type ResourceContents struct {
	URI, MIMEType string
	Text          string
	Blob          []byte
}

// ResourceReader reads a resource.
type ResourceReader func(ctx context.Context, req *ResourceRequest) ([]ResourceContents, error)

// Prompt is a prompt template (MCP prompts/list). Name is required.
type Prompt struct {
	Name, Title, Description string
	Arguments                []PromptArgument
}

// PromptArgument is one argument of a prompt.
type PromptArgument struct {
	Name, Title, Description string
	Required                 bool
	// Complete, if set, suggests values for the argument (MCP
	// completion/complete).
	Complete func(ctx context.Context, value string, resolved map[string]string) ([]string, error)
}

// PromptRequest is one prompts/get as a handler sees it.
type PromptRequest struct {
	Name      string
	Arguments map[string]string
	Owner     string
}

// PromptResult is a rendered prompt.
type PromptResult struct {
	Description string
	Messages    []PromptMessage
}

// PromptMessage is one message of a rendered prompt: Text, or Image or
// Audio data with MIMEType, or an embedded Resource.
type PromptMessage struct {
	// Role is "user" or "assistant".
	Role     string
	Text     string
	Image    []byte
	Audio    []byte
	MIMEType string
	Resource *ResourceContents
}

// PromptGetter renders a prompt.
type PromptGetter func(ctx context.Context, req *PromptRequest) (*PromptResult, error)

type resourceEntry struct {
	def  Resource
	read ResourceReader
}

type templateEntry struct {
	def  ResourceTemplate
	tmpl *uritemplate.Template
	read ResourceReader
}

type promptEntry struct {
	def Prompt
	get PromptGetter
}

// AddResource adds a resource. It panics on a missing URI or name, or a
// URI added twice: both are programming errors. Added after the plugin is
// served, it tells the client the list changed.
func AddResource(s *Server, r Resource, read ResourceReader) {
	if r.URI == "" || r.Name == "" || read == nil {
		panic("sdk: a resource needs a URI, a Name and a reader")
	}
	s.mu.Lock()
	if slices.ContainsFunc(s.resources, func(e *resourceEntry) bool { return e.def.URI == r.URI }) {
		s.mu.Unlock()
		panic(fmt.Sprintf("sdk: resource %q added twice", r.URI))
	}
	s.resources = append(s.resources, &resourceEntry{def: r, read: read})
	s.mu.Unlock()
	s.listChanged()
}

// AddResourceTemplate adds a resource template; reading a URI that matches
// it calls read with the matched variables. It panics on an invalid
// template.
func AddResourceTemplate(s *Server, t ResourceTemplate, read ResourceReader) {
	if t.URITemplate == "" || t.Name == "" || read == nil {
		panic("sdk: a resource template needs a URITemplate, a Name and a reader")
	}
	tmpl, err := uritemplate.New(t.URITemplate)
	if err != nil {
		panic(fmt.Sprintf("sdk: resource template %q: %v", t.URITemplate, err))
	}
	s.mu.Lock()
	s.templates = append(s.templates, &templateEntry{def: t, tmpl: tmpl, read: read})
	s.mu.Unlock()
	s.listChanged()
}

// AddPrompt adds a prompt. It panics on a missing name or a name added
// twice.
func AddPrompt(s *Server, p Prompt, get PromptGetter) {
	if p.Name == "" || get == nil {
		panic("sdk: a prompt needs a Name and a getter")
	}
	s.mu.Lock()
	if slices.ContainsFunc(s.prompts, func(e *promptEntry) bool { return e.def.Name == p.Name }) {
		s.mu.Unlock()
		panic(fmt.Sprintf("sdk: prompt %q added twice", p.Name))
	}
	s.prompts = append(s.prompts, &promptEntry{def: p, get: get})
	s.mu.Unlock()
	s.listChanged()
}

// ResourceUpdated tells clients subscribed to uri that it changed (MCP
// notifications/resources/updated). It does nothing when nobody is
// subscribed.
func (s *Server) ResourceUpdated(uri string) {
	s.mu.RLock()
	sub := s.subscribed[uri]
	s.mu.RUnlock()
	if sub {
		s.notify(&pluginv1.Notification{Kind: &pluginv1.Notification_ResourceUpdated{ResourceUpdated: &pluginv1.ResourceUpdated{Uri: uri}}})
	}
}

func (s *Server) listChanged() {
	s.notify(&pluginv1.Notification{Kind: &pluginv1.Notification_ListChanged{ListChanged: &pluginv1.ListChanged{}}})
}

// notify queues a notification for the host; before the host listens, or
// when it falls far behind, notifications are dropped (a list change is
// read again from Describe anyway).
func (s *Server) notify(n *pluginv1.Notification) {
	s.mu.RLock()
	ch := s.notes
	s.mu.RUnlock()
	if ch == nil {
		return
	}
	select {
	case ch <- n:
	default:
	}
}

// describeFeatures adds the resources, templates and prompts to resp.
func (s *Server) describeFeatures(resp *pluginv1.DescribeResponse) {
	for _, e := range s.resources {
		r := e.def
		resp.Resources = append(resp.Resources, &pluginv1.Resource{Uri: r.URI, Name: r.Name, Title: r.Title, Description: r.Description, MimeType: r.MIMEType, Size: r.Size})
	}
	for _, e := range s.templates {
		t := e.def
		resp.ResourceTemplates = append(resp.ResourceTemplates, &pluginv1.ResourceTemplate{UriTemplate: t.URITemplate, Name: t.Name, Title: t.Title, Description: t.Description, MimeType: t.MIMEType})
		resp.Completions = resp.Completions || t.Complete != nil
	}
	for _, e := range s.prompts {
		p := &pluginv1.Prompt{Name: e.def.Name, Title: e.def.Title, Description: e.def.Description}
		for _, a := range e.def.Arguments {
			p.Arguments = append(p.Arguments, &pluginv1.PromptArgument{Name: a.Name, Title: a.Title, Description: a.Description, Required: a.Required})
			resp.Completions = resp.Completions || a.Complete != nil
		}
		resp.Prompts = append(resp.Prompts, p)
	}
	resp.ResourceSubscribe = len(s.resources)+len(s.templates) > 0
}

// ReadResource implements protocol.FeatureHandler.
func (h handler) ReadResource(ctx context.Context, req *pluginv1.ReadResourceRequest) (*pluginv1.ReadResourceResponse, error) {
	s := h.Server
	uri := req.GetUri()
	rr := &ResourceRequest{URI: uri, Owner: req.GetOwner()}
	var read ResourceReader
	s.mu.RLock()
	for _, e := range s.resources {
		if e.def.URI == uri {
			read = e.read
			break
		}
	}
	if read == nil {
		for _, e := range s.templates {
			if vals := e.tmpl.Match(uri); vals != nil {
				rr.Variables = map[string]string{}
				for _, name := range e.tmpl.Varnames() {
					rr.Variables[name] = vals.Get(name).String()
				}
				read = e.read
				break
			}
		}
	}
	s.mu.RUnlock()
	if read == nil {
		return nil, protocol.Errorf(protocol.CodeUnknownTool, "plugin %s has no resource %q", s.name, uri)
	}
	contents, err := read(ctx, rr)
	if err != nil {
		return nil, err
	}
	resp := &pluginv1.ReadResourceResponse{}
	for _, c := range contents {
		resp.Contents = append(resp.Contents, embedded(c, uri))
	}
	return resp, nil
}

func embedded(c ResourceContents, uri string) *pluginv1.EmbeddedResource {
	if c.URI == "" {
		c.URI = uri
	}
	return &pluginv1.EmbeddedResource{Uri: c.URI, MimeType: c.MIMEType, Text: c.Text, Blob: c.Blob}
}

// GetPrompt implements protocol.FeatureHandler.
func (h handler) GetPrompt(ctx context.Context, req *pluginv1.GetPromptRequest) (*pluginv1.GetPromptResponse, error) {
	s := h.Server
	var e *promptEntry
	s.mu.RLock()
	for _, p := range s.prompts {
		if p.def.Name == req.GetName() {
			e = p
		}
	}
	s.mu.RUnlock()
	if e == nil {
		return nil, protocol.Errorf(protocol.CodeUnknownTool, "plugin %s has no prompt %q", s.name, req.GetName())
	}
	var missing []string
	for _, a := range e.def.Arguments {
		if _, ok := req.GetArguments()[a.Name]; a.Required && !ok {
			missing = append(missing, a.Name)
		}
	}
	if len(missing) > 0 {
		return nil, protocol.Errorf(protocol.CodeInvalidArguments, "prompt %s needs the argument(s) %s", e.def.Name, strings.Join(missing, ", "))
	}
	res, err := e.get(ctx, &PromptRequest{Name: req.GetName(), Arguments: req.GetArguments(), Owner: req.GetOwner()})
	if err != nil {
		return nil, err
	}
	resp := &pluginv1.GetPromptResponse{Description: res.Description}
	for _, m := range res.Messages {
		pm := &pluginv1.PromptMessage{Role: m.Role}
		switch {
		case m.Resource != nil:
			pm.Content = &pluginv1.Content{Kind: &pluginv1.Content_Resource{Resource: embedded(*m.Resource, "")}}
		case m.Image != nil:
			pm.Content = &pluginv1.Content{Kind: &pluginv1.Content_Image{Image: &pluginv1.BinaryContent{Data: m.Image, MimeType: m.MIMEType}}}
		case m.Audio != nil:
			pm.Content = &pluginv1.Content{Kind: &pluginv1.Content_Audio{Audio: &pluginv1.BinaryContent{Data: m.Audio, MimeType: m.MIMEType}}}
		default:
			pm.Content = textContent(m.Text)
		}
		resp.Messages = append(resp.Messages, pm)
	}
	return resp, nil
}

// Complete implements protocol.FeatureHandler.
func (h handler) Complete(ctx context.Context, req *pluginv1.CompleteRequest) (*pluginv1.CompleteResponse, error) {
	s := h.Server
	var complete func() ([]string, error)
	s.mu.RLock()
	switch req.GetRefType() {
	case "prompt":
		for _, p := range s.prompts {
			if p.def.Name != req.GetRef() {
				continue
			}
			for _, a := range p.def.Arguments {
				if a.Name == req.GetArgument() && a.Complete != nil {
					complete = func() ([]string, error) { return a.Complete(ctx, req.GetValue(), req.GetContext()) }
				}
			}
		}
	case "resource":
		for _, t := range s.templates {
			if t.def.URITemplate == req.GetRef() && t.def.Complete != nil {
				complete = func() ([]string, error) {
					return t.def.Complete(ctx, req.GetArgument(), req.GetValue(), req.GetContext())
				}
			}
		}
	}
	s.mu.RUnlock()
	if complete == nil {
		return &pluginv1.CompleteResponse{}, nil
	}
	values, err := complete()
	if err != nil {
		return nil, err
	}
	resp := &pluginv1.CompleteResponse{Total: int32(min(len(values), math.MaxInt32))} //nolint:gosec // G115: clamped
	if len(values) > 100 {
		values, resp.HasMore = values[:100], true
	}
	resp.Values = values
	return resp, nil
}

// Subscribe implements protocol.FeatureHandler.
func (h handler) Subscribe(_ context.Context, req *pluginv1.SubscribeRequest) error {
	s := h.Server
	s.mu.Lock()
	defer s.mu.Unlock()
	if req.GetUnsubscribe() {
		delete(s.subscribed, req.GetUri())
		return nil
	}
	if s.subscribed == nil {
		s.subscribed = map[string]bool{}
	}
	s.subscribed[req.GetUri()] = true
	return nil
}

// Notifications implements protocol.FeatureHandler.
func (h handler) Notifications(ctx context.Context, send func(*pluginv1.Notification) error) error {
	s := h.Server
	ch := make(chan *pluginv1.Notification, 256)
	s.mu.Lock()
	s.notes = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.notes == ch {
			s.notes = nil
		}
		s.mu.Unlock()
	}()
	if err := send(&pluginv1.Notification{}); err != nil { // listening now
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case n := <-ch:
			if err := send(n); err != nil {
				return err
			}
		}
	}
}

var _ protocol.FeatureHandler = handler{}

// SamplingMessage is one message of a sampling request or its answer, in
// MCP's shape.
type SamplingMessage struct {
	Role    string          `json:"role"`
	Content SamplingContent `json:"content"`
}

// SamplingContent is text, or image or audio data (base64 in Data).
type SamplingContent struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	Data     string `json:"data,omitempty"`
	MIMEType string `json:"mimeType,omitempty"`
}

// SamplingRequest asks the client's model for a completion (MCP
// sampling/createMessage).
type SamplingRequest struct {
	Messages         []SamplingMessage `json:"messages"`
	SystemPrompt     string            `json:"systemPrompt,omitempty"`
	MaxTokens        int               `json:"maxTokens"`
	Temperature      *float64          `json:"temperature,omitempty"`
	StopSequences    []string          `json:"stopSequences,omitempty"`
	IncludeContext   string            `json:"includeContext,omitempty"`
	ModelPreferences json.RawMessage   `json:"modelPreferences,omitempty"`
}

// SamplingResult is the client's answer.
type SamplingResult struct {
	Role       string          `json:"role"`
	Content    SamplingContent `json:"content"`
	Model      string          `json:"model"`
	StopReason string          `json:"stopReason,omitempty"`
}

// ElicitResult is the user's answer to an elicitation: Action is
// "accept" (Content holds the answer), "decline" or "cancel".
type ElicitResult struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content,omitempty"`
}

// Root is a root the client exposes (MCP roots/list).
type Root struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

// CreateMessage asks the model of the client that made this call for a
// completion (MCP sampling). The host passes the request to that client
// session; it fails with an error to report when the client cannot sample
// or the host does not allow it.
func (r *Request) CreateMessage(ctx context.Context, req SamplingRequest) (*SamplingResult, error) {
	var res SamplingResult
	return &res, r.ask(ctx, protocol.MethodSampling, req, &res)
}

// Elicit asks the user of the client that made this call for input shaped
// by schema (a JSON Schema object of flat properties; MCP elicitation).
func (r *Request) Elicit(ctx context.Context, message string, schema json.RawMessage) (*ElicitResult, error) {
	var res ElicitResult
	params := map[string]any{"message": message, "requestedSchema": schema}
	return &res, r.ask(ctx, protocol.MethodElicitation, params, &res)
}

// Roots asks the client that made this call for its roots.
func (r *Request) Roots(ctx context.Context) ([]Root, error) {
	var res struct {
		Roots []Root `json:"roots"`
	}
	err := r.ask(ctx, protocol.MethodRoots, struct{}{}, &res)
	return res.Roots, err
}

func (r *Request) ask(ctx context.Context, method string, params, result any) error {
	if r.events == nil {
		return fmt.Errorf("%s: this call has no client to ask", method)
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	out, err := r.events.Request(ctx, method, raw)
	if err != nil {
		if errors.Is(err, protocol.ErrCancelled) {
			return err
		}
		// A plain error: returned by the handler, it becomes an error
		// result the model reads, not a failed call.
		return errors.New(err.Error())
	}
	if err := json.Unmarshal(out, result); err != nil {
		return fmt.Errorf("%s: the client's answer: %w", method, err)
	}
	return nil
}

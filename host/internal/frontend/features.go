package frontend

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/yosida95/uritemplate/v3"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/feature"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// What the front end serves besides tools: the resources, resource
// templates and prompts of every ready server that has them (package
// feature), completion, and resource subscriptions.
//
// Names. A prompt is shown as "<prefix>__<name>" like a tool (MCPName; the
// prefix is the server's name unless its config sets `prefix`, and "" shows
// the bare name). Resource URIs and URI templates are passed unchanged:
// a URI is what a server's own tool results, embedded resources and
// resource links point at, and what a client subscribes to, so rewriting
// it would break every one of those references. Two servers offering the
// same URI (or the same URI template) is a collision: the server started
// first keeps it, the other's is refused (listed in FeatureRefusals and the
// instructions), as for tools. A URI that matches templates of several
// servers is read from the first of them in start order.

// featState is the front end's table of the servers' resources, templates
// and prompts, and of the sessions' subscriptions.
type featState struct {
	featMu       sync.Mutex
	resources    map[string]string      // URI -> server
	templates    []templateOwner        // in server start order
	prompts      map[string]promptOwner // MCP name -> its server and prompt
	featRefusals []Refusal
	featKey      string // of the installed featureSet
	// subscribers is, per URI, the sessions subscribed to it; the owning
	// server is subscribed while there is at least one.
	subscribers map[string]map[string]bool
	sessions    sync.Map // session id -> server.ClientSession
	// declared is, per HTTP session not yet registered, what its client
	// declared at initialize (see keepDeclared).
	declared sync.Map // session id -> declaration
}

// declaration is what a client declared in its initialize request.
type declaration struct {
	info mcp.Implementation
	caps mcp.ClientCapabilities
}

type templateOwner struct {
	server string
	raw    string
	t      *uritemplate.Template
}

type promptOwner struct {
	server, name string
}

// featureOptions are the server options for resources, prompts,
// completion and logging.
func (f *Frontend) featureOptions() []server.ServerOption {
	return []server.ServerOption{
		server.WithResourceCapabilities(true, true),
		server.WithPromptCapabilities(true),
		server.WithCompletions(),
		server.WithPromptCompletionProvider(f),
		server.WithResourceCompletionProvider(f),
		server.WithLogging(),
	}
}

// featureHooks adds the hooks that keep subscriptions and sessions.
func (f *Frontend) featureHooks(h *server.Hooks) {
	h.AddAfterInitialize(f.keepDeclared)
	h.AddOnRegisterSession(func(_ context.Context, s server.ClientSession) {
		f.applyDeclared(s)
		f.sessions.Store(s.SessionID(), s)
	})
	h.AddOnUnregisterSession(func(ctx context.Context, s server.ClientSession) {
		f.sessions.Delete(s.SessionID())
		f.declared.Delete(s.SessionID())
		f.unsubscribeSession(ctx, s.SessionID())
	})
	h.AddAfterSubscribe(func(ctx context.Context, _ any, req *mcp.SubscribeRequest, _ *mcp.EmptyResult) {
		f.subscribe(ctx, sessionID(ctx), req.Params.URI, true)
	})
	h.AddAfterUnsubscribe(func(ctx context.Context, _ any, req *mcp.UnsubscribeRequest, _ *mcp.EmptyResult) {
		f.subscribe(ctx, sessionID(ctx), req.Params.URI, false)
	})
}

// keepDeclared is the after-initialize hook. It works around a race in
// mcp-go's streamable HTTP server (v1.2.1): an initialize POST's session
// is registered only after its response is written, and a large response
// reaches the client before the handler returns. A client that listens
// opens its GET stream as soon as it has the response; when the GET comes
// first, mcp-go registers a new session for the ID that knows nothing of
// the client, and the initialize's session, which does, is dropped. The
// host then believed the client had declared no capabilities (sampling,
// elicitation, roots refused). What the client declared is kept here for a
// session not yet registered and given to whichever session registers
// under its ID (applyDeclared).
func (f *Frontend) keepDeclared(ctx context.Context, _ any, req *mcp.InitializeRequest, _ *mcp.InitializeResult) {
	id := sessionID(ctx)
	if id == "" {
		return
	}
	if _, registered := f.sessions.Load(id); registered {
		return // stdio: the session is registered before it initializes
	}
	f.declared.Store(id, declaration{info: req.Params.ClientInfo, caps: req.Params.Capabilities})
}

// applyDeclared gives s what its client declared at initialize, when s
// registers after the initialize that made its ID (keepDeclared).
func (f *Frontend) applyDeclared(s server.ClientSession) {
	d, ok := f.declared.LoadAndDelete(s.SessionID())
	if !ok {
		return
	}
	if ci, ok := s.(server.SessionWithClientInfo); ok {
		ci.SetClientInfo(d.(declaration).info)
		ci.SetClientCapabilities(d.(declaration).caps)
	}
}

func sessionID(ctx context.Context) string {
	if s := server.ClientSessionFromContext(ctx); s != nil {
		return s.SessionID()
	}
	return ""
}

// featureSet is what setFeatures installs.
type featureSet struct {
	resources []server.ServerResource
	templates []server.ServerResourceTemplate
	prompts   []server.ServerPrompt
	refusals  []Refusal
	uris      map[string]string
	owners    []templateOwner
	names     map[string]promptOwner
	// key identifies the listings and their owners: an unchanged set is
	// not installed again (each install tells every client its lists
	// changed).
	key string
}

// setFeatures rebuilds the resources, templates and prompts from the
// registry (New and Refresh).
func (f *Frontend) setFeatures() {
	f.installFeatures(f.buildFeatures())
}

// installFeatures installs fs unless it is what is installed already.
func (f *Frontend) installFeatures(fs featureSet) {
	f.featMu.Lock()
	f.resources, f.templates, f.prompts, f.featRefusals = fs.uris, fs.owners, fs.names, fs.refusals
	same := f.featKey == fs.key && f.featKey != ""
	f.featKey = fs.key
	f.featMu.Unlock()
	if same {
		return
	}
	f.srv.SetResources(fs.resources...)
	f.srv.SetResourceTemplates(fs.templates...)
	f.srv.SetPrompts(fs.prompts...)
	for _, r := range fs.refusals {
		f.log.Error(r.What+" not exposed", "name", r.Tool, "reason", r.Reason)
	}
}

// buildFeatures reads the registry's resources, templates and prompts.
func (f *Frontend) buildFeatures() featureSet {
	var (
		resources []server.ServerResource
		templates []server.ServerResourceTemplate
		prompts   []server.ServerPrompt
		refusals  []Refusal
		uris      = map[string]string{}
		owners    []templateOwner
		names     = map[string]promptOwner{}
		key       []any
	)
	// The host's own: the results it cut to fit (savedresults.go).
	templates = append(templates, f.resultsTemplateEntry())
	for _, e := range f.reg.Entries() {
		if rd, ok := e.Server.(registry.Readiness); ok && !rd.Ready() {
			continue
		}
		if _, ok := e.Server.(feature.Server); !ok {
			continue
		}
		name, d := e.Server.Name(), e.Server.Describe()
		for _, r := range d.Resources {
			if hostScheme(r.URI) {
				refusals = append(refusals, Refusal{What: "resource", Tool: r.URI + " of " + name, Reason: "the switchboard: scheme is the host's own (its saved results); a server's URIs begin with a scheme of their own"})
				continue
			}
			if prev, dup := uris[r.URI]; dup {
				refusals = append(refusals, Refusal{What: "resource", Tool: r.URI + " of " + name, Reason: "the URI is already offered by " + prev})
				continue
			}
			uris[r.URI] = name
			l := resourceListing(r)
			key = append(key, name, l)
			resources = append(resources, server.ServerResource{Resource: l, Handler: f.readResource(name)})
		}
		for _, t := range d.ResourceTemplates {
			raw := t.URITemplate
			if hostScheme(raw) {
				refusals = append(refusals, Refusal{What: "resource template", Tool: raw + " of " + name, Reason: "the switchboard: scheme is the host's own (its saved results); a server's URIs begin with a scheme of their own"})
				continue
			}
			if prev := ownerOfTemplate(owners, raw); prev != "" {
				refusals = append(refusals, Refusal{What: "resource template", Tool: raw + " of " + name, Reason: "the URI template is already offered by " + prev})
				continue
			}
			ut, err := uritemplate.New(raw)
			if err != nil {
				refusals = append(refusals, Refusal{What: "resource template", Tool: raw + " of " + name, Reason: "not a URI template: " + err.Error()})
				continue
			}
			owners = append(owners, templateOwner{server: name, raw: raw, t: ut})
			l := templateListing(t, ut)
			key = append(key, name, l)
			templates = append(templates, server.ServerResourceTemplate{Template: l, Handler: f.readTemplated})
		}
		prefix := f.reg.Prefix(name)
		for _, p := range d.Prompts {
			mcpName := MCPName(prefix, p.Name, DefaultNameBudget)
			if prev, dup := names[mcpName]; dup {
				refusals = append(refusals, Refusal{What: "prompt", Tool: name + "." + p.Name, Reason: fmt.Sprintf("its MCP name %q is already used by %s.%s", mcpName, prev.server, prev.name)})
				continue
			}
			names[mcpName] = promptOwner{server: name, name: p.Name}
			l := promptListing(mcpName, p)
			key = append(key, name, p.Name, l)
			prompts = append(prompts, server.ServerPrompt{Prompt: l, Handler: f.getPrompt(name, p.Name)})
		}
	}
	k, err := json.Marshal(key)
	if err != nil {
		k = nil // never equal: installed every time
	}
	return featureSet{resources: resources, templates: templates, prompts: prompts, refusals: refusals, uris: uris, owners: owners, names: names, key: string(k)}
}

// FeatureRefusals lists the prompts, resources and resource templates that
// could not be exposed and why (Refusals lists the tools).
func (f *Frontend) FeatureRefusals() []Refusal {
	f.featMu.Lock()
	defer f.featMu.Unlock()
	return slices.Clone(f.featRefusals)
}

// literalScheme matches a URI or URI template that begins with a scheme
// written out (not a template variable).
var literalScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// hostScheme reports whether a server's resource URI or URI template could
// be in the host's own scheme, which no server may offer: a plugin served
// switchboard://results/… and a tool result could link to a forged saved
// result (red team round 5); a template that begins with a variable
// ({+anything}) could expand to any scheme, and answered reads of the
// host's saved results (round 6). Schemes are compared without case, as
// URIs' are.
func hostScheme(uri string) bool {
	if !literalScheme.MatchString(uri) {
		return true
	}
	scheme, _, _ := strings.Cut(uri, ":")
	return strings.EqualFold(scheme, "switchboard")
}

func ownerOfTemplate(owners []templateOwner, raw string) string {
	for _, o := range owners {
		if o.raw == raw {
			return o.server
		}
	}
	return ""
}

func resourceListing(r *toolcall.Resource) mcp.Resource {
	out := mcp.Resource{URI: r.URI, Name: r.Name, Title: r.Title, Description: r.Description, MIMEType: r.MIMEType}
	if r.Size > 0 {
		size := r.Size
		out.Size = &size
	}
	if len(r.AnnotationsJSON) > 0 {
		_ = json.Unmarshal(r.AnnotationsJSON, &out.Annotated)
	}
	return out
}

func templateListing(t *toolcall.ResourceTemplate, ut *uritemplate.Template) mcp.ResourceTemplate {
	out := mcp.ResourceTemplate{URITemplate: &mcp.URITemplate{Template: ut}, Name: t.Name, Title: t.Title, Description: t.Description, MIMEType: t.MIMEType}
	if len(t.AnnotationsJSON) > 0 {
		_ = json.Unmarshal(t.AnnotationsJSON, &out.Annotated)
	}
	return out
}

func promptListing(mcpName string, p *toolcall.Prompt) mcp.Prompt {
	out := mcp.Prompt{Name: mcpName, Title: p.Title, Description: p.Description}
	for _, a := range p.Arguments {
		out.Arguments = append(out.Arguments, mcp.PromptArgument{Name: a.Name, Title: a.Title, Description: a.Description, Required: a.Required})
	}
	return out
}

// features returns the features of server, or an error a client can read.
func (f *Frontend) features(server string) (feature.Server, error) {
	fs, ok := f.reg.Features(server)
	if !ok {
		return nil, protocol.Errorf(protocol.CodeUnavailable, "server %s is gone", server)
	}
	return fs, nil
}

// readResource reads a listed resource of server.
func (f *Frontend) readResource(srv string) server.ResourceHandlerFunc {
	return func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return f.read(ctx, srv, req.Params.URI)
	}
}

// readTemplated reads a URI that matched a template: from the first
// server, in start order, one of whose templates matches it.
func (f *Frontend) readTemplated(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	srv := f.ownerOf(req.Params.URI)
	if srv == "" {
		return nil, fmt.Errorf("resource %q not found", req.Params.URI)
	}
	return f.read(ctx, srv, req.Params.URI)
}

// ownerOf returns the server that owns uri: the one listing it, else the
// first whose template matches it ("" when none).
func (f *Frontend) ownerOf(uri string) string {
	f.featMu.Lock()
	defer f.featMu.Unlock()
	if s, ok := f.resources[uri]; ok {
		return s
	}
	for _, o := range f.templates {
		if o.t.Regexp().MatchString(uri) {
			return o.server
		}
	}
	return ""
}

func (f *Frontend) read(ctx context.Context, srv, uri string) ([]mcp.ResourceContents, error) {
	fs, err := f.features(srv)
	if err != nil {
		return nil, err
	}
	items, err := fs.ReadResource(registry.WithClient(ctx, clientID(ctx)), uri)
	if err != nil {
		return nil, err
	}
	out := make([]mcp.ResourceContents, 0, len(items))
	for _, c := range items {
		if len(c.Raw) > 0 {
			out = append(out, rawResource{raw: c.Raw})
			continue
		}
		out = append(out, resourceToMCP(c))
	}
	return out, nil
}

// rawResource is a resource's contents sent exactly as an MCP server sent
// them (see rawContent).
type rawResource struct {
	mcp.TextResourceContents
	raw json.RawMessage
}

// MarshalJSON returns the contents as they came.
func (c rawResource) MarshalJSON() ([]byte, error) { return c.raw, nil }

// getPrompt renders server's prompt called name.
func (f *Frontend) getPrompt(srv, name string) server.PromptHandlerFunc {
	return func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		fs, err := f.features(srv)
		if err != nil {
			return nil, err
		}
		res, err := fs.GetPrompt(registry.WithClient(ctx, clientID(ctx)), name, req.Params.Arguments)
		if err != nil {
			return nil, err
		}
		out := &mcp.GetPromptResult{Description: res.Description, Messages: make([]mcp.PromptMessage, 0, len(res.Messages))}
		for _, m := range res.Messages {
			if c, ok := contentToMCP(m.Content); ok {
				out.Messages = append(out.Messages, mcp.PromptMessage{Role: mcp.Role(m.Role), Content: c})
			}
		}
		return out, nil
	}
}

// CompletePromptArgument completes an argument of a prompt (by its MCP
// name) through its server.
func (f *Frontend) CompletePromptArgument(ctx context.Context, promptName string, arg mcp.CompleteArgument, cc mcp.CompleteContext) (*mcp.Completion, error) {
	f.featMu.Lock()
	p, ok := f.prompts[promptName]
	f.featMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("prompt %q not found", promptName)
	}
	return f.complete(ctx, p.server, feature.CompleteRequest{RefType: feature.RefPrompt, Ref: p.name, Argument: arg.Name, Value: arg.Value, Context: cc.Arguments})
}

// CompleteResourceArgument completes an argument of a resource template
// through the server that offers it.
func (f *Frontend) CompleteResourceArgument(ctx context.Context, uri string, arg mcp.CompleteArgument, cc mcp.CompleteContext) (*mcp.Completion, error) {
	f.featMu.Lock()
	srv := ownerOfTemplate(f.templates, uri)
	f.featMu.Unlock()
	if srv == "" {
		return nil, fmt.Errorf("resource template %q not found", uri)
	}
	return f.complete(ctx, srv, feature.CompleteRequest{RefType: feature.RefResource, Ref: uri, Argument: arg.Name, Value: arg.Value, Context: cc.Arguments})
}

func (f *Frontend) complete(ctx context.Context, srv string, req feature.CompleteRequest) (*mcp.Completion, error) {
	fs, err := f.features(srv)
	if err != nil {
		return nil, err
	}
	if e := f.reg.Entry(srv); e == nil || !e.Server.Describe().Completions {
		return &mcp.Completion{Values: []string{}}, nil
	}
	c, err := fs.Complete(registry.WithClient(ctx, clientID(ctx)), req)
	if err != nil {
		return nil, err
	}
	if c.Values == nil {
		c.Values = []string{}
	}
	return &mcp.Completion{Values: c.Values, Total: c.Total, HasMore: c.HasMore}, nil
}

// subscribe records a session's (un)subscription and passes the first
// subscription of a URI, and the end of the last, to its server.
func (f *Frontend) subscribe(ctx context.Context, session, uri string, on bool) {
	f.featMu.Lock()
	if f.subscribers == nil {
		f.subscribers = map[string]map[string]bool{}
	}
	subs := f.subscribers[uri]
	first, last := false, false
	if on {
		if subs == nil {
			subs = map[string]bool{}
			f.subscribers[uri] = subs
		}
		first = len(subs) == 0
		subs[session] = true
	} else if subs[session] {
		delete(subs, session)
		last = len(subs) == 0
		if last {
			delete(f.subscribers, uri)
		}
	}
	f.featMu.Unlock()
	if !first && !last {
		return
	}
	srv := f.ownerOf(uri)
	if srv == "" {
		return
	}
	fs, err := f.features(srv)
	if err == nil {
		err = fs.Subscribe(context.WithoutCancel(ctx), uri, on)
	}
	if err != nil {
		f.log.Warn("resource subscription not passed on", "server", srv, "uri", uri, "subscribe", on, "error", err)
	}
}

// unsubscribeSession ends every subscription of a session that ended.
func (f *Frontend) unsubscribeSession(ctx context.Context, session string) {
	f.featMu.Lock()
	var uris []string
	for uri, subs := range f.subscribers {
		if subs[session] {
			uris = append(uris, uri)
		}
	}
	f.featMu.Unlock()
	for _, uri := range uris {
		f.subscribe(ctx, session, uri, false)
	}
}

// onEvent takes a server's event (registry.OnEvent): list changes are
// seen through the registry's Refresh; resource updates go to the
// subscribed sessions, log messages to every session at its level.
func (f *Frontend) onEvent(srv string, ev feature.Event) {
	switch ev.Kind {
	case feature.ResourceUpdated:
		f.featMu.Lock()
		var sessions []string
		for s := range f.subscribers[ev.URI] {
			sessions = append(sessions, s)
		}
		f.featMu.Unlock()
		for _, s := range sessions {
			if err := f.srv.SendNotificationToSpecificClient(s, string(mcp.MethodNotificationResourceUpdated), map[string]any{"uri": ev.URI}); err != nil {
				f.log.Debug("resource update not delivered", "server", srv, "uri", ev.URI, "session", s, "error", err)
			}
		}
	case feature.Log:
		n := logNotification(srv, ev.Level, ev.Logger, ev.Data)
		f.sessions.Range(func(k, _ any) bool {
			_ = f.srv.SendLogMessageToSpecificClient(k.(string), n)
			return true
		})
	}
}

// logNotification builds a notifications/message of server's; logger
// defaults to the server's name.
func logNotification(srv, level, logger string, data json.RawMessage) mcp.LoggingMessageNotification {
	if logger == "" {
		logger = srv
	} else {
		logger = srv + "." + logger
	}
	var v any = json.RawMessage("null")
	if len(data) > 0 {
		v = data
	}
	lvl := mcp.LoggingLevel(level)
	if _, ok := logLevels[lvl]; !ok {
		lvl = mcp.LoggingLevelInfo
	}
	return mcp.NewLoggingMessageNotification(lvl, logger, v)
}

var logLevels = map[mcp.LoggingLevel]bool{
	mcp.LoggingLevelDebug: true, mcp.LoggingLevelInfo: true, mcp.LoggingLevelNotice: true, mcp.LoggingLevelWarning: true,
	mcp.LoggingLevelError: true, mcp.LoggingLevelCritical: true, mcp.LoggingLevelAlert: true, mcp.LoggingLevelEmergency: true,
}

// callLogger returns the sink of a call's log events: each goes to the
// calling session as notifications/message, at the session's level.
func (f *Frontend) callLogger(ctx context.Context, canonical string) toolcall.LogFunc {
	srv, _, _ := cutCanonical(canonical)
	return func(l toolcall.Log) {
		var data any = l.Message
		if len(l.Fields) > 0 {
			var fields map[string]any
			if json.Unmarshal(l.Fields, &fields) == nil && len(fields) > 0 {
				if l.Message != "" {
					fields["message"] = l.Message
				}
				data = fields
			}
		}
		logger := srv
		if l.Logger != "" {
			logger = srv + "." + l.Logger
		}
		lvl := mcp.LoggingLevel(l.Level)
		if _, ok := logLevels[lvl]; !ok {
			lvl = mcp.LoggingLevelInfo
		}
		if err := f.srv.SendLogMessageToClient(ctx, mcp.NewLoggingMessageNotification(lvl, logger, data)); err != nil {
			f.log.Trace("log message not delivered", "tool", canonical, "error", err)
		}
	}
}

func cutCanonical(canonical string) (srv, tool string, ok bool) {
	for i := 0; i < len(canonical); i++ {
		if canonical[i] == '.' {
			return canonical[:i], canonical[i+1:], true
		}
	}
	return canonical, "", false
}

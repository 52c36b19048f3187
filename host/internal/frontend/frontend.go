// Package frontend serves the registry's tools to MCP clients with
// mark3labs/mcp-go: every tool as "<server>__<tool>", schemas and
// annotations passed through unchanged, calls routed to the registry,
// progress forwarded, and cancellation passed on to the plugin.
package frontend

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/switchboard-mcp/switchboard/host/internal/approvals"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/ablate"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/tracing"
)

// Workers is how many tool calls one stdio client may have running at
// once. mcp-go's default of 5 lets a few slow calls (a long bash command)
// stall everything else; 100 is mcp-go's maximum.
const Workers = 100

// QueueSize is the stdio queue of calls waiting for a worker.
const QueueSize = 10000

// ServerName is the name the host gives MCP clients.
const ServerName = "switchboard"

// Refusal is a tool the front end could not expose.
type Refusal struct {
	Tool   string // canonical name (for a resource: its URI and server)
	Reason string
	// What is refused: "" for a tool, else "prompt", "resource" or
	// "resource template" (features.go).
	What string
}

// Frontend is the MCP face of a registry.
type Frontend struct {
	reg     *registry.Registry
	log     hclog.Logger
	srv     *server.MCPServer
	version string

	mu        sync.Mutex
	refreshMu sync.Mutex // one Refresh at a time
	refusals  []Refusal
	total     atomic.Int64                      // tools with handlers
	names     atomic.Pointer[map[string]string] // MCP name -> canonical name
	short     atomic.Int64                      // calls answered on the stdio short path
	srvHooks  *server.Hooks                     // the mcp-go server's hooks

	httpSessions atomic.Pointer[sessionIDs] // while serving HTTP

	noShortPath bool // every message goes to mcp-go (tests, sdk/protocol/ablate)

	listing []listedTool // what the tool listing was built from; refreshMu

	askState                 // pending servers put to clients that can elicit
	featState                // resources, templates, prompts, subscriptions (features.go)
	settingsState            // the settings in force (results.go)
	saved         savedStore // cut results saved whole (savedresults.go)
	exposeState              // search mode (search.go)
}

// New builds the MCP server for reg. version is the host's version.
func New(reg *registry.Registry, version string, logger hclog.Logger) *Frontend {
	f := &Frontend{reg: reg, log: logger.Named("mcp"), version: version, noShortPath: ablate.Off(ablate.ShortPath)}
	// The instructions' line for each server says what confines it, which
	// waits for the sandbox's probe of this machine (a namespaced start of
	// a small program): written while the tools are made and set.
	lines := make(chan string, 1)
	go func() { lines <- serverLines(reg) }()
	all := reg.AllTools()
	f.listing = f.listingKey(all)
	tools, names, refusals := f.serverToolsOf(all)
	f.srvHooks = f.hooks()
	feats := f.buildFeatures()
	f.srv = server.NewMCPServer(ServerName, version, f.serverOptions()...)
	f.setTools(tools, names, refusals)
	server.WithInstructions(<-lines + refusalLines(append(slices.Clip(refusals), feats.refusals...)))(f.srv)
	f.installFeatures(feats)
	reg.Subscribe(f.Refresh)
	reg.OnEvent(f.onEvent)
	return f
}

// serverOptions are the options of the mcp-go server: whatever is added
// here must be honoured by the stdio short path too (see eligible;
// TestShortPathHonoursEveryServerOption checks). New adds the
// instructions (server.WithInstructions) once they are written.
func (f *Frontend) serverOptions() []server.ServerOption {
	return append([]server.ServerOption{
		server.WithToolCapabilities(true),
		server.WithRecovery(),
		server.WithToolFilter(f.listReady),
		server.WithHooks(f.srvHooks),
	}, f.featureOptions()...)
}

// passesFilter reports whether mcp-go's tool filter (listReady) lets a
// call of the tool named name through, as mcp-go checks it at call time.
func (f *Frontend) passesFilter(ctx context.Context, name string) bool {
	return len(f.listReady(ctx, []mcp.Tool{{Name: name}})) == 1
}

// Refresh re-reads the registry's tools; clients get
// notifications/tools/list_changed. Refreshes run one at a time, so one
// that read the registry earlier never installs its older view after a
// later one.
func (f *Frontend) Refresh() {
	f.refreshMu.Lock()
	defer f.refreshMu.Unlock()
	all := f.reg.AllTools()
	if key := f.listingKey(all); !slices.Equal(key, f.listing) {
		tools, names, refusals := f.serverToolsOf(all)
		f.setTools(tools, names, refusals)
		f.listing = key
	}
	f.setFeatures()
}

// listedTool is what one exposed tool is built from: its canonical and
// exposed names and its description (the same object while a server's
// description is unchanged, e.g. a lazy server started with the tools its
// manifest listed).
type listedTool struct {
	name, exposed string
	tool          *toolcall.Tool
	ready         bool // listed (listReady): a server going down or coming back changes the listing
}

// listingKey is what the tool listing is built from. A refresh that finds
// the same key (a server changed state but not its tools or whether they
// are listed, e.g. a lazy server started by a call) keeps the listing:
// rebuilding it cost a 100-server host some 10 ms per lazy start, and sent
// every client a tools/list_changed that changed nothing.
func (f *Frontend) listingKey(all []registry.Tool) []listedTool {
	key := make([]listedTool, 0, len(all))
	for _, t := range all {
		ready := true
		if r, ok := t.Entry.Server.(registry.Readiness); ok {
			ready = r.Ready()
		}
		key = append(key, listedTool{t.Name, MCPName(f.reg.Prefix(t.Server), t.Tool.Name, DefaultNameBudget), t.Tool, ready})
	}
	return key
}

func (f *Frontend) setTools(tools []server.ServerTool, names map[string]string, refusals []Refusal) {
	tools, refusals = f.exposeTools(tools, refusals)
	f.mu.Lock()
	f.refusals = refusals
	f.mu.Unlock()
	f.names.Store(&names)
	f.total.Store(int64(len(tools)))
	f.srv.SetTools(tools...)
	for _, r := range refusals {
		f.log.Error("tool not exposed", "tool", r.Tool, "reason", r.Reason)
	}
}

// listReady hides the tools of servers that are not ready. mcp-go runs
// tool filters for listings (all tools) and for calls (the one tool
// called); a call is let through, so its handler can say why the server
// cannot take it ("git is reconnecting: attempt 3 …"). A host with a
// single tool cannot tell its listing from a call: there a call of a tool
// whose server is down gets mcp-go's "not found", on both stdio routes.
func (f *Frontend) listReady(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	if len(tools) == 1 && f.total.Load() > 1 {
		return tools
	}
	// An authenticated caller sees only the tools its access level lets
	// it call.
	who := registry.CallerFrom(ctx)
	ready := make(map[string]bool, len(tools))
	for _, t := range f.reg.Tools() {
		if who.Visible(t.Access()) {
			ready[MCPName(f.reg.Prefix(t.Server), t.Tool.Name, DefaultNameBudget)] = true
		}
	}
	// Filtered in place: mcp-go passes a slice of its own making (a copy
	// of its tools), and the elements are large.
	out := tools[:0]
	for _, t := range tools {
		if ready[t.Name] || ownTool(t.Name) {
			out = append(out, t)
		}
	}
	return f.exposeFilter(ctx, out)
}

// Refusals lists the tools that could not be exposed and why.
func (f *Frontend) Refusals() []Refusal {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.refusals)
}

// MCPServer returns the underlying mcp-go server.
func (f *Frontend) MCPServer() *server.MCPServer { return f.srv }

// stateText says where a server is in its life cycle, for a client
// reading the instructions: a server without a process that a call starts
// is not "ready", but its tools can be called.
func stateText(s registry.Server) string {
	st, ok := s.(registry.Stateful)
	if !ok {
		return "ready"
	}
	switch state := st.State(); state {
	case "configured":
		return "configured (not running; its first call starts it)"
	case "idle-stopped":
		return "idle-stopped (not running; its next call starts it)"
	default:
		return state
	}
}

// The instructions are one line per server with its status and its own
// instructions (serverLines), then the servers that failed and the tools
// not exposed (refusalLines).

// serverLines is the head of the instructions: a line for each server and
// each that failed to load.
func serverLines(reg *registry.Registry) string {
	var b strings.Builder
	b.WriteString("Switchboard serves tools from these servers (tool and prompt names are <server>__<name> unless the server's prefix is configured; resource URIs are the servers' own):\n")
	for _, e := range reg.Entries() {
		d := e.Server.Describe()
		fmt.Fprintf(&b, "- %s: %s, %d tools (%s %s)", e.Server.Name(), stateText(e.Server), len(d.Tools), e.Kind, d.PluginVersion)
		if c, ok := e.Server.(registry.Sandboxed); ok && c.SandboxMode() != "" {
			fmt.Fprintf(&b, "; %s", c.SandboxMode())
		}
		if in := strings.TrimSpace(d.Instructions); in != "" {
			fmt.Fprintf(&b, ". %s", strings.ReplaceAll(in, "\n", " "))
		}
		b.WriteByte('\n')
	}
	for _, fl := range reg.Failures() {
		fmt.Fprintf(&b, "- %s: failed to load: %v\n", fl.Name, fl.Err)
	}
	return b.String()
}

// refusalLines is the tail of the instructions: a line for
// each tool (or prompt, resource) not exposed.
func refusalLines(refusals []Refusal) string {
	var b strings.Builder
	for _, r := range refusals {
		what := r.What
		if what == "" {
			what = "tool"
		}
		fmt.Fprintf(&b, "- %s %s is not available: %s\n", what, r.Tool, r.Reason)
	}
	return b.String()
}

// serverTools builds the MCP tools, the map from MCP names to canonical
// names, and the refusals.
func (f *Frontend) serverToolsOf(all []registry.Tool) ([]server.ServerTool, map[string]string, []Refusal) {
	out := make([]server.ServerTool, 0, len(all))
	var refusals []Refusal
	seen := make(map[string]string, len(all))
	for _, t := range all {
		name := MCPName(f.reg.Prefix(t.Server), t.Tool.Name, DefaultNameBudget)
		if prev, dup := seen[name]; dup {
			refusals = append(refusals, Refusal{Tool: t.Name, Reason: fmt.Sprintf("its MCP name %q is already used by %s", name, prev)})
			continue
		}
		st, err := f.serverTool(name, t)
		if err != nil {
			refusals = append(refusals, Refusal{Tool: t.Name, Reason: err.Error()})
			continue
		}
		seen[name] = t.Name
		out = append(out, st)
	}
	return out, seen, refusals
}

func (f *Frontend) serverTool(name string, t registry.Tool) (st server.ServerTool, err error) {
	pt := t.Tool
	tool := mcp.NewToolWithRawSchema(name, pt.Description, json.RawMessage(pt.InputSchema))
	tool.Title = pt.Title
	if len(pt.OutputSchema) > 0 {
		tool.RawOutputSchema = json.RawMessage(pt.OutputSchema)
	}
	// Copy the annotations exactly: unset hints stay unset.
	if a := pt.Annotations; a != nil {
		tool.Annotations = mcp.ToolAnnotation{
			ReadOnlyHint:    a.ReadOnlyHint,
			DestructiveHint: a.DestructiveHint,
			IdempotentHint:  a.IdempotentHint,
			OpenWorldHint:   a.OpenWorldHint,
		}
		if a.Title != nil {
			tool.Annotations.Title = *a.Title
		}
	}
	canonical := t.Name
	return server.ServerTool{Tool: tool, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return f.call(ctx, canonical, req)
	}}, nil
}

func (f *Frontend) call(ctx context.Context, canonical string, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args := []byte(req.Params.RawArguments)
	if len(args) == 0 && req.Params.Arguments != nil {
		var err error
		if args, err = json.Marshal(req.Params.Arguments); err != nil {
			return mcp.NewToolResultError("arguments are not JSON: " + err.Error()), nil
		}
	}
	var token mcp.ProgressToken
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	var onProgress toolcall.ProgressFunc
	if token != nil {
		var stop func()
		onProgress, stop = f.progress(ctx, canonical, token)
		defer stop()
	}
	if req.Params.Meta != nil {
		ctx = tracing.FromMeta(ctx, req.Params.Meta.AdditionalFields) // an incoming traceparent
	}
	ctx = registry.WithClient(ctx, clientID(ctx))
	// The call's requests to its client (sampling, elicitation, roots) and
	// its log messages go to the session that made it (features.go).
	ctx = protocol.WithClientRequester(ctx, f.clientRequester(ctx))
	ctx = toolcall.WithLog(ctx, f.callLogger(ctx, canonical))
	// A call the policy asks about is put to the person through the
	// client (an input request), or refused when the client cannot be
	// asked: package approvals decides, inside the registry's one
	// evaluation of the call.
	ctx = registry.WithApprover(ctx, approvals.NewApprover(f.reg.Policy(), approvals.Elicitation{Request: req}))
	res, err := f.reg.Call(ctx, canonical, args, onProgress)
	if ctx.Err() != nil {
		// Cancelled (by notifications/cancelled, or the client went
		// away): MCP says the request gets no response.
		if d, ok := streamFrom(ctx).(responseDropper); ok {
			d.dropResponse()
		}
	}
	if ask, ok := errors.AsType[*approvals.InputRequiredError](err); ok {
		return ask.Result, nil
	}
	if err != nil {
		// The call did not run (or was cut short): an error result the
		// model can read, per MCP's guidance for tool failures.
		f.log.Debug("call failed", "tool", canonical, "error", err)
		return mcp.NewToolResultError(err.Error()), nil
	}
	return ToMCP(f.fit(ctx, canonical, res)), nil
}

// progress returns the function that forwards a call's progress to the
// client under token, and stop, which the handler must call before it
// returns. The plugin's values pass through as they are: making them
// increase is the plugin's business (the SDK's), and a value that does
// not increase on the last one sent is dropped, not rewritten, since the
// spec requires progress to increase with each notification. Each
// notification is written before the function returns (see callStream),
// and none after stop: progress never follows the call's result.
func (f *Frontend) progress(ctx context.Context, canonical string, token mcp.ProgressToken) (onProgress toolcall.ProgressFunc, stop func()) {
	var (
		mu   sync.Mutex
		last float64
		sent bool
		done bool
	)
	onProgress = func(p toolcall.Progress) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case done:
			f.log.Trace("progress after the result dropped", "tool", canonical, "progress", p.Progress)
			return
		case sent && p.Progress <= last:
			f.log.Trace("progress that does not increase dropped", "tool", canonical, "progress", p.Progress, "last", last)
			return
		}
		sent, last = true, p.Progress
		params := map[string]any{"progressToken": token, "progress": p.Progress}
		if p.Total > 0 {
			params["total"] = p.Total
		}
		if p.Message != "" {
			params["message"] = p.Message
		}
		if err := f.notifyCall(ctx, string(mcp.MethodNotificationProgress), params); err != nil {
			f.log.Trace("progress not delivered", "tool", canonical, "error", err)
		}
	}
	stop = func() {
		mu.Lock()
		done = true
		mu.Unlock()
	}
	return onProgress, stop
}

// clientID identifies the MCP client for the duplicate guard, bash jobs and
// the audit log: the authenticated caller when there is one, else the
// session.
func clientID(ctx context.Context) string {
	if c := registry.CallerFrom(ctx); c != nil {
		return c.Owner() // the authenticated caller, across its sessions
	}
	if s := server.ClientSessionFromContext(ctx); s != nil && s.SessionID() != "" {
		return "mcp:" + s.SessionID()
	}
	return "mcp"
}

// ToMCP converts a result to MCP. An item that came from an MCP server
// (Raw set) goes out exactly as it came, and so do structured content and
// the result's _meta, so nothing a client could use is lost on the way
// through the host.
func ToMCP(r *toolcall.Result) *mcp.CallToolResult {
	out := &mcp.CallToolResult{IsError: r.IsError, Content: make([]mcp.Content, 0, len(r.Content))}
	for _, c := range r.Content {
		if item, ok := contentToMCP(c); ok {
			out.Content = append(out.Content, item)
		}
	}
	if len(r.StructuredContent) > 0 {
		out.StructuredContent = r.StructuredContent
	}
	if len(r.Meta) > 0 {
		var fields map[string]json.RawMessage
		if json.Unmarshal(r.Meta, &fields) == nil && fields != nil {
			meta := &mcp.Meta{AdditionalFields: make(map[string]any, len(fields))}
			for k, v := range fields {
				meta.AdditionalFields[k] = v // raw: each value goes out as it came
			}
			out.Meta = meta
		}
	}
	return out
}

// contentToMCP converts one content item (of a result or a prompt); ok is
// false for a type MCP has no content for.
func contentToMCP(c toolcall.Content) (mcp.Content, bool) {
	if len(c.Raw) > 0 {
		return rawContent{raw: c.Raw}, true
	}
	switch c.Type {
	case toolcall.TypeText:
		return mcp.NewTextContent(c.Text), true
	case toolcall.TypeImage:
		return mcp.NewImageContent(base64.StdEncoding.EncodeToString(c.Data), c.MIMEType), true
	case toolcall.TypeAudio:
		return mcp.NewAudioContent(base64.StdEncoding.EncodeToString(c.Data), c.MIMEType), true
	case toolcall.TypeResourceLink:
		return mcp.NewResourceLink(c.URI, c.Name, c.Description, c.MIMEType), true
	case toolcall.TypeResource:
		return mcp.NewEmbeddedResource(resourceToMCP(c)), true
	}
	return nil, false
}

// resourceToMCP converts a resource's contents (without its Raw).
func resourceToMCP(c toolcall.Content) mcp.ResourceContents {
	if len(c.Blob) > 0 {
		return mcp.BlobResourceContents{URI: c.URI, MIMEType: c.MIMEType, Blob: base64.StdEncoding.EncodeToString(c.Blob)}
	}
	return mcp.TextResourceContents{URI: c.URI, MIMEType: c.MIMEType, Text: c.Text}
}

// rawContent is a content item sent exactly as an MCP server sent it. It
// embeds a TextContent only to be an mcp.Content; MarshalJSON is what goes
// on the wire.
type rawContent struct {
	mcp.TextContent
	raw json.RawMessage
}

// MarshalJSON returns the item as it came.
func (c rawContent) MarshalJSON() ([]byte, error) { return c.raw, nil }

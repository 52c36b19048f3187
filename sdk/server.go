package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/invopop/jsonschema"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginserve"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
)

// Access is the level a caller needs to use a tool.
type Access int

// Access levels. The zero value means "derive from ReadOnly".
const (
	AccessDefault Access = iota
	AccessRead
	AccessWrite
)

// Tool describes one tool. Name and Description are required.
type Tool struct {
	Name        string
	Title       string
	Description string

	// ReadOnly says the tool changes nothing (MCP readOnlyHint). It also
	// sets the access level when Access is AccessDefault: read-only tools
	// are READ, all others WRITE.
	ReadOnly bool
	// Destructive, Idempotent and OpenWorld are the other MCP hints; nil
	// leaves a hint unset (clients then assume the spec's defaults).
	Destructive *bool
	Idempotent  *bool
	OpenWorld   *bool

	Access Access

	// OutputSchema, if set, is the JSON Schema of the tool's structured
	// results.
	OutputSchema json.RawMessage

	// SkipDuplicateCheck exempts the tool from the host's detection of
	// repeated identical calls (for tools meant to be polled).
	SkipDuplicateCheck bool

	// MaxDuration is the longest a call may legitimately run when the
	// tool has a limit of its own (a command timeout the caller may raise):
	// the host's call_timeout never cuts such a call shorter. Zero: the
	// host's limit applies. A tool added in OnConfigure can set it from
	// the plugin's settings.
	MaxDuration time.Duration

	// PermissionPattern, if set, returns the patterns a call is judged by
	// ("<server>.<tool>:<pattern>" rules). Without it the tool name alone
	// is the pattern.
	PermissionPattern func(ctx context.Context, args json.RawMessage) ([]string, error)
}

// Bool returns a pointer to b, for the optional hints of a Tool.
func Bool(b bool) *bool { return &b }

// Config is what the host tells a plugin before it describes itself.
type Config struct {
	// ServerName is the name the host registered the plugin under.
	ServerName string
	// ProjectDir is the absolute project directory built-ins are confined to.
	ProjectDir string
	// DataDir is a directory for the plugin's saved state and outputs.
	DataDir string
	// HostVersion is the host's version.
	HostVersion string
	// Settings is the plugin's config block as a JSON object (may be empty).
	Settings json.RawMessage
	// HostDataDir is the host's own state directory. A plugin that works
	// with files must refuse paths inside it.
	HostDataDir string
	// ProtectedPaths are the host's control plane (config files, an
	// imported .mcp.json, the lock file, plugin binaries and directories,
	// and HostDataDir): absolute, symlink-free paths that no tool may read,
	// list, write, move, delete or link, at or under them, however the path
	// is spelled. Recursive tools skip them.
	ProtectedPaths []string
}

// Decode decodes Settings into v, refusing unknown fields so that a typo in
// a config block is an error rather than silently ignored.
func (c Config) Decode(v any) error {
	if len(c.Settings) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(c.Settings))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	return nil
}

// Server is a plugin built from typed tools. Add tools before Serve, or in
// an OnConfigure callback; a Server is safe for concurrent calls once served.
type Server struct {
	name, version, instructions string
	needs                       *pluginv1.SandboxNeeds

	mu          sync.RWMutex
	tools       map[string]*toolEntry
	order       []string
	onConfigure func(ctx context.Context, cfg Config) error
	busy        func() bool // BusyWhen
	onShutdown  []func()
	config      Config

	resources  []*resourceEntry
	templates  []*templateEntry
	prompts    []*promptEntry
	subscribed map[string]bool
	notes      chan *pluginv1.Notification // to the host, while it listens
}

type toolEntry struct {
	def    Tool
	schema json.RawMessage
	run    func(ctx context.Context, req *Request) (*Result, error)
}

// Option configures a Server.
type Option func(*Server)

// WithInstructions sets the plugin's instructions for the model.
func WithInstructions(text string) Option { return func(s *Server) { s.instructions = text } }

// NewServer returns a Server that reports the given name and version.
func NewServer(name, version string, opts ...Option) *Server {
	s := &Server{name: name, version: version, tools: map[string]*toolEntry{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// OnConfigure sets a function the host's configuration is handed to before
// the plugin describes itself. It may add tools. An error refuses the
// configuration, and the host reports it and does not load the plugin.
func (s *Server) OnConfigure(fn func(ctx context.Context, cfg Config) error) {
	s.mu.Lock()
	s.onConfigure = fn
	s.mu.Unlock()
}

// SandboxNeeds is what a plugin needs from the host's sandbox beyond its
// defaults (a third-party plugin may read the project and write its own
// state folder, with no network). Paths are absolute or start with "~/".
type SandboxNeeds struct {
	Read    []string
	Write   []string
	Network bool
}

// NeedsSandbox declares what the plugin needs from its sandbox. The host
// never grants it on the plugin's word: it tells the operator, at start-up
// and in `switchboard inspect`, which sandbox { … } lines would, so a
// plugin that cannot work confined says why instead of failing obscurely.
func (s *Server) NeedsSandbox(n SandboxNeeds) {
	s.mu.Lock()
	s.needs = &pluginv1.SandboxNeeds{Read: n.Read, Write: n.Write, Network: n.Network}
	s.mu.Unlock()
}

// BusyWhen sets a function that reports whether the plugin has
// background work right now that stopping it would lose (a job still
// running). A host stops a server that nobody has called for its
// idle_timeout, unless this says it is busy. It must be quick and safe
// for concurrent use.
func (s *Server) BusyWhen(fn func() bool) {
	s.mu.Lock()
	s.busy = fn
	s.mu.Unlock()
}

// OnShutdown adds a function run when the plugin stops (the host shut it
// down, sent SIGTERM, or died): release what outlives calls, such as
// background processes. Functions run in reverse order of addition.
func (s *Server) OnShutdown(fn func()) {
	s.mu.Lock()
	s.onShutdown = append(s.onShutdown, fn)
	s.mu.Unlock()
}

// shutdown runs the OnShutdown functions; Serve calls it. It may be called
// more than once; each function runs once.
func (s *Server) shutdown() {
	s.mu.Lock()
	fns := s.onShutdown
	s.onShutdown = nil
	s.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// Config returns the configuration the host sent (zero before Configure).
func (s *Server) Config() Config {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.config
}

// AddTool adds a tool whose arguments decode into In, a struct from which
// the tool's input schema is derived.
//
// Out is what the handler returns. Either it is *Result, and the handler
// builds its own result (text, images, an [ErrorResult]); or it is a struct
// (or a pointer to one), and then the tool publishes an output schema
// derived from Out, and the value the handler returns becomes the result's
// structured content, with the same JSON as a text block for clients that
// read only text. Tool.OutputSchema, if set, overrides the derived schema.
//
// AddTool panics on a bad definition or a duplicate name: both are
// programming errors.
func AddTool[In, Out any](s *Server, t Tool, handler func(ctx context.Context, req *Request, in In) (Out, error)) {
	schema, err := SchemaFor[In]()
	if err != nil {
		panic(fmt.Sprintf("sdk: tool %q: input: %v", t.Name, err))
	}
	typed := reflect.TypeFor[Out]() != reflect.TypeFor[*Result]()
	if typed && len(t.OutputSchema) == 0 {
		if t.OutputSchema, err = SchemaFor[Out](); err != nil {
			panic(fmt.Sprintf("sdk: tool %q: output: %v (return *sdk.Result for anything but a struct)", t.Name, err))
		}
	}
	s.add(t, schema, func(ctx context.Context, req *Request) (*Result, error) {
		var in In
		if err := decodeArgs(req.Arguments, &in); err != nil {
			return nil, err
		}
		out, err := handler(ctx, req, in)
		if err != nil {
			return nil, err
		}
		if !typed {
			res, _ := any(out).(*Result)
			return res, nil
		}
		if v := reflect.ValueOf(out); v.Kind() == reflect.Pointer && v.IsNil() {
			return nil, fmt.Errorf("tool %s returned no output and no error", req.Tool)
		}
		return JSON(out)
	})
}

// AddRawTool adds a tool with a hand-written input schema; the handler gets
// the arguments as raw JSON.
func AddRawTool(s *Server, t Tool, inputSchema json.RawMessage, handler func(ctx context.Context, req *Request) (*Result, error)) {
	if !json.Valid(inputSchema) {
		panic(fmt.Sprintf("sdk: tool %q: input schema is not valid JSON", t.Name))
	}
	s.add(t, inputSchema, handler)
}

func (s *Server) add(t Tool, schema json.RawMessage, run func(context.Context, *Request) (*Result, error)) {
	if t.Name == "" || t.Description == "" {
		panic("sdk: a tool needs a Name and a Description")
	}
	if len(t.OutputSchema) > 0 && !json.Valid(t.OutputSchema) {
		panic(fmt.Sprintf("sdk: tool %q: output schema is not valid JSON", t.Name))
	}
	e := &toolEntry{def: t, schema: schema, run: run}
	// The host's own check of what a plugin describes: a tool that passes
	// here loads there.
	if err := protocol.ValidateDescribe(&pluginv1.DescribeResponse{Tools: []*pluginv1.Tool{describeTool(e)}}); err != nil {
		panic(fmt.Sprintf("sdk: %v", err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.tools[t.Name]; dup {
		panic(fmt.Sprintf("sdk: tool %q added twice", t.Name))
	}
	s.tools[t.Name] = e
	s.order = append(s.order, t.Name)
}

// SchemaFor derives a JSON Schema (draft 2020-12) for the struct T (a
// tool's arguments or its output). Fields without `omitempty` are required;
// use `jsonschema:"description=…"` tags to document them. The schema names
// no "$schema": 2020-12 is MCP's default dialect, and the line would be
// in every listing of every tool, and in the model's context.
func SchemaFor[T any]() (json.RawMessage, error) {
	typ := reflect.TypeFor[T]()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct {
		return nil, fmt.Errorf("type %s is not a struct", typ)
	}
	r := &jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true, Anonymous: true}
	sch := r.ReflectFromType(typ)
	sch.ID, sch.Version = "", ""
	fixDescriptions(sch, typ)
	if sch.Properties == nil || sch.Properties.Len() == 0 {
		// An empty struct: say so explicitly, some clients need properties.
		return json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`), nil
	}
	b, err := json.Marshal(sch)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// decodeArgs decodes arguments strictly: unknown fields and wrong types are
// invalid-argument errors naming the field.
func decodeArgs(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return protocol.Errorf(protocol.CodeInvalidArguments, "argument %q: expected %s, got %s", te.Field, te.Type, te.Value)
		}
		msg := strings.TrimPrefix(err.Error(), "json: ")
		return protocol.Errorf(protocol.CodeInvalidArguments, "arguments: %s", msg)
	}
	return nil
}

// Request is one tool call as a handler sees it.
type Request struct {
	// Tool is the tool's name.
	Tool string
	// Arguments are the raw arguments as the client sent them.
	Arguments json.RawMessage
	// Owner says who the call belongs to (an authenticated caller, an HTTP
	// session, or the stdio client; empty from an older host). Tools that
	// keep state per caller key it on this, so that one caller can neither
	// see nor stop another's.
	Owner string
	// Denied holds the pattern parts of the host's deny rules for this
	// tool ("*.env" of a rule "filesystem.*:*.env"; the caller's rules
	// included; empty from an older host). A tool that reads or lists what
	// its arguments do not name (a folder's files) leaves out each thing
	// whose permission pattern one of them matches: see DeniedPath.
	Denied []string

	events       protocol.EventSink
	loggerOnce   sync.Once // the logger is made on first use: most calls never log
	logger       *slog.Logger
	wantProgress bool
}

// DeniedPath reports whether a deny rule of the host matches pattern, the
// form the tool's PermissionPattern gives a path (or anything else it
// names): the host would have refused a call naming it, so a tool that
// comes across it without being asked for it by name leaves it out.
func (r *Request) DeniedPath(pattern string) bool {
	for _, d := range r.Denied {
		if protocol.Glob(d, pattern) {
			return true
		}
	}
	return false
}

// WantsProgress reports whether the caller asked for progress, so a tool
// can skip preparing progress it would not send.
func (r *Request) WantsProgress() bool { return r.wantProgress }

// Progress reports progress to the caller (if it asked for progress).
// total is 0 when unknown.
func (r *Request) Progress(progress, total float64, message string) {
	if r.events != nil {
		r.events.Progress(&pluginv1.Progress{Progress: progress, Total: total, Message: message})
	}
}

// Configure implements protocol.Handler: it hands the host's configuration
// to the OnConfigure function.
func (h handler) Configure(ctx context.Context, req *pluginv1.ConfigureRequest) error {
	s := h.Server
	cfg := Config{
		ServerName:  req.GetServerName(),
		ProjectDir:  req.GetProjectDir(),
		DataDir:     req.GetDataDir(),
		HostVersion: req.GetHostVersion(),
		Settings:    json.RawMessage(req.GetSettingsJson()),
		HostDataDir: req.GetHostDataDir(),
		// The host data dir is protected even when a host does not list it.
		ProtectedPaths: appendIfMissing(req.GetProtectedPaths(), req.GetHostDataDir()),
	}
	s.mu.Lock()
	s.config = cfg
	fn := s.onConfigure
	s.mu.Unlock()
	if fn != nil {
		return fn(ctx, cfg)
	}
	if len(bytes.TrimSpace(cfg.Settings)) > 0 && string(cfg.Settings) != "{}" && string(cfg.Settings) != "null" {
		return fmt.Errorf("plugin %s takes no settings, but its config block has some", s.name)
	}
	return nil
}

// Describe implements protocol.Handler.
func (h handler) Describe(context.Context) (*pluginv1.DescribeResponse, error) {
	s := h.Server
	s.mu.RLock()
	defer s.mu.RUnlock()
	resp := &pluginv1.DescribeResponse{
		Name:          s.name,
		PluginVersion: s.version,
		SdkVersion:    Version,
		Instructions:  s.instructions,
		Sandbox:       s.needs,
	}
	for _, name := range s.order {
		e := s.tools[name]
		resp.Tools = append(resp.Tools, describeTool(e))
	}
	s.describeFeatures(resp)
	resp.Busy = s.busy != nil && s.busy()
	return resp, nil
}

func describeTool(e *toolEntry) *pluginv1.Tool {
	t := e.def
	access := pluginv1.Access_ACCESS_WRITE
	switch {
	case t.Access == AccessRead:
		access = pluginv1.Access_ACCESS_READ
	case t.Access == AccessDefault && t.ReadOnly:
		access = pluginv1.Access_ACCESS_READ
	}
	ann := &pluginv1.Annotations{ReadOnlyHint: Bool(t.ReadOnly)}
	if t.Title != "" {
		ann.Title = &t.Title
	}
	if t.ReadOnly {
		// A read-only tool destroys nothing; say so rather than leave the
		// spec's default (destructive) in place.
		ann.DestructiveHint = Bool(false)
	}
	if t.Destructive != nil {
		ann.DestructiveHint = t.Destructive
	}
	ann.IdempotentHint = t.Idempotent
	ann.OpenWorldHint = t.OpenWorld
	return &pluginv1.Tool{
		Name:                    t.Name,
		Title:                   t.Title,
		Description:             t.Description,
		InputSchema:             e.schema,
		OutputSchema:            t.OutputSchema,
		Annotations:             ann,
		Access:                  access,
		SkipDuplicateCheck:      t.SkipDuplicateCheck,
		CustomPermissionPattern: t.PermissionPattern != nil,
		MaxDurationMs:           uint64(max(t.MaxDuration, 0) / time.Millisecond),
	}
}

// CallTool implements protocol.Handler.
func (h handler) CallTool(ctx context.Context, call *pluginv1.Call, events protocol.EventSink) (*pluginv1.Result, error) {
	s := h.Server
	s.mu.RLock()
	e := s.tools[call.GetTool()]
	s.mu.RUnlock()
	if e == nil {
		return nil, protocol.Errorf(protocol.CodeUnknownTool, "plugin %s has no tool %q (it has: %s)", s.name, call.GetTool(), strings.Join(s.toolNames(), ", "))
	}
	req := &Request{
		Tool:         call.GetTool(),
		Arguments:    json.RawMessage(call.GetArguments()),
		Owner:        call.GetOwner(),
		Denied:       call.GetDeniedPatterns(),
		events:       events,
		wantProgress: call.GetWantProgress(),
	}
	res, err := e.run(ctx, req)
	if err != nil {
		var perr *protocol.Error
		switch {
		case errors.As(err, &perr):
			return nil, perr
		case ctx.Err() != nil:
			return nil, protocol.Errorf(protocol.CodeCancelled, "call cancelled: %v", err)
		default:
			// A tool failure is a result the model can read, not a
			// protocol error.
			return ErrorResult("%v", err).wire(), nil
		}
	}
	if res == nil {
		return &pluginv1.Result{}, nil
	}
	return res.wire(), nil
}

func (s *Server) toolNames() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.order)
}

// PermissionPattern implements protocol.Handler.
func (h handler) PermissionPattern(ctx context.Context, req *pluginv1.PermissionPatternRequest) ([]string, error) {
	s := h.Server
	s.mu.RLock()
	e := s.tools[req.GetTool()]
	s.mu.RUnlock()
	if e == nil {
		return nil, protocol.Errorf(protocol.CodeUnknownTool, "plugin %s has no tool %q", s.name, req.GetTool())
	}
	if e.def.PermissionPattern == nil {
		return []string{req.GetTool()}, nil
	}
	return e.def.PermissionPattern(ctx, json.RawMessage(req.GetArguments()))
}

// handler is a Server's side of the plugin protocol. It is a separate type so
// that the protocol's methods are not part of Server's API.
type handler struct{ *Server }

var (
	_ protocol.Handler       = handler{}
	_ pluginserve.Shutdowner = handler{}
)

// Shutdown implements pluginserve.Shutdowner.
func (h handler) Shutdown() { h.shutdown() }

func init() {
	pluginserve.SDK = func(server any) protocol.Handler { return handler{server.(*Server)} }
}

// appendIfMissing returns paths with p added unless p is empty or present.
func appendIfMissing(paths []string, p string) []string {
	if p == "" || slices.Contains(paths, p) {
		return paths
	}
	return append(slices.Clone(paths), p)
}

// fixDescriptions restores descriptions that contain commas: the
// jsonschema tag separates its keys with commas, so
// `description=File to read, relative to the project` would otherwise be
// published as "File to read". A comma starts a new key only when a known
// keyword follows it.
func fixDescriptions(sch *jsonschema.Schema, typ reflect.Type) {
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Array {
		typ = typ.Elem()
	}
	if sch == nil || typ.Kind() != reflect.Struct || sch.Properties == nil {
		return
	}
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if f.Anonymous {
			fixDescriptions(sch, f.Type)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = f.Name
		}
		prop, ok := sch.Properties.Get(name)
		if name == "-" || !ok || prop == nil {
			continue
		}
		if d, ok := tagDescription(f.Tag.Get("jsonschema")); ok {
			prop.Description = d
		}
		if prop.Items != nil {
			fixDescriptions(prop.Items, f.Type)
		} else {
			fixDescriptions(prop, f.Type)
		}
	}
}

// schemaKeywords are the jsonschema tag keys that may follow a description.
var schemaKeywords = map[string]bool{
	"title": true, "description": true, "type": true, "anchor": true, "oneof_required": true, "anyof_required": true,
	"oneof_ref": true, "oneof_type": true, "anyof_ref": true, "anyof_type": true, "required": true, "nullable": true,
	"default": true, "example": true, "examples": true, "enum": true, "const": true, "format": true, "pattern": true,
	"minLength": true, "maxLength": true, "minimum": true, "maximum": true, "exclusiveMinimum": true,
	"exclusiveMaximum": true, "multipleOf": true, "minItems": true, "maxItems": true, "uniqueItems": true,
	"minProperties": true, "maxProperties": true, "readOnly": true, "writeOnly": true, "contentEncoding": true,
	"contentMediaType": true, "deprecated": true, "not": true, "ref": true,
}

// tagDescription returns the description in a jsonschema struct tag, commas
// included, and whether the tag has one.
func tagDescription(tag string) (string, bool) {
	parts := strings.Split(tag, ",")
	for i, p := range parts {
		d, ok := strings.CutPrefix(p, "description=")
		if !ok {
			continue
		}
		for _, next := range parts[i+1:] {
			key, _, _ := strings.Cut(next, "=")
			if schemaKeywords[key] {
				break
			}
			d += "," + next
		}
		return d, true
	}
	return "", false
}

// Package registry is the host's ServerManager: it holds every server
// (built-in plugin, third-party plugin, external server), refuses name
// collisions, routes "<server>.<tool>" calls after checking the policy,
// lists tools and server info, and tears everything down in order.
//
// Lifecycle: Register servers in start order; Call as often as wanted from
// any goroutine; Shutdown once. Shutdown stops taking calls, lets in-flight
// calls finish for a grace period, cancels the rest, and then closes
// third-party plugins before built-ins, each group in reverse start order.
package registry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/caller"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/feature"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/tracing"
)

// NameRE is what a server name must match: lowercase letters, digits, '_'
// and '-', at most 48, starting with a letter or digit.
var NameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,47}$`)

// Kind is the kind of a server.
type Kind string

// Server kinds, in teardown order: external first, built-ins last.
const (
	KindExternal Kind = "external"
	KindPlugin   Kind = "plugin"
	KindBuiltin  Kind = "builtin"
)

// Server is what the registry routes to: a tool server (toolcall.Server,
// whose contract it keeps) with a name and a description. Implementations
// must be safe for concurrent Calls; Close may be called more than once.
type Server interface {
	toolcall.Server
	Name() string
	Describe() *toolcall.Description
}

// Readiness is implemented by servers that can be temporarily unable to
// take calls (supervised ones); their tools are not listed meanwhile.
type Readiness interface {
	Ready() bool
}

// Availability is implemented by servers that can explain why they take no
// calls right now (supervised ones). Lookup returns that explanation, a
// *protocol.Error with CodeUnavailable, for a tool it does not know: a
// server that is down may not have told its tools yet.
type Availability interface {
	// Unavailable returns nil when the server takes calls.
	Unavailable() error
}

// Confined is implemented by servers that can say what confines their
// processes (the kernel sandbox, as this machine enforces it), for
// inspect and status.
type Confined interface {
	Confinement() string
}

// Sandboxed is implemented by servers that can say how their sandbox is
// configured without finding out what this machine enforces (which takes
// a namespaced start of a program): "sandbox required", "sandbox
// best-effort", "not sandboxed", "remote (runs elsewhere)"; "" when not
// known. The initialize instructions show it.
type Sandboxed interface {
	SandboxMode() string
}

// Stateful is implemented by servers with a life cycle (supervised ones):
// State names where they are in it ("configured", "starting", "ready",
// "idle-stopped", "reconnecting", "failed", "stopped"), for the
// initialize instructions.
type Stateful interface {
	State() string
}

// Process is implemented by servers that are local processes.
type Process interface {
	PID() int
	ProtocolVersion() int
	Exited() bool
}

// Errors returned by Call, each an *protocol.Error with a code, so that the
// front ends can tell "never ran" from "ran and failed".
var (
	// ErrShuttingDown refuses calls and registrations once Shutdown has
	// begun. It has CodeShuttingDown, so errors.Is(err,
	// protocol.ErrShuttingDown) is true and errors.Is(err,
	// protocol.ErrUnavailable) is false: unlike a server that is down,
	// the host will not come back.
	ErrShuttingDown = protocol.Errorf(protocol.CodeShuttingDown, "registry: the host is shutting down")
)

// CollisionError refuses a server whose name is taken.
type CollisionError struct {
	Name     string
	Existing string // source of the server that keeps the name
	Newcomer string // source of the refused server
}

func (e *CollisionError) Error() string {
	return fmt.Sprintf("registry: server name %q is already taken by %s; %s is refused (rename its config block or remove one of them)", e.Name, e.Existing, e.Newcomer)
}

// Entry is one registered server.
type Entry struct {
	Server Server
	Kind   Kind
	// Source says where the server came from, e.g. `builtin "git"` or
	// `plugin "hello" (config.hcl:12)`.
	Source  string
	order   int
	stop    context.CancelFunc // ends the watch of its events (features.go)
	tools   map[string]*toolcall.Tool
	schemas map[string]*inputSchema
}

// Failure is a server that was configured but could not be registered.
type Failure struct {
	Name   string
	Kind   Kind
	Source string
	Err    error
}

// Registry routes calls to servers. Its zero value is not usable; use New.
type Registry struct {
	policy   *Policy
	audit    AuditLog
	dupLimit int

	toMu       sync.RWMutex
	callLimit  time.Duration       // every call, unless a server or tool says otherwise
	serverLims map[string]Timeouts // by server name
	log        func(msg string, args ...any)

	dupMu sync.Mutex
	last  map[string]dupState // client -> its last call

	mu       sync.RWMutex
	entries  map[string]*Entry
	order    []*Entry
	failures []Failure
	disabled []Failure
	next     int

	subsMu      sync.Mutex
	subscribers []func()
	atShutdown  []func()
	listeners   []func(server string, ev feature.Event)
	prefixes    map[string]string // server -> prefix of its exposed names, when set
	watchers    sync.WaitGroup

	observers atomic.Pointer[observers]
	recent    *recentLog

	inflight sync.WaitGroup
	closing  bool
	baseCtx  context.Context
	cancel   context.CancelFunc
}

type dupState struct {
	key    string // tool and arguments
	result uint64 // hash of what the call returned
	count  int    // identical calls with identical results in a row
}

// Option configures a Registry.
type Option func(*Registry)

// WithAudit records every call in a.
func WithAudit(a *Audit) Option {
	return func(r *Registry) {
		if a != nil {
			r.audit = a
		}
	}
}

// WithAuditLog records every call in l: an audit log other than the
// local file (the shared store's).
func WithAuditLog(l AuditLog) Option { return func(r *Registry) { r.audit = l } }

// WithDuplicateLimit sets the loop breaker: when one client's n-th call in
// a row with the same tool and arguments returns, again, a byte-identical
// result, the answer is an error result saying the client is looping. Calls
// are never refused for repeating: a command or a file may change between
// calls. Before the n-th, an identical result is answered with a short note
// instead of the whole result again. Tools that skip the duplicate check
// (polled ones) are left alone. 0 turns both off.
func WithDuplicateLimit(n int) Option { return func(r *Registry) { r.dupLimit = n } }

// WithWarnings sends problems that do not stop anything (a tool schema
// that does not compile) to fn.
func WithWarnings(fn func(msg string, args ...any)) Option { return func(r *Registry) { r.log = fn } }

// Timeouts are a server's call limits: Call for all its tools, Tools for
// single tools (0 or absent: the next level up decides).
type Timeouts struct {
	Call  time.Duration
	Tools map[string]time.Duration
}

// SetCallTimeouts sets how long a call may run: def for every call, per
// for a server's calls and single tools. A tool that declares a longer
// limit of its own (bash's max_timeout) keeps it. A call that runs out is
// cancelled in the plugin and answered with an error that says so.
func (r *Registry) SetCallTimeouts(def time.Duration, per map[string]Timeouts) {
	r.toMu.Lock()
	r.callLimit, r.serverLims = def, per
	r.toMu.Unlock()
}

// callTimeout is the limit for one call of t and what set it.
func (r *Registry) callTimeout(t Tool) (time.Duration, string) {
	r.toMu.RLock()
	d, by := r.callLimit, "call_timeout"
	if st, ok := r.serverLims[t.Server]; ok {
		if st.Call > 0 {
			d, by = st.Call, fmt.Sprintf("the %s block's call_timeout", t.Server)
		}
		if td := st.Tools[t.Tool.Name]; td > 0 {
			d, by = td, fmt.Sprintf("tool %q { call_timeout } in the %s block", t.Tool.Name, t.Server)
		}
	}
	r.toMu.RUnlock()
	if own := t.Tool.MaxDuration; d > 0 && own > d {
		// The tool's own limit, plus a moment to report it.
		d, by = own+5*time.Second, "the tool's own limit"
	}
	return d, by
}

// DefaultDuplicateLimit is the duplicate guard's default.
const DefaultDuplicateLimit = 3

// New returns an empty registry that checks calls against policy (nil
// allows everything).
func New(policy *Policy, opts ...Option) *Registry {
	ctx, cancel := context.WithCancel(context.Background())
	if policy == nil {
		policy = &Policy{Default: Allow, Access: AccessWrite}
	}
	r := &Registry{
		policy: policy, entries: map[string]*Entry{}, baseCtx: ctx, cancel: cancel,
		dupLimit: DefaultDuplicateLimit, last: map[string]dupState{}, log: func(string, ...any) {},
		recent: newRecentLog(),
	}
	for _, o := range opts {
		o(r)
	}
	if r.audit == nil {
		r.audit = noAudit{}
	}
	r.audit.OnError(func(err error) { r.log("audit records not written", "error", err) })
	return r
}

// WithClient tags ctx with the calling client's identity (an MCP session
// id, "cli"); the duplicate guard and the audit log use it.
func WithClient(ctx context.Context, client string) context.Context {
	return caller.With(ctx, client)
}

func clientOf(ctx context.Context) string {
	if c := caller.From(ctx); c != "" {
		return c
	}
	return "unknown"
}

// Register adds a server. A name already taken is refused with a
// *CollisionError: the first server keeps its place. The caller still owns
// a refused server and must close it.
func (r *Registry) Register(s Server, kind Kind, source string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing {
		return ErrShuttingDown
	}
	if prev, ok := r.entries[s.Name()]; ok {
		err := &CollisionError{Name: s.Name(), Existing: prev.Source, Newcomer: source}
		r.failures = append(r.failures, Failure{Name: s.Name(), Kind: kind, Source: source, Err: err})
		return err
	}
	e := &Entry{Server: s, Kind: kind, Source: source, order: r.next}
	r.next++
	r.index(e)
	r.entries[s.Name()] = e
	r.order = append(r.order, e)
	r.watch(e)
	return nil
}

// Refresh re-reads a server's tools (after it restarted, perhaps as a
// newer version) and tells the subscribers that the tool set changed.
func (r *Registry) Refresh(name string) {
	r.mu.Lock()
	if e := r.entries[name]; e != nil {
		r.index(e)
	}
	r.mu.Unlock()
	r.notify()
}

// index (re)builds an entry's tool table and its schemas, compiled at a
// tool's first call (a host listing many servers it never calls compiles
// nothing for them: compiling every schema at start was a fifth of a
// 100-server host's start-up); r.mu held.
func (r *Registry) index(e *Entry) {
	e.tools = map[string]*toolcall.Tool{}
	e.schemas = map[string]*inputSchema{}
	name := e.Server.Name()
	for _, t := range e.Server.Describe().Tools {
		e.tools[t.Name] = t
		e.schemas[t.Name] = &inputSchema{tool: name + "." + t.Name, raw: t.InputSchema, log: r.log}
	}
}

// inputSchema is a tool's input schema, compiled once, when first needed.
type inputSchema struct {
	tool string
	raw  []byte
	log  func(msg string, args ...any)
	once sync.Once
	sch  *jsonschema.Schema
}

// compiled returns the schema, or nil when it does not compile: that is
// reported once, and the plugin is left to check its own arguments.
func (s *inputSchema) compiled() *jsonschema.Schema {
	if s == nil {
		return nil
	}
	s.once.Do(func() {
		sch, err := compileSchema(s.tool, s.raw)
		if err != nil {
			s.log("tool input schema does not compile; its arguments are not validated by the host", "tool", s.tool, "error", err)
			return
		}
		s.sch = sch
	})
	return s.sch
}

// Remove unregisters a server and closes it (a reload removed it).
func (r *Registry) Remove(ctx context.Context, name string) error {
	return r.remove(ctx, name, nil)
}

// Retire unregisters a server that must not serve any more (its tools
// changed and are quarantined), records why, and closes it. The entry's
// removal and the failure are one step: status never shows the server as
// neither running nor failed while it closes. It reports false when no
// server called name is registered (then nothing is recorded).
func (r *Registry) Retire(ctx context.Context, name string, err error) bool {
	return r.remove(ctx, name, &err) == nil
}

func (r *Registry) remove(ctx context.Context, name string, failure *error) error {
	r.mu.Lock()
	e := r.entries[name]
	if e == nil {
		r.mu.Unlock()
		return fmt.Errorf("registry: no server named %q", name)
	}
	if failure != nil {
		r.failures = append(r.failures, Failure{Name: name, Kind: e.Kind, Source: e.Source, Err: *failure})
	}
	delete(r.entries, name)
	r.order = slices.DeleteFunc(r.order, func(x *Entry) bool { return x == e })
	r.mu.Unlock()
	if e.stop != nil {
		e.stop()
	}
	err := e.Server.Close(ctx)
	r.notify()
	return err
}

// Entry returns the registered server called name, or nil.
func (r *Registry) Entry(name string) *Entry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.entries[name]
}

// ClearFailures forgets recorded failures (before a reload retries them).
func (r *Registry) ClearFailures(names ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = slices.DeleteFunc(r.failures, func(f Failure) bool { return slices.Contains(names, f.Name) })
}

// SetDuplicateLimit changes the duplicate guard (a reload).
func (r *Registry) SetDuplicateLimit(n int) {
	r.dupMu.Lock()
	r.dupLimit = n
	r.dupMu.Unlock()
}

// Subscribe calls fn after every change of the tool set or of a server's
// state. fn must not block for long.
func (r *Registry) Subscribe(fn func()) {
	r.subsMu.Lock()
	r.subscribers = append(r.subscribers, fn)
	r.subsMu.Unlock()
}

func (r *Registry) notify() {
	r.subsMu.Lock()
	subs := slices.Clone(r.subscribers)
	r.subsMu.Unlock()
	for _, fn := range subs {
		fn()
	}
}

// AtShutdown runs fn after every server is closed.
func (r *Registry) AtShutdown(fn func()) {
	r.subsMu.Lock()
	r.atShutdown = append(r.atShutdown, fn)
	r.subsMu.Unlock()
}

// Fail records a configured server that could not be started, so that
// inspect and the MCP instructions can report it.
func (r *Registry) Fail(f Failure) {
	r.mu.Lock()
	r.failures = append(r.failures, f)
	r.mu.Unlock()
}

// SetDisabled records the servers the config turned off, for status.
func (r *Registry) SetDisabled(d []Failure) {
	r.mu.Lock()
	r.disabled = d
	r.mu.Unlock()
}

// Disabled returns the servers the config turned off.
func (r *Registry) Disabled() []Failure {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.disabled)
}

// Failures returns the servers that could not be registered, first first.
func (r *Registry) Failures() []Failure {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.failures)
}

// Servers returns the registered servers in start order and the servers
// that failed, read together: a server retired meanwhile is in one list,
// never in both or neither.
func (r *Registry) Servers() ([]*Entry, []Failure) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.order), slices.Clone(r.failures)
}

// Entries returns the registered servers in start order.
func (r *Registry) Entries() []*Entry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.order)
}

// Policy returns the registry's policy.
func (r *Registry) Policy() *Policy { return r.policy }

// Tool is one routable tool.
type Tool struct {
	// Name is the canonical "<server>.<tool>".
	Name   string
	Server string
	Entry  *Entry
	Tool   *toolcall.Tool
	schema *jsonschema.Schema // compiled input schema, when it compiled
}

// Access returns the tool's access level; unspecified counts as
// AccessWrite.
func (t Tool) Access() Access {
	if t.Tool != nil && t.Tool.Access == toolcall.AccessRead {
		return AccessRead
	}
	return AccessWrite
}

// toolName is the tool's name on its server; empty for a call whose tool
// was not found.
func (t Tool) toolName() string {
	if t.Tool == nil {
		return ""
	}
	return t.Tool.Name
}

// Tools lists every tool the policy lets callers see whose server is
// ready, in server start order and then the order each server reported.
func (r *Registry) Tools() []Tool { return r.tools(true) }

// AllTools is Tools including the tools of servers that are not ready
// right now (a front end keeps handlers for them, to explain the outage).
func (r *Registry) AllTools() []Tool { return r.tools(false) }

func (r *Registry) tools(readyOnly bool) []Tool {
	pol := r.policy.rules()
	r.mu.RLock()
	defer r.mu.RUnlock()
	n := 0
	for _, e := range r.order {
		n += len(e.Server.Describe().Tools)
	}
	if n == 0 {
		return nil
	}
	out := make([]Tool, 0, n)
	for _, e := range r.order {
		if rd, ok := e.Server.(Readiness); ok && readyOnly && !rd.Ready() {
			continue
		}
		for _, t := range e.Server.Describe().Tools {
			tl := Tool{Name: e.Server.Name() + "." + t.Name, Server: e.Server.Name(), Entry: e, Tool: t}
			if pol.visible(tl) {
				out = append(out, tl)
			}
		}
	}
	return out
}

// Lookup resolves a canonical tool name.
func (r *Registry) Lookup(name string) (Tool, error) {
	server, tool, ok := strings.Cut(name, ".")
	if !ok || server == "" || tool == "" {
		return Tool{}, protocol.Errorf(protocol.CodeUnknownTool, "%q is not a tool name: use <server>.<tool>, e.g. filesystem.read_text_file", name)
	}
	r.mu.RLock()
	e := r.entries[server]
	var t *toolcall.Tool
	var lazy *inputSchema
	if e != nil {
		// Refresh replaces these tables; read them under the lock.
		t, lazy = e.tools[tool], e.schemas[tool]
	}
	r.mu.RUnlock()
	if e == nil {
		return Tool{}, protocol.Errorf(protocol.CodeUnknownTool, "no server named %q (servers: %s)", server, strings.Join(r.names(), ", "))
	}
	if t == nil {
		// A server that is down may simply not have told us its tools yet.
		if u, ok := e.Server.(Availability); ok {
			if err := u.Unavailable(); err != nil {
				return Tool{}, err
			}
		}
		return Tool{}, protocol.Errorf(protocol.CodeUnknownTool, "server %s has no tool %q (run `switchboard tools` to list them)", server, tool)
	}
	return Tool{Name: name, Server: server, Entry: e, Tool: t, schema: lazy.compiled()}, nil
}

func (r *Registry) names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var names []string
	for _, e := range r.order {
		names = append(names, e.Server.Name())
	}
	return names
}

// Call routes one call to "<server>.<tool>". Before anything reaches the
// plugin it checks, in order: that the tool exists, the access level, the
// arguments against the tool's input schema, the permission rules (deny
// first; an Ask verdict goes to the Approver in ctx, see WithApprover),
// and the duplicate guard. The policy is read and evaluated once per call
// (the server's PermissionPattern is asked once), and that one verdict
// decides. Every call, allowed or not, gets one audit record.
//
// An error means the tool did not run, or was cut short; it is a
// *protocol.Error, an *ApprovalRequiredError, or the refusal an Approver
// returned. A result with IsError means the tool ran and failed.
func (r *Registry) Call(ctx context.Context, name string, args []byte, onProgress toolcall.ProgressFunc) (res *toolcall.Result, err error) {
	start := time.Now()
	args = normalizeArgs(args)
	argsSum := sha256Hex(args)
	rec := AuditRecord{Time: start.UTC(), CallID: r.recent.id(), Client: clientOf(ctx), Caller: CallerName(ctx), Tool: name, ArgsSHA256: argsSum, ArgsSize: len(args)}
	var t Tool // once looked up
	var pol rules
	var d Decision
	obs := r.observers.Load()
	var span trace.Span
	if tracing.Enabled() {
		ctx, span = tracing.Tracer().Start(ctx, "tools/call "+name, trace.WithSpanKind(trace.SpanKindInternal))
	}
	defer func() {
		elapsed := time.Since(start)
		rec.DurationMS = float64(elapsed.Microseconds()) / 1000
		switch {
		case err != nil && rec.Outcome == "" && ctx.Err() != nil:
			rec.Outcome, rec.Error = "cancelled", err.Error()
		case err != nil && rec.Outcome == "":
			rec.Outcome, rec.Error = "error", err.Error()
		case err != nil:
			rec.Error = err.Error()
		case res != nil && res.IsError:
			rec.Outcome = "tool_error"
		default:
			rec.Outcome = "ok"
		}
		if aerr := r.audit.Write(rec); aerr != nil {
			r.log("audit record not written", "error", aerr)
		}
		var why *Refusal
		if rec.Outcome == "refused" {
			why = explain(pol, t, d, &rec)
		}
		r.recent.add(rec, why)
		obs.ended(t.Server, t.toolName(), &rec, elapsed)
		if span != nil {
			endSpan(span, t, &rec)
		}
	}()

	r.mu.RLock()
	if r.closing {
		r.mu.RUnlock()
		rec.Decision, rec.Outcome = "refused", "refused"
		return nil, ErrShuttingDown
	}
	r.inflight.Add(1)
	base := r.baseCtx
	r.mu.RUnlock()
	defer r.inflight.Done()

	t, err = r.Lookup(name)
	if err != nil {
		rec.Decision, rec.Outcome = "unknown", "refused"
		return nil, err
	}
	obs.started(t.Server, t.Tool.Name)
	var perr error
	if pol, perr = r.policy.rulesAt(ctx); perr != nil {
		rec.Decision, rec.Outcome = "deny", "refused"
		return nil, perr
	}
	if pol.access.Permits(t.Access()) && !pol.caller.Visible(t.Access()) {
		// The caller's access level, not the host's, refuses the tool: a
		// rule's refusal, counted as one.
		rec.Decision, rec.Rule, rec.Outcome = "deny", "caller-access", "refused"
		return nil, protocol.Errorf(protocol.CodePermissionDenied, "%s needs write access, and caller %q has access = %q (%s); call it with a token that has write access", t.Name, pol.caller.Name, pol.caller.Access, pol.caller.source())
	}
	if err := r.validate(pol, t, args); err != nil {
		rec.Decision, rec.Outcome = "invalid", "refused"
		return nil, err
	}
	d, err = r.decide(ctx, pol, t, args)
	rec.Decision, rec.Rule = d.Verdict.String(), d.auditRule()
	if span != nil {
		span.AddEvent("policy", trace.WithAttributes(attribute.String("switchboard.decision", rec.Decision), attribute.String("switchboard.rule", rec.Rule)))
	}
	if err == nil {
		err = r.settle(ctx, pol, t, args, d, &rec)
	}
	if err != nil {
		rec.Outcome = "refused"
		return nil, err
	}
	// The call ends when the caller cancels, when its time is up, or when
	// shutdown gives up on it.
	limit, by := r.callTimeout(t)
	var callCtx context.Context
	var cancel context.CancelFunc
	if limit > 0 {
		callCtx, cancel = context.WithTimeoutCause(ctx, limit, errCallTimeout)
	} else {
		callCtx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	stop := context.AfterFunc(base, cancel)
	defer stop()
	res, err = t.Entry.Server.Call(toolcall.WithDenied(callCtx, pol.deniedPatterns(t.Name)), t.Tool.Name, args, onProgress)
	rec.ResultSize = resultSize(res)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(callCtx), errCallTimeout) {
		rec.Outcome = "timeout"
		return nil, protocol.Errorf(protocol.CodeDeadline, "%s did not finish within %s (%s), so it was cancelled in its server. Ask for less, or raise the limit: %v",
			t.Name, limit, by, err)
	}
	if err == nil && res != nil {
		res = r.repeated(ctx, t, argsSum, res, &rec)
	}
	return res, err
}

// endSpan ends a call's span with what its audit record says.
func endSpan(span trace.Span, t Tool, rec *AuditRecord) {
	span.SetAttributes(
		attribute.String("mcp.method.name", "tools/call"),
		attribute.String("gen_ai.tool.name", rec.Tool),
		attribute.String("switchboard.server", t.Server),
		attribute.String("switchboard.decision", rec.Decision),
		attribute.String("switchboard.outcome", rec.Outcome),
	)
	if rec.Caller != "" {
		span.SetAttributes(attribute.String("enduser.id", rec.Caller))
	}
	if rec.Outcome != "ok" {
		span.SetStatus(codes.Error, rec.Outcome+": "+rec.Error)
	}
	span.End()
}

// errCallTimeout is the cause of a call's context that ran out of time.
var errCallTimeout = errors.New("call_timeout reached")

// Audit writes one record that is not a call routed by Call: a control
// action, or a refusal made before the registry saw the call (an unknown
// tool's name that a front end rejected, a person's "deny"). Time is set
// if zero.
func (r *Registry) Audit(rec AuditRecord) {
	if rec.Time.IsZero() {
		rec.Time = time.Now().UTC()
	}
	if err := r.audit.Write(rec); err != nil {
		r.log("audit record not written", "error", err)
	}
}

// AuditRefusal records a call refused before Call: name and args as the
// client sent them, decision as in AuditRecord.
func (r *Registry) AuditRefusal(ctx context.Context, name string, args []byte, decision string, err error) {
	args = normalizeArgs(args)
	rec := AuditRecord{Time: time.Now().UTC(), CallID: r.recent.id(), Client: clientOf(ctx), Caller: CallerName(ctx), Tool: name, ArgsSHA256: sha256Hex(args), ArgsSize: len(args), Decision: decision, Outcome: "refused"}
	if err != nil {
		rec.Error = err.Error()
	}
	r.Audit(rec)
	r.recent.add(rec, explain(r.policy.rules(), Tool{}, Decision{}, &rec))
	r.observers.Load().ended("", "", &rec, 0)
}

// CallObserver sees every call (metrics): CallStarted once the tool is
// known, and CallEnded once per call with its audit record (also for calls
// refused before or in Call; server and tool are "" when the tool was not
// found, so that a client's made-up names never become labels). Both run
// on the caller's goroutine and must not block.
type CallObserver interface {
	CallStarted(server, tool string)
	CallEnded(server, tool string, rec *AuditRecord, elapsed time.Duration)
}

// AuditQueued is how many audit records wait to be written.
func (r *Registry) AuditQueued() int { return r.audit.Queued() }

// AddObserver adds o to the call observers.
func (r *Registry) AddObserver(o CallObserver) {
	for {
		cur := r.observers.Load()
		next := observers{o}
		if cur != nil {
			next = append(slices.Clone(*cur), o)
		}
		if r.observers.CompareAndSwap(cur, &next) {
			return
		}
	}
}

// observers are the call observers, in the order added.
type observers []CallObserver

func (ob *observers) started(server, tool string) {
	if ob != nil {
		for _, o := range *ob {
			o.CallStarted(server, tool)
		}
	}
}

func (ob *observers) ended(server, tool string, rec *AuditRecord, elapsed time.Duration) {
	if ob != nil {
		for _, o := range *ob {
			o.CallEnded(server, tool, rec, elapsed)
		}
	}
}

func (r *Registry) validate(pol rules, t Tool, args []byte) error {
	if !pol.visible(t) {
		return protocol.Errorf(protocol.CodePermissionDenied, "%s needs write access, and this host is configured with access = \"read\"", t.Name)
	}
	if t.schema != nil {
		return validateArgs(t.Name, t.schema, args)
	}
	return nil
}

// decide is the policy's one evaluation of a call: it asks the server for
// the call's permission patterns (if the tool has its own) and judges them.
func (r *Registry) decide(ctx context.Context, pol rules, t Tool, args []byte) (Decision, error) {
	patterns := []string{t.Tool.Name}
	if t.Tool.CustomPermissionPattern {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		pats, err := t.Entry.Server.PermissionPatterns(pctx, t.Tool.Name, args)
		if err != nil {
			// The plugin's code says why (a refusal, a plugin going away);
			// an error without one is about the arguments.
			code := protocol.CodeInvalidArguments
			if perr := (*protocol.Error)(nil); errors.As(err, &perr) {
				code = perr.Code
			}
			return Decision{Verdict: Deny, Reason: ByPatternError}, protocol.Errorf(code, "%s: cannot judge the call's permissions: %v", t.Name, err)
		}
		if len(pats) == 0 {
			pats = []string{t.Tool.Name}
		}
		patterns = pats
	}
	d := pol.decide(t.Name, patterns)
	if !t.Tool.CustomPermissionPattern {
		// The tool has no patterns: "always" is about the tool itself.
		for i := range d.Pending {
			d.Pending[i].Rule = Literal(t.Name)
		}
	}
	return d, nil
}

// settle carries out a verdict: nil to run the call, or the refusal. An
// Ask verdict goes to the Approver in ctx, if any; rec learns what it said.
func (r *Registry) settle(ctx context.Context, pol rules, t Tool, args []byte, d Decision, rec *AuditRecord) error {
	switch d.Verdict {
	case Allow:
		return nil
	case Ask:
		a := Approval{Tool: t.Name, Args: args, Pending: d.Pending, Source: pol.source, AskFirst: pol.def != Ask, Caller: CallerName(ctx), Unchecked: d.Unchecked}
		approver := approverFrom(ctx)
		if approver == nil {
			return a.Required()
		}
		if err := approver.Approve(ctx, a); err != nil {
			if _, unanswered := errors.AsType[*ApprovalRequiredError](err); !unanswered {
				rec.Decision = "deny"
			}
			return err
		}
		rec.Decision = "approved"
		return nil
	}
	return pol.refusal(t.Name, d)
}

// repeated compares a call's result with the result of the same client's
// previous call, when that call had the same tool and arguments. A new
// result goes out as it is. A byte-identical one is answered with a short
// note instead (saving the client's context), and once dupLimit calls in a
// row have returned the same thing, with an error result that tells the
// model it is looping. A tool with an output schema keeps its result (its
// clients may require the structured content) until the loop breaker.
func (r *Registry) repeated(ctx context.Context, t Tool, argsSum string, res *toolcall.Result, rec *AuditRecord) *toolcall.Result {
	if t.Tool.SkipDuplicateCheck {
		return res
	}
	r.dupMu.Lock()
	limit := r.dupLimit
	if limit <= 0 {
		r.dupMu.Unlock()
		return res
	}
	client, key, sum := clientOf(ctx), t.Name+"\x00"+argsSum, resultSum(res)
	st := r.last[client]
	if st.key == key && st.result == sum {
		st.count++
	} else {
		st = dupState{key: key, result: sum, count: 1}
	}
	r.last[client] = st
	r.dupMu.Unlock()

	switch {
	case st.count == 1:
		return res
	case st.count >= limit:
		rec.Repeats = st.count
		return &toolcall.Result{IsError: true, Content: []toolcall.Content{toolcall.TextContent(fmt.Sprintf(
			"%s returned exactly the same result %d times in a row for the same arguments: this looks like a loop. The earlier result stands; change the arguments or do something else.",
			t.Name, st.count))}}
	case len(t.Tool.OutputSchema) > 0:
		rec.Repeats = st.count
		return res
	default:
		rec.Repeats = st.count
		return &toolcall.Result{IsError: res.IsError, Content: []toolcall.Content{toolcall.TextContent(fmt.Sprintf(
			"Unchanged: %s returned exactly the same result as your previous call with these arguments (%d identical results in a row), so it is not repeated here.",
			t.Name, st.count))}}
	}
}

// resultSum hashes everything a client sees of a result, quickly (results
// may be megabytes; maphash runs at memory speed, and a collision would
// only shorten an answer, which the next call corrects).
func resultSum(res *toolcall.Result) uint64 {
	var h maphash.Hash
	h.SetSeed(resultSeed)
	field := func(b []byte) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		_, _ = h.Write(n[:])
		_, _ = h.Write(b)
	}
	str := func(s string) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		_, _ = h.Write(n[:])
		_, _ = h.WriteString(s)
	}
	if res.IsError {
		str("error")
	}
	for _, c := range res.Content {
		str(c.Type)
		str(c.Text)
		field(c.Data)
		str(c.MIMEType)
		str(c.URI)
		str(c.Name)
		str(c.Description)
		field(c.Blob)
		field(c.Raw)
	}
	field(res.StructuredContent)
	field(res.Meta)
	return h.Sum64()
}

var resultSeed = maphash.MakeSeed()

// normalizeArgs treats absent and null arguments as an empty object, as MCP
// does.
func normalizeArgs(args []byte) []byte {
	if t := bytes.TrimSpace(args); len(t) == 0 || string(t) == "null" {
		return []byte("{}")
	}
	return args
}

// resultSize is the size in bytes of what res carries.
func resultSize(res *toolcall.Result) int {
	if res == nil {
		return 0
	}
	n := len(res.StructuredContent) + len(res.Meta)
	for _, c := range res.Content {
		if c.Raw != nil {
			n += len(c.Raw) // the item as its server sent it: the fields repeat it
			continue
		}
		n += len(c.Text) + len(c.Data) + len(c.Blob) + len(c.URI) + len(c.Name) + len(c.Description) + len(c.MIMEType)
	}
	return n
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Shutdown stops the registry: no new calls; in-flight calls get grace to
// finish and are then cancelled; then servers close, external ones first,
// then third-party plugins, then built-ins, each group in reverse start
// order. It returns when every server is closed or ctx ends.
func (r *Registry) Shutdown(ctx context.Context, grace time.Duration) error {
	r.mu.Lock()
	if r.closing {
		r.mu.Unlock()
		return nil
	}
	r.closing = true
	order := slices.Clone(r.order)
	r.mu.Unlock()

	drained := make(chan struct{})
	go func() {
		r.inflight.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(grace):
		r.cancel() // cancel what is still running
		select {
		case <-drained:
		case <-time.After(grace + protocol.DefaultCancelGrace):
		case <-ctx.Done():
		}
	case <-ctx.Done():
		r.cancel()
	}
	r.cancel()

	var errs []error
	for _, kind := range []Kind{KindExternal, KindPlugin, KindBuiltin} {
		for i := len(order) - 1; i >= 0; i-- {
			e := order[i]
			if e.Kind != kind {
				continue
			}
			if err := e.Server.Close(ctx); err != nil {
				errs = append(errs, fmt.Errorf("closing %s: %w", e.Server.Name(), err))
			}
		}
	}
	r.watchers.Wait()
	r.subsMu.Lock()
	hooks := slices.Clone(r.atShutdown)
	r.subsMu.Unlock()
	for _, fn := range hooks {
		fn()
	}
	if err := r.audit.Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing the audit log: %w", err))
	}
	return errors.Join(errs...)
}

// Package external connects to MCP servers that are not Switchboard plugins
// (any stdio or streamable HTTP MCP server) through mark3labs/mcp-go's
// client, and presents each as an instance the supervisor and registry
// handle like a plugin.
//
// It works around what mcp-go's client gets wrong for a gateway: tools are
// listed with a raw tools/list so schemas and annotations pass through
// byte for byte (the parsed mcp.Tool drops parts of them); calls are sent
// with our own request ids so a cancellation can name them on every
// transport (mcp-go only sends notifications/cancelled over stdio);
// progress notifications are dispatched without blocking the client's read
// loop, and those arriving after their call ended are dropped.
package external

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboard-mcp/switchboard/host/internal/pathguard"
	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/sysproc"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// Spec says how to reach a server: Command (stdio) or URL (HTTP).
type Spec struct {
	Name    string
	Command string
	Args    []string
	Env     map[string]string
	Dir     string
	URL     string
	Headers map[string]string
	// Timeout bounds connecting and listing tools.
	Timeout time.Duration
	// Sandbox, if set, confines a stdio server's process.
	Sandbox launcher.Sandbox
	// Untrusted are the folders servers may write: a command named
	// without a path is not looked up in them on PATH.
	Untrusted []string
	// Redact maps values in the spec to what its errors show instead (a
	// .mcp.json entry's values as written, before ${VAR} took the host's
	// environment in): an error reaches status and the switchboard
	// server's tools, which a client reads (red team round 19: a failed
	// server's error showed the token its URL took from the host's
	// environment). A URL's query and user info are cut from errors
	// besides.
	Redact map[string]string
}

// redacted is err as the spec's Redact shows it.
func (spec Spec) redacted(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	pairs := make([]string, 0, 2*len(spec.Redact)+4)
	for value, shown := range spec.Redact {
		if value != "" && value != shown {
			pairs = append(pairs, value, shown)
		}
	}
	if u, perr := url.Parse(spec.URL); perr == nil && (u.RawQuery != "" || u.User != nil) {
		cut := *u
		cut.User = nil
		if cut.RawQuery != "" {
			cut.RawQuery = "…"
		}
		pairs = append(pairs, spec.URL, cut.String())
		if u.RawQuery != "" {
			pairs = append(pairs, u.RawQuery, "…")
		}
	}
	if len(pairs) == 0 {
		return err
	}
	shown := strings.NewReplacer(pairs...).Replace(msg)
	if shown == msg {
		return err
	}
	return &redactedError{err: err, msg: shown}
}

// redactedError is an error whose text has values of the spec cut out;
// errors.Is and As still see the error it wraps.
type redactedError struct {
	err error
	msg string
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// EnvAllowlist is what a stdio server inherits from the host.
var EnvAllowlist = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "NODE_PATH", "npm_config_cache"}

// Server is one connection to an external MCP server.
type Server struct {
	spec   Spec
	log    hclog.Logger
	c      *client.Client
	tr     transport.Interface
	conn   *stdioConn                           // a stdio server's connection (tr), which calls take directly
	info   atomic.Pointer[toolcall.Description] // replaced when the server's lists change
	caps   mcp.ServerCapabilities
	cmd    *exec.Cmd
	pid    int                  // a stdio server's process, once started
	conf   launcher.Confinement // the sandbox of a stdio server's process
	nextID atomic.Int64
	drops  dropReport // notifications and call logs that did not fit

	progressMu sync.Mutex
	progress   map[string]chan toolcall.Progress

	events chan mcp.JSONRPCNotification // for Watch (features.go)

	askMu  sync.Mutex
	active []*activeCall // the calls in progress that can ask their client or take logs, oldest first
	last   protocol.ClientRequester

	done      chan struct{}
	doneOnce  sync.Once
	closeOnce sync.Once
	endLife   context.CancelFunc
}

// Connect starts (stdio) or reaches (HTTP) the server, initializes MCP and
// lists its tools.
func Connect(ctx context.Context, spec Spec, log hclog.Logger) (*Server, error) {
	if spec.Timeout <= 0 {
		spec.Timeout = 30 * time.Second
	}
	s, err := connect(ctx, spec, log, false)
	if err != nil && spec.URL != "" {
		// An older server may only speak the HTTP+SSE transport.
		if s2, err2 := connect(ctx, spec, log, true); err2 == nil {
			log.Named(spec.Name).Info("connected with the legacy SSE transport", "url", spec.URL)
			return s2, nil
		}
	}
	return s, spec.redacted(err)
}

func connect(ctx context.Context, spec Spec, log hclog.Logger, sse bool) (*Server, error) {
	s := &Server{spec: spec, log: log.Named(spec.Name), progress: map[string]chan toolcall.Progress{}, done: make(chan struct{}), events: make(chan mcp.JSONRPCNotification, eventQueue)}
	var err error
	switch {
	case spec.Command != "":
		if s.conn, err = s.startStdio(); err == nil {
			s.c = client.NewClient(s.conn)
		}
	case spec.URL != "" && sse:
		s.c, err = client.NewSSEMCPClient(spec.URL, client.WithHeaders(spec.Headers))
	case spec.URL != "":
		s.c, err = client.NewStreamableHttpClient(spec.URL, transport.WithHTTPHeaders(spec.Headers))
	default:
		return nil, fmt.Errorf("external %s: needs command or url", spec.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("external %s: %w", spec.Name, err)
	}
	// External servers are spoken to in the handshake era, which every
	// server in the wild supports; raw tools/list and tools/call need no
	// per-request _meta there.
	client.WithLegacyProtocolOnly()(s.c) //nolint:staticcheck // SA1019: intended, see above
	// The server's requests to its client go to the client of the call in
	// progress (clientreq.go); set before Start, which wires them on stdio.
	ask := asker{s}
	client.WithSamplingHandler(ask)(s.c)
	client.WithElicitationHandler(ask)(s.c)
	client.WithRootsHandler(ask)(s.c)
	s.tr = s.c.GetTransport()
	s.c.OnNotification(s.onNotification)
	s.c.OnConnectionLost(func(err error) { s.markDone() })

	cctx, cancel := context.WithTimeout(ctx, spec.Timeout)
	defer cancel()
	fail := func(err error) (*Server, error) {
		_ = s.Close(context.Background())
		return nil, fmt.Errorf("external %s: %w", spec.Name, err)
	}
	// Start's context lives as long as the connection: the SSE transport
	// keeps its event stream open on it.
	life, endLife := context.WithCancel(context.Background())
	s.endLife = endLife
	started := make(chan error, 1)
	go func() { started <- s.c.Start(life) }()
	select {
	case err := <-started:
		if err != nil {
			return fail(err)
		}
		if s.conf != nil && s.pid > 0 {
			// Before initialize: a sandbox with limits holds the server
			// until it is in its cgroup.
			if err := s.conf.Started(s.pid); err != nil {
				return fail(err)
			}
		}
	case <-cctx.Done():
		return fail(fmt.Errorf("no connection within %s", spec.Timeout))
	}
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "switchboard", Version: "1"}
	req.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init, err := s.c.Initialize(cctx, req)
	if err != nil {
		return fail(fmt.Errorf("initialize: %w", err))
	}
	tools, err := s.listTools(cctx)
	if err != nil {
		return fail(fmt.Errorf("tools/list: %w", err))
	}
	info := &toolcall.Description{
		Name: spec.Name, PluginVersion: init.ServerInfo.Version, SDKVersion: "mcp " + init.ProtocolVersion,
		Instructions: init.Instructions, Tools: tools,
	}
	s.caps = init.Capabilities
	if err := s.listFeatures(cctx, info); err != nil {
		return fail(err)
	}
	s.info.Store(info)
	if s.pid > 0 {
		go s.watchProcess(s.pid)
	}
	return s, nil
}

// command builds the stdio server's process: a clean environment, its own
// process group, and death with the host.
func (s *Server) command(ctx context.Context, command string, _ []string, args []string) (*exec.Cmd, error) {
	// A name is looked up on PATH, but not in a folder a server may write
	// (a project's .venv/bin or node_modules/.bin first on the host's
	// PATH): an agent's python3 there ran with the server's grants, the
	// network among them (red team round 5).
	resolved, err := pathguard.LookPath(command, s.spec.Untrusted)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(resolved, args...)
	for _, k := range EnvAllowlist {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	for k, v := range s.spec.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Dir = s.spec.Dir
	cmd.SysProcAttr = sysproc.Attr(syscall.SIGTERM)
	if s.spec.Sandbox != nil {
		conf, err := s.spec.Sandbox.Wrap(cmd, "")
		if err != nil {
			return nil, err
		}
		s.conf = conf
	}
	s.cmd = cmd
	return cmd, nil
}

// watchProcess notices a stdio server's exit at once (its output may
// stay open in a child it left behind).
func (s *Server) watchProcess(pid int) {
	if exited, ok := waitExit(pid, s.done); ok {
		if exited {
			s.markDone()
		}
		return
	}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			if !alive(pid) {
				s.markDone()
				return
			}
		}
	}
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		// No /proc (not Linux): a signal 0 says whether it exists.
		return syscall.Kill(pid, 0) == nil
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

func (s *Server) markDone() { s.doneOnce.Do(func() { close(s.done) }) }

func (s *Server) id() mcp.RequestId { return mcp.NewRequestId(s.idText()) }

// idText is the next of the host's own request ids ("sb-N").
func (s *Server) idText() string { return "sb-" + strconv.FormatInt(s.nextID.Add(1), 10) }

// listTools reads tools/list raw, following cursors.
func (s *Server) listTools(ctx context.Context) ([]*toolcall.Tool, error) {
	var out []*toolcall.Tool
	cursor := ""
	for page := 0; page < 100; page++ {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		resp, err := s.tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: s.id(), Method: "tools/list", Params: params})
		if err != nil {
			return nil, err
		}
		if resp.Error != nil {
			return nil, resp.Error.AsError()
		}
		var r struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(resp.Result, &r); err != nil {
			return nil, err
		}
		for _, raw := range r.Tools {
			t, err := toolFromRaw(raw)
			if err != nil {
				return nil, err
			}
			out = append(out, t)
		}
		if r.NextCursor == "" {
			return out, nil
		}
		cursor = r.NextCursor
	}
	return out, nil
}

func toolFromRaw(raw json.RawMessage) (*toolcall.Tool, error) {
	var t struct {
		Name         string          `json:"name"`
		Title        string          `json:"title"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema"`
		Annotations  *struct {
			Title           *string `json:"title"`
			ReadOnlyHint    *bool   `json:"readOnlyHint"`
			DestructiveHint *bool   `json:"destructiveHint"`
			IdempotentHint  *bool   `json:"idempotentHint"`
			OpenWorldHint   *bool   `json:"openWorldHint"`
		} `json:"annotations"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("a tool is not valid JSON: %w", err)
	}
	if len(t.InputSchema) == 0 || string(t.InputSchema) == "null" {
		t.InputSchema = json.RawMessage(`{"type":"object"}`)
	}
	pt := &toolcall.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema, Access: toolcall.AccessWrite}
	if len(t.OutputSchema) > 0 && string(t.OutputSchema) != "null" {
		pt.OutputSchema = t.OutputSchema
	}
	if a := t.Annotations; a != nil {
		pt.Annotations = &toolcall.Annotations{Title: a.Title, ReadOnlyHint: a.ReadOnlyHint, DestructiveHint: a.DestructiveHint, IdempotentHint: a.IdempotentHint, OpenWorldHint: a.OpenWorldHint}
		// A server's own read-only claim makes the tool READ; anything
		// else (or nothing) is WRITE.
		if a.ReadOnlyHint != nil && *a.ReadOnlyHint {
			pt.Access = toolcall.AccessRead
		}
	}
	return pt, nil
}

// onNotification runs on the client's read loop: it must never block.
func (s *Server) onNotification(n mcp.JSONRPCNotification) {
	if n.Method == string(mcp.MethodNotificationMessage) && s.logToCall(n) {
		return
	}
	if n.Method != string(mcp.MethodNotificationProgress) {
		s.queueEvent(n)
		return
	}
	f := n.Params.AdditionalFields
	token := fmt.Sprint(f["progressToken"])
	s.progressMu.Lock()
	ch := s.progress[token]
	s.progressMu.Unlock()
	if ch == nil {
		return // its call already ended
	}
	var p toolcall.Progress
	if v, ok := f["progress"].(float64); ok {
		p.Progress = v
	}
	if v, ok := f["total"].(float64); ok {
		p.Total = v
	}
	if v, ok := f["message"].(string); ok {
		p.Message = v
	}
	select {
	case ch <- p:
	default:
	}
}

// Describe returns the server's tools.
func (s *Server) Describe() *toolcall.Description { return s.info.Load() }

// Call runs tools/call with our own request id; when ctx ends the server
// is sent notifications/cancelled naming it, on any transport.
func (s *Server) Call(ctx context.Context, tool string, args []byte, onProgress toolcall.ProgressFunc) (*toolcall.Result, error) {
	call, end := s.calling(ctx)
	defer end()
	onLog := toolcall.LogFrom(ctx)
	idText := s.idText()
	id := mcp.NewRequestId(idText)
	var progress chan toolcall.Progress
	if onProgress != nil {
		progress = make(chan toolcall.Progress, 64)
		s.progressMu.Lock()
		s.progress[idText] = progress
		s.progressMu.Unlock()
		defer func() {
			s.progressMu.Lock()
			delete(s.progress, idText)
			s.progressMu.Unlock()
		}()
	}
	answers, forget, err := s.startCall(ctx, id, idText, tool, args, onProgress != nil)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeUnavailable, "%s: %v", s.spec.Name, err)
	}
	defer forget()
	for {
		select {
		case p := <-progress:
			onProgress(p)
		case <-call.wake:
			call.drainLogs(onLog)
		case a := <-answers:
			call.drainLogs(onLog) // logged before the result
			if ctx.Err() != nil {
				s.cancel(id, ctx)
				return nil, protocol.Errorf(protocol.CodeCancelled, "%s.%s cancelled", s.spec.Name, tool)
			}
			if a.err != nil {
				return nil, protocol.Errorf(protocol.CodeUnavailable, "%s: %v", s.spec.Name, a.err)
			}
			if a.rpcErr != nil {
				code := protocol.CodeInternal
				if a.rpcErr.Code == mcp.INVALID_PARAMS {
					code = protocol.CodeInvalidArguments
				}
				return nil, protocol.Errorf(code, "%s: %s", s.spec.Name, a.rpcErr.Message)
			}
			return resultFromRaw(a.result)
		case <-ctx.Done():
			s.cancel(id, ctx)
			return nil, protocol.Errorf(protocol.CodeCancelled, "%s.%s cancelled", s.spec.Name, tool)
		}
	}
}

// startCall sends the tools/call request and returns the channel its
// answer comes on, and forget, to run once the caller stops waiting. A
// stdio server's connection writes it as bytes (stdioConn.startCall); on
// HTTP, mcp-go's transport sends it while the caller waits.
func (s *Server) startCall(ctx context.Context, id mcp.RequestId, idText, tool string, args []byte, progress bool) (<-chan answer, func(), error) {
	if s.conn != nil {
		return s.conn.startCall(idText, tool, args, progress)
	}
	params := map[string]any{"name": tool, "arguments": json.RawMessage(args)}
	if progress {
		params["_meta"] = map[string]any{"progressToken": idText}
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := s.tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Method: "tools/call", Params: params})
		if err != nil {
			done <- answer{err: err}
			return
		}
		done <- answer{result: resp.Result, rpcErr: resp.Error}
	}()
	return done, func() {}, nil
}

func (s *Server) cancel(id mcp.RequestId, ctx context.Context) {
	n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{
		Method: string(mcp.MethodNotificationCancelled),
		Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": id.Value(), "reason": context.Cause(ctx).Error()}},
	}}
	// The call's context has ended; the notification needs one of its own.
	go func() { //nolint:gosec // G118: deliberately not the ended request context
		nctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.tr.SendNotification(nctx, n)
	}()
}

// resultFromRaw converts an MCP tool result without loss: every content
// item keeps its raw JSON (annotations, its _meta, types this host does not
// model), as do structured content and the result's _meta; the typed fields
// are filled for the types the host knows, for its own use.
func resultFromRaw(raw json.RawMessage) (*toolcall.Result, error) {
	var r struct {
		Content           []json.RawMessage `json:"content"`
		StructuredContent json.RawMessage   `json:"structuredContent"`
		IsError           bool              `json:"isError"`
		Meta              json.RawMessage   `json:"_meta"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "tool result is not valid JSON: %v", err)
	}
	out := &toolcall.Result{IsError: r.IsError, Content: make([]toolcall.Content, 0, len(r.Content))}
	if present(r.StructuredContent) {
		out.StructuredContent = r.StructuredContent
	}
	if present(r.Meta) {
		out.Meta = r.Meta
	}
	for _, c := range r.Content {
		out.Content = append(out.Content, contentFromRaw(c))
	}
	return out, nil
}

// present reports whether a raw JSON value was sent and is not null.
func present(v json.RawMessage) bool {
	return len(v) > 0 && string(v) != "null"
}

// contentFromRaw converts one content item, keeping it raw.
func contentFromRaw(raw json.RawMessage) toolcall.Content {
	var v struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Data        string `json:"data"`
		MIMEType    string `json:"mimeType"`
		URI         string `json:"uri"`
		Name        string `json:"name"`
		Description string `json:"description"`
		Resource    *struct {
			URI      string `json:"uri"`
			MIMEType string `json:"mimeType"`
			Text     string `json:"text"`
			Blob     string `json:"blob"`
		} `json:"resource"`
	}
	c := toolcall.Content{Raw: raw}
	if json.Unmarshal(raw, &v) != nil {
		return c // passed on as sent; the client judges it
	}
	c.Type = v.Type
	switch v.Type {
	case toolcall.TypeText:
		c.Text = v.Text
	case toolcall.TypeImage, toolcall.TypeAudio:
		c.Data, _ = base64.StdEncoding.DecodeString(v.Data)
		c.MIMEType = v.MIMEType
	case toolcall.TypeResourceLink:
		c.URI, c.Name, c.Description, c.MIMEType = v.URI, v.Name, v.Description, v.MIMEType
	case toolcall.TypeResource:
		if r := v.Resource; r != nil {
			c.URI, c.MIMEType, c.Text = r.URI, r.MIMEType, r.Text
			if r.Blob != "" {
				c.Blob, _ = base64.StdEncoding.DecodeString(r.Blob)
			}
		}
	}
	return c
}

// PermissionPatterns: an external server has no say; the tool name is the
// pattern.
func (s *Server) PermissionPatterns(_ context.Context, tool string, _ []byte) ([]string, error) {
	return []string{tool}, nil
}

// Done is closed when the connection or process is gone.
func (s *Server) Done() <-chan struct{} { return s.done }

// Ping checks that the server answers.
func (s *Server) Ping(ctx context.Context) error {
	select {
	case <-s.done:
		return errors.New("connection lost")
	default:
	}
	return s.c.Ping(ctx) //nolint:staticcheck // SA1019: the connection is in the handshake era, where ping exists
}

// PID is the stdio server's process id (0 for HTTP).
func (s *Server) PID() int { return s.pid }

// ProtocolVersion is 0: external servers speak MCP, not the plugin
// protocol.
func (s *Server) ProtocolVersion() int { return 0 }

// Exited reports whether the server is gone.
func (s *Server) Exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Close ends the connection; a stdio server's process group gets SIGTERM,
// then SIGKILL.
func (s *Server) Close(context.Context) error {
	s.closeOnce.Do(func() {
		closed := make(chan struct{})
		go func() {
			_ = s.c.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(3 * time.Second):
		}
		if s.endLife != nil {
			s.endLife()
		}
		if pid := s.PID(); pid > 0 {
			_ = syscall.Kill(-pid, syscall.SIGTERM)
			deadline := time.Now().Add(2 * time.Second)
			for time.Now().Before(deadline) && syscall.Kill(-pid, 0) == nil {
				time.Sleep(20 * time.Millisecond)
			}
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		if s.conf != nil {
			s.conf.Stopped()
		}
		s.markDone()
	})
	return nil
}

// Confinement describes what confines a stdio server's process.
func (s *Server) Confinement() string {
	if s.spec.URL != "" {
		return "remote (runs elsewhere)"
	}
	if c, ok := s.spec.Sandbox.(fmt.Stringer); ok && c != nil {
		return c.String()
	}
	return "not confined (no sandbox)"
}

// String is for logs.
func (s *Server) String() string {
	if s.spec.URL != "" {
		return s.spec.Name + " (" + s.spec.URL + ")"
	}
	return s.spec.Name + " (" + strings.Join(append([]string{s.spec.Command}, s.spec.Args...), " ") + ")"
}

var _ toolcall.Server = (*Server)(nil)

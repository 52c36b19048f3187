package frontend

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"regexp"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/ablate"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/quietio"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/workpool"
)

// ServeStdio serves MCP over in/out until in ends or ctx is cancelled.
//
// mcp-go's stdio server handles the session: initialize, listings,
// notifications, cancellation, elicitation and everything else. Plain tool
// calls, the one message a busy client sends over and over, take a shorter
// path beside it (see eligible for which): mcp-go decodes every incoming line
// several times over and hands calls to a fixed pool of workers, which on
// a small machine costs as much CPU as the call itself. Anything the short
// path does not recognise exactly is passed to mcp-go untouched.
func (f *Frontend) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	if file, ok := in.(*os.File); ok && !ablate.Off(ablate.Poller) {
		if polled, restore := pollable(file); polled != nil {
			in = quietio.Stream(polled)
			defer restore()
		}
	}
	// Stdout too goes through the poller, for quiet writes (package
	// quietio); without them that would buy nothing.
	if file, ok := out.(*os.File); ok && !ablate.Off(ablate.QuietIO) {
		if polled, restore := pollable(file); polled != nil {
			out = quietio.Stream(polled)
			defer restore()
		}
	}
	w := &lineWriter{w: out, broken: make(chan struct{})}
	filter := newCancelFilter(w)
	sessionCtx := make(chan context.Context, 1)
	s := server.NewStdioServer(f.srv)
	server.WithWorkerPoolSize(Workers)(s)
	server.WithQueueSize(QueueSize)(s)
	server.WithStdioContextFunc(func(ctx context.Context) context.Context {
		// Calls write their progress straight to the output (see
		// callStream).
		ctx = withStream(ctx, stdioStream{w: w})
		sessionCtx <- ctx // the context mcp-go's handlers get: it carries the session
		return ctx
	})(s)
	s.SetErrorLogger(log.New(f.log.StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug}), "", 0))

	pr, pw := io.Pipe()
	listenDone := make(chan error, 1)
	go func() {
		err := s.Listen(ctx, pr, filter)
		_ = pr.CloseWithError(io.EOF) // unblock a forward still in progress
		listenDone <- err
	}()
	var fp *fastPath
	select {
	case c := <-sessionCtx:
		fp = newFastPath(f, c, w, pw, filter)
	case err := <-listenDone:
		return stdioErr(err)
	}

	// A read from stdin cannot be interrupted; when ctx ends first the
	// reader is left to end with the input (or the process).
	readDone := make(chan error, 1)
	go func() { readDone <- fp.read(in) }()
	var readErr error
	select {
	case readErr = <-readDone:
	case <-ctx.Done():
	case <-w.broken:
		// The client closed its end of stdout (a write to a broken pipe
		// on fd 1 used to end the host with SIGPIPE; the quiet writes
		// get the error): nobody hears answers any more, so the session
		// ends as if the input had.
		f.log.Info("stdout failed; ending the session", "error", w.failed())
	}
	// Input ended or the host is stopping: like mcp-go, stop the calls
	// still running and wait for them, then let mcp-go finish.
	fp.stop()
	_ = pw.Close()
	err := <-listenDone
	if readErr != nil && !errors.Is(readErr, io.EOF) && !errors.Is(readErr, io.ErrClosedPipe) {
		return readErr
	}
	return stdioErr(err)
}

func stdioErr(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// lineWriter makes each Write whole with respect to the others: mcp-go and
// the short path both write one complete message per Write.
type lineWriter struct {
	mu     sync.Mutex
	w      io.Writer
	err    error         // the first write error
	broken chan struct{} // closed at the first write error
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.w.Write(p)
	if err != nil && l.err == nil {
		l.err = err
		close(l.broken)
	}
	return n, err
}

// failed is the first write error, if there was one.
func (l *lineWriter) failed() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// fastPath answers plain tools/call requests itself.
type fastPath struct {
	f       *Frontend
	ctx     context.Context
	cancel  context.CancelFunc
	w       io.Writer
	forward io.Writer
	filter  *cancelFilter // mcp-go's output

	mu       sync.Mutex
	inflight map[string]*inflightCall // by idKey
	wg       sync.WaitGroup
	pool     *workpool.Pool // calls run on reused goroutines (warm stacks)
}

// inflightCall is a call running on the short path.
type inflightCall struct {
	cancel    context.CancelFunc
	cancelled atomic.Bool // by the client: the call gets no response
}

func newFastPath(f *Frontend, sessionCtx context.Context, w, forward io.Writer, filter *cancelFilter) *fastPath {
	ctx, cancel := context.WithCancel(sessionCtx)
	return &fastPath{f: f, ctx: ctx, cancel: cancel, w: w, forward: forward, filter: filter, inflight: map[string]*inflightCall{}, pool: workpool.New(Workers)}
}

// maxLine bounds one incoming message kept whole in memory for the short
// path; longer lines go to mcp-go as they are.
const maxLine = 4 << 20

// read reads messages until in ends, handling plain tool calls and passing
// every other line on to mcp-go.
func (p *fastPath) read(in io.Reader) error {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			var over bool
			if line, over, err = readLong(r, line, MaxMessageBytes); over {
				p.respond(prefixID(line), mcp.NewJSONRPCErrorDetails(mcp.INVALID_REQUEST, fmt.Sprintf("message refused: it is over %d bytes; send less (a large file in parts)", MaxMessageBytes), nil))
				debug.FreeOSMemory() // give the memory back now
				if err != nil {
					return err
				}
				continue
			}
		}
		// The short path takes valid calls; what it leaves is checked for
		// the requests mcp-go would accept wrongly, then forwarded.
		if len(line) > 0 && !p.handle(line) && !p.invalid(line) {
			p.filter.track(line)
			if _, werr := p.forward.Write(line); werr != nil {
				return werr
			}
			if line[len(line)-1] != '\n' {
				_, _ = p.forward.Write([]byte{'\n'})
			}
		}
		if err != nil {
			return err
		}
	}
}

// readLong reads the rest of a line longer than r's buffer, whose start is
// first, in parts, and joins them once. (One buffer grown by append
// allocated some five times a large line's size, and kept for the next
// line it held up to 4 MB for the rest of the session.) over is set when
// the line passed limit bytes: its rest was skipped, not kept, and line is
// its start only (for the id of the refusal).
func readLong(r *bufio.Reader, first []byte, limit int) (line []byte, over bool, err error) {
	parts := [][]byte{bytes.Clone(first)}
	n := len(first)
	for err = bufio.ErrBufferFull; errors.Is(err, bufio.ErrBufferFull); {
		var part []byte
		part, err = r.ReadSlice('\n')
		if n += len(part); n > limit {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			return parts[0], true, err
		}
		parts = append(parts, bytes.Clone(part))
	}
	return bytes.Join(parts, nil), false, err
}

// MaxMessageBytes bounds one incoming message on stdio, as
// DefaultMaxBodyBytes does on HTTP: a larger one is refused while it is
// read, without being kept.
const MaxMessageBytes = DefaultMaxBodyBytes

// invalid answers a message that is not a valid JSON-RPC request or
// notification for MCP with Invalid Request (-32600) and reports whether it
// did: a batch (an array; MCP has none), or an id that is not a string or
// an integer (7.5, true, an object, an array, null). A line that does not
// parse is left to mcp-go, which answers Parse error.
func (p *fastPath) invalid(line []byte) bool {
	why, bad := invalidRequest(line)
	if bad {
		p.respond(json.RawMessage("null"), mcp.NewJSONRPCErrorDetails(mcp.INVALID_REQUEST, why, nil))
	}
	return bad
}

// invalidRequest says why a message is an invalid request for MCP (see
// fastPath.invalid), if it is; both front ends answer it with -32600.
func invalidRequest(msg []byte) (string, bool) {
	t := bytes.TrimSpace(msg)
	if len(t) == 0 {
		return "", false
	}
	if t[0] == '[' {
		if json.Valid(t) {
			return "batches are not supported: MCP sends one JSON-RPC message at a time", true
		}
		return "", false
	}
	var m map[string]json.RawMessage // not a struct: "id": null must be seen
	if json.Unmarshal(t, &m) != nil {
		return "", false // not parseable: mcp-go says so
	}
	id, ok := m["id"]
	if !ok || validID(id) {
		return "", false // a notification, or fine
	}
	return "the request id must be a string or an integer, got " + string(id), true
}

// validID reports whether id is a string or an integer (MCP: not null).
func validID(id json.RawMessage) bool {
	if string(bytes.TrimSpace(id)) == "null" {
		return false // Unmarshal would take it as "" and 0
	}
	var s string
	if json.Unmarshal(id, &s) == nil {
		return true
	}
	var n json.Number
	if json.Unmarshal(id, &n) != nil {
		return false
	}
	_, err := n.Int64()
	return err == nil
}

// prefixID finds the id of a message from its first bytes (a message too
// large to parse), or null.
func prefixID(b []byte) json.RawMessage {
	head := b[:min(len(b), 4096)]
	if m := idRE.FindSubmatch(head); m != nil && validID(m[1]) {
		return json.RawMessage(m[1])
	}
	return json.RawMessage("null")
}

var idRE = regexp.MustCompile(`"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?[0-9]+)`)

// stop cancels the short path's calls and waits for them.
func (p *fastPath) stop() {
	p.cancel()
	p.wg.Wait()
	p.pool.Close()
}

// callMessage is a tools/call request as mcp-go reads one. Task,
// InputResponses and RequestState are only looked at: a request that
// carries them (a task-augmented call, the retry of a call that asked for
// input) is mcp-go's. Fields neither reads are ignored by both.
type callMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  struct {
		Name           string          `json:"name"`
		Arguments      json.RawMessage `json:"arguments"`
		Meta           *mcp.Meta       `json:"_meta"`
		Task           json.RawMessage `json:"task"`
		InputResponses json.RawMessage `json:"inputResponses"`
		RequestState   json.RawMessage `json:"requestState"`
	} `json:"params"`
}

// shortCall is a call the short path answers.
type shortCall struct {
	id        json.RawMessage
	canonical string
	req       mcp.CallToolRequest
	ctx       context.Context // carries the session and the request's protocol era
	modern    bool            // of the 2026-07-28 era: its result is decorated
}

// eligible is the one test that decides which route a line takes: it
// returns the call when the short path may answer line, and nil when the
// line goes to mcp-go. The short path answers exactly the requests for
// which mcp-go's own handling comes down to "run the tool's handler and
// write its result", so a line is eligible only when all of these hold:
//
//   - the short path is on (sdk/protocol/ablate, "shortpath");
//   - it is a JSON-RPC 2.0 tools/call request, one object on one line of at
//     most maxLine bytes, whose id is a string or a number;
//   - it carries no task, inputResponses or requestState (task-augmented
//     calls and the retries of multi-round-trip calls are mcp-go's);
//   - it names a tool the host serves that passes the server's tool
//     filter (listReady), as mcp-go checks at call time: otherwise mcp-go
//     answers "not found" and the audit hook records it;
//   - the policy cannot ask a person (an ask needs mcp-go's elicitation,
//     and its bridge for older clients);
//   - its protocol era is one mcp-go accepts: no modern version in _meta,
//     or a supported one with client capabilities (mcp-go refuses the rest).
//
// What mcp-go does besides for every call is either the same here (the
// request's protocol information in the context, the session's client
// info, recovery from a panicking handler, the OnError hooks, the
// 2026-07-28 result decoration, cancellation by notifications/cancelled)
// or switched off in the server New builds (schema validation, other
// middleware and hooks, tracing, request logging, tasks; the host adds no
// session tools):
// TestShortPathHonoursEveryServerOption fails when mcp-go gains an option
// or the host sets one that this list does not cover.
func (p *fastPath) eligible(line []byte) *shortCall {
	if p.f.noShortPath {
		return nil
	}
	m, ok := decodeCall(line)
	if !ok {
		return nil
	}
	names := p.f.names.Load()
	if names == nil {
		return nil
	}
	canonical, ok := (*names)[m.Params.Name]
	if !ok || p.f.reg.Policy().MayAsk() {
		return nil
	}
	ctx, modern, ok := p.protocolContext(m.Params.Meta)
	if !ok || !p.f.passesFilter(ctx, m.Params.Name) {
		return nil
	}
	c := &shortCall{id: append(json.RawMessage(nil), m.ID...), canonical: canonical, ctx: ctx, modern: modern}
	c.req.Method = m.Method
	c.req.Params.Name = m.Params.Name
	c.req.Params.RawArguments = m.Params.Arguments
	c.req.Params.Meta = m.Params.Meta
	return c
}

// decodeCall decodes line if it is a plain tools/call request (the
// message-shape part of eligible).
func decodeCall(line []byte) (*callMessage, bool) {
	if !bytes.Contains(line, toolsCall) || len(line) > maxLine {
		return nil, false
	}
	var m callMessage
	if json.Unmarshal(line, &m) != nil || !m.plain() {
		return nil, false
	}
	return &m, true
}

// plain reports whether m is an ordinary call the short path may answer.
func (m *callMessage) plain() bool {
	absent := func(v json.RawMessage) bool { return len(v) == 0 || string(v) == "null" }
	return m.JSONRPC == mcp.JSONRPC_VERSION && m.Method == string(mcp.MethodToolsCall) && plainID(m.ID) &&
		absent(m.Params.Task) && absent(m.Params.InputResponses) && absent(m.Params.RequestState)
}

var (
	toolsCall   = []byte(`"tools/call"`)
	cancelledNt = []byte(`"notifications/cancelled"`)
)

// handle answers line if it is eligible, and reports whether it did. It
// also cancels the short path's own calls on notifications/cancelled
// (which mcp-go gets as well).
func (p *fastPath) handle(line []byte) bool {
	if bytes.Contains(line, cancelledNt) {
		p.cancelled(line)
		return false
	}
	c := p.eligible(line)
	if c == nil {
		return false
	}
	p.f.short.Add(1)
	p.filter.acquire() // released once the call is answered
	ctx, cancel := context.WithCancel(c.ctx)
	key := idKey(c.id)
	call := &inflightCall{cancel: cancel}
	p.mu.Lock()
	p.inflight[key] = call
	p.mu.Unlock()
	p.wg.Add(1)
	p.pool.Go(func() {
		defer p.wg.Done()
		defer p.filter.release()
		defer func() {
			p.mu.Lock()
			delete(p.inflight, key)
			p.mu.Unlock()
			cancel()
		}()
		res := p.run(ctx, c)
		if call.cancelled.Load() {
			return // MCP: a cancelled request gets no response
		}
		if r, ok := res.(*mcp.CallToolResult); ok && c.modern {
			p.decorate(r)
		}
		p.respond(c.id, res)
	})
	return true
}

// decorate stamps a result for the 2026-07-28 era as mcp-go does: its
// result type, and the server's identity in _meta.
func (p *fastPath) decorate(r *mcp.CallToolResult) {
	if r.GetResultType() == "" {
		r.SetResultType(mcp.ResultTypeComplete)
	}
	if meta := r.EnsureResultMeta(); meta != nil && meta.ServerInfo() == nil {
		meta.SetServerInfo(mcp.Implementation{Name: ServerName, Version: p.f.version})
	}
}

// protocolContext does for a call what mcp-go does for every request: a
// request of the 2026-07-28 era or later carries its protocol version,
// client and capabilities in _meta, which go into the context and the
// session; an older one relies on the initialize handshake. Requests mcp-go
// would refuse (an unknown modern version, no capabilities) are left to it.
func (p *fastPath) protocolContext(meta *mcp.Meta) (ctx context.Context, modern, ok bool) {
	version := meta.ProtocolVersion()
	if !mcp.IsModernProtocol(version) {
		return server.WithRequestProtocolInfo(p.ctx, &server.RequestProtocolInfo{ProtocolVersion: version}), false, true
	}
	caps := meta.ClientCapabilities()
	if !mcp.IsValidProtocolVersion(version) || caps == nil {
		return nil, false, false
	}
	info := &server.RequestProtocolInfo{Modern: true, ProtocolVersion: version, ClientInfo: meta.ClientInfo(), LogLevel: meta.LogLevel(), ClientCapabilities: caps}
	if session := server.ClientSessionFromContext(p.ctx); session != nil {
		if withInfo, ok := session.(server.SessionWithClientInfo); ok {
			if info.ClientInfo != nil {
				withInfo.SetClientInfo(*info.ClientInfo)
			}
			withInfo.SetClientCapabilities(*caps)
		}
		if !session.Initialized() {
			session.Initialize()
		}
	}
	return server.WithRequestProtocolInfo(p.ctx, info), true, true
}

// run calls the tool as mcp-go would call its handler: a panic is
// recovered as WithRecovery does, and an error answer goes through the
// server's OnError hooks as mcp-go's would.
func (p *fastPath) run(ctx context.Context, c *shortCall) (res any) {
	var err error
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic recovered in %s tool handler: %v", c.req.Params.Name, r)
		}
		if err != nil {
			var id any
			_ = json.Unmarshal(c.id, &id)
			for _, h := range p.f.srvHooks.OnError {
				h(ctx, id, mcp.MethodToolsCall, &c.req, err)
			}
			res = mcp.NewJSONRPCErrorDetails(mcp.INTERNAL_ERROR, err.Error(), nil)
		}
	}()
	out, err := p.f.call(ctx, c.canonical, c.req)
	if err != nil {
		return nil
	}
	return out
}

// respond writes the answer to request id: a result or a JSON-RPC error.
func (p *fastPath) respond(id json.RawMessage, res any) {
	msg := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result,omitempty"`
		Error   any             `json:"error,omitempty"`
	}{JSONRPC: mcp.JSONRPC_VERSION, ID: id}
	if e, ok := res.(mcp.JSONRPCErrorDetails); ok {
		msg.Error = e
	} else {
		msg.Result = res
	}
	b, err := json.Marshal(msg)
	if err != nil {
		p.f.log.Error("tool result not sent: it does not encode as JSON", "error", err)
		b, _ = json.Marshal(struct {
			JSONRPC string                  `json:"jsonrpc"`
			ID      json.RawMessage         `json:"id"`
			Error   mcp.JSONRPCErrorDetails `json:"error"`
		}{mcp.JSONRPC_VERSION, id, mcp.NewJSONRPCErrorDetails(mcp.INTERNAL_ERROR, "the result could not be encoded: "+err.Error(), nil)})
	}
	if _, err := p.w.Write(append(b, '\n')); err != nil {
		p.f.log.Debug("tool result not sent", "error", err)
	}
}

// cancelled cancels a short-path call named by a notifications/cancelled,
// which then gets no response; a request of mcp-go's gets none either (see
// cancelFilter).
func (p *fastPath) cancelled(line []byte) {
	var n struct {
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &n) != nil || len(n.Params.RequestID) == 0 {
		return
	}
	p.mu.Lock()
	call := p.inflight[idKey(n.Params.RequestID)]
	p.mu.Unlock()
	if call == nil {
		p.filter.cancel(n.Params.RequestID)
		return
	}
	call.cancelled.Store(true)
	call.cancel()
}

// cancelFilter is the writer mcp-go answers stdio requests through. MCP
// says a cancelled request gets no response, but mcp-go answers a tool call
// whose handler was cancelled like any other: cancelFilter notes the
// requests given to mcp-go, and drops the response of one the client
// cancelled.
type cancelFilter struct {
	w io.Writer

	mu      sync.Mutex
	pending map[string]bool // unanswered requests by idKey; true once cancelled

	// slots bound the requests in flight, on both routes: when they are
	// all taken the input is not read until one is answered, so a client
	// that writes without reading the answers cannot make the host queue
	// without end (it is backpressure, as a pipe gives).
	slots chan struct{}
	over  atomic.Int64 // requests let in past the bound (see acquire)
}

// MaxInFlight is how many requests one stdio client may have unanswered
// before the host stops reading its input until one is answered.
const MaxInFlight = 256

func newCancelFilter(w io.Writer) *cancelFilter {
	return &cancelFilter{w: w, pending: map[string]bool{}, slots: make(chan struct{}, MaxInFlight)}
}

// slotWait is the longest the input waits for a free slot. Past it one
// more request is let in: the answers the calls are waiting for (a
// client's reply to a sampling request) come on the same input, so a hard
// bound could wait forever; this one still holds a client that does not
// read to one request per slotWait.
const slotWait = 30 * time.Second

// acquire takes a request slot, waiting while all are taken.
func (c *cancelFilter) acquire() {
	select {
	case c.slots <- struct{}{}:
		return
	default:
	}
	t := time.NewTimer(slotWait)
	defer t.Stop()
	select {
	case c.slots <- struct{}{}:
	case <-t.C:
		c.over.Add(1)
	}
}

// release gives a request slot back.
func (c *cancelFilter) release() {
	for {
		n := c.over.Load()
		if n == 0 {
			break
		}
		if c.over.CompareAndSwap(n, n-1) {
			return
		}
	}
	select {
	case <-c.slots:
	default:
	}
}

// message is the part of a JSON-RPC message that tells a request or a
// notification (method) from a response, and names it.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

// track notes line, on its way to mcp-go, if it is a request.
func (c *cancelFilter) track(line []byte) {
	var m message
	if !bytes.Contains(line, []byte(`"method"`)) || json.Unmarshal(line, &m) != nil || m.Method == "" || !plainID(m.ID) {
		return
	}
	k := idKey(m.ID)
	c.mu.Lock()
	_, again := c.pending[k]
	c.pending[k] = false
	c.mu.Unlock()
	if !again {
		c.acquire() // released when mcp-go answers it (Write)
	}
}

// cancel marks request id cancelled, if mcp-go has it and has not answered.
func (c *cancelFilter) cancel(id json.RawMessage) {
	k := idKey(id)
	c.mu.Lock()
	if _, ok := c.pending[k]; ok {
		c.pending[k] = true
	}
	c.mu.Unlock()
}

// Write writes one message of mcp-go's, unless it answers a cancelled
// request.
func (c *cancelFilter) Write(p []byte) (int, error) {
	c.mu.Lock()
	waiting := len(c.pending) > 0
	c.mu.Unlock()
	if waiting {
		id, ok := responseID(p)
		if !ok {
			var m message
			if json.Unmarshal(p, &m) == nil && m.Method == "" {
				id = m.ID
			}
		}
		if plainID(id) {
			k := idKey(id)
			c.mu.Lock()
			cancelled, tracked := c.pending[k]
			delete(c.pending, k)
			c.mu.Unlock()
			if tracked {
				defer c.release()
			}
			if cancelled {
				return len(p), nil
			}
		}
	}
	return c.w.Write(p)
}

// responseHead is how mcp-go begins every response it writes (a
// JSONRPCResponse or JSONRPCError, fields in their struct's order).
var responseHead = []byte(`{"jsonrpc":"2.0","id":`)

// responseID reads the id of a response written as mcp-go writes one,
// {"jsonrpc":"2.0","id":ID,"result":… or …,"error":…, without reading the
// rest: decoding a whole result to find its id was a fifth of the host's
// time answering a large tools/list, and grows with every large tool
// result. It returns false for anything else (a request or notification
// of the server's, an id with escapes or a fraction), which Write then
// decodes in full.
func responseID(p []byte) (json.RawMessage, bool) {
	rest, ok := bytes.CutPrefix(p, responseHead)
	if !ok || len(rest) == 0 {
		return nil, false
	}
	end := 0
	if rest[0] == '"' {
		i := bytes.IndexByte(rest[1:], '"')
		if i < 0 || bytes.IndexByte(rest[1:1+i], '\\') >= 0 || !json.Valid(rest[:i+2]) {
			return nil, false
		}
		end = i + 2
	} else {
		digits := 0
		if rest[0] == '-' {
			end = 1
		}
		for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
			end++
			digits++
		}
		if digits == 0 || (digits > 1 && rest[end-digits] == '0') { // JSON has no leading zeros
			return nil, false
		}
	}
	after := rest[end:]
	if !(bytes.HasPrefix(after, []byte(`,"result":`)) || bytes.HasPrefix(after, []byte(`,"error":`))) {
		return nil, false
	}
	return json.RawMessage(rest[:end]), true
}

// idKey names a request id for the in-flight map: a string as written, a
// number by its value (so 7 and 7.0 are the same request).
func idKey(id json.RawMessage) string {
	if len(id) > 0 && id[0] != '"' {
		if f, err := strconv.ParseFloat(string(id), 64); err == nil {
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
	}
	return string(id)
}

// plainID reports whether id is a JSON number or string (not null, not
// missing, not an object).
func plainID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	c := id[0]
	if c == '"' {
		return true
	}
	// An integer: anything else (7.5, 1e3) is for invalid to refuse.
	return (c == '-' || (c >= '0' && c <= '9')) && !bytes.ContainsAny(id, ".eE")
}

package external

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// stdioConn is the host's JSON-RPC connection to a stdio server over its
// pipes. mcp-go's client runs on it (initialize, listings, ping, the
// server's requests and notifications: it is a
// transport.BidirectionalInterface), and the host's tool calls take it
// directly (startCall): the request is written as bytes and the answer's
// result handed over as the server wrote it.
//
// Why not mcp-go's stdio transport: per call it encoded the request
// through a map, copied the answer's line three times and decoded it
// twice, and the host waited for it on a goroutine of its own; with 32
// callers that was a fifth of a gateway host's CPU per call (README,
// "As a gateway"). It reads as mcp-go's does: a line that is not JSON is
// skipped, a message with a method and no id is a notification, one with
// both a request of the server's, anything else an answer.
type stdioConn struct {
	stdin  io.WriteCloser
	stdout io.Reader
	closer io.Closer // ends a read of stdout in progress (Close)
	log    hclog.Logger

	// Messages are written in groups (write): wmu guards the group being
	// gathered, writeMu the write in progress, so that groups go out in
	// order.
	writeMu  sync.Mutex
	wmu      sync.Mutex
	wbuf     []byte // the messages gathered for the next write
	spare    []byte // the last group's buffer, for the next
	flushing bool   // a writer is gathering: the next message joins it

	mu      sync.Mutex
	pending map[string]chan answer // by answerKey of the request's id
	closed  bool                   // no more requests: their answers could not come

	handlerMu      sync.RWMutex
	onNotification func(mcp.JSONRPCNotification)
	onRequest      transport.RequestHandler
	ctx            context.Context // Start's: the server's requests run in it

	done      chan struct{}
	doneOnce  sync.Once
	closeOnce sync.Once
}

// answer is the outcome of a request: the server's result or error, or
// why there is none (err).
type answer struct {
	result json.RawMessage
	rpcErr *mcp.JSONRPCErrorDetails
	err    error
}

func newStdioConn(stdin io.WriteCloser, stdout io.Reader, closer io.Closer, log hclog.Logger) *stdioConn {
	return &stdioConn{stdin: stdin, stdout: stdout, closer: closer, log: log, pending: map[string]chan answer{}, done: make(chan struct{}), ctx: context.Background()}
}

// Start starts reading the server's output; ctx is where the server's
// requests to the host run.
func (c *stdioConn) Start(ctx context.Context) error {
	c.handlerMu.Lock()
	c.ctx = ctx
	c.handlerMu.Unlock()
	go c.readLoop()
	return nil
}

// readLoop reads the server's messages until its output ends.
func (c *stdioConn) readLoop() {
	defer c.closeDone()
	r := bufio.NewReaderSize(c.stdout, 64<<10)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A message longer than the buffer (lineCap bounds it at
			// MaxLineBytes): its parts, then the whole in one
			// allocation of its size.
			var parts [][]byte
			n := 0
			for errors.Is(err, bufio.ErrBufferFull) {
				parts = append(parts, bytes.Clone(line))
				n += len(line)
				line, err = r.ReadSlice('\n')
			}
			whole := make([]byte, 0, n+len(line))
			for _, p := range parts {
				whole = append(whole, p...)
			}
			line = append(whole, line...)
		}
		if len(bytes.TrimSpace(line)) > 0 {
			c.dispatch(line)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, fs.ErrClosed) {
				c.log.Error("reading the server's output", "error", err)
			}
			return
		}
	}
}

// dispatch handles one message; line is not kept.
func (c *stdioConn) dispatch(line []byte) {
	var m struct {
		ID     json.RawMessage          `json:"id"`
		Method string                   `json:"method"`
		Result json.RawMessage          `json:"result"`
		Error  *mcp.JSONRPCErrorDetails `json:"error"`
	}
	if json.Unmarshal(line, &m) != nil {
		return
	}
	hasID := len(m.ID) > 0 && string(m.ID) != "null"
	if m.Method != "" && !hasID {
		var n mcp.JSONRPCNotification
		if json.Unmarshal(line, &n) != nil {
			return
		}
		c.handlerMu.RLock()
		h := c.onNotification
		c.handlerMu.RUnlock()
		if h != nil {
			h(n)
		}
		return
	}
	if m.Method != "" {
		var req transport.JSONRPCRequest
		if json.Unmarshal(line, &req) == nil {
			c.serveRequest(req)
			return
		}
	}
	key, ok := answerKey(m.ID)
	if !ok {
		return
	}
	c.mu.Lock()
	ch := c.pending[key]
	delete(c.pending, key)
	c.mu.Unlock()
	if ch != nil {
		ch <- answer{result: m.Result, rpcErr: m.Error}
	}
}

// answerKey is the key of an answer's id in pending: mcp.RequestId's
// String of it, read without decoding for the host's own ids ("sb-N").
func answerKey(raw json.RawMessage) (string, bool) {
	if len(raw) > 2 && raw[0] == '"' && raw[len(raw)-1] == '"' && bytes.IndexByte(raw[1:len(raw)-1], '\\') < 0 && bytes.IndexByte(raw[1:len(raw)-1], '"') < 0 {
		return "string:" + string(raw[1:len(raw)-1]), true
	}
	var id mcp.RequestId
	if json.Unmarshal(raw, &id) != nil || id.IsNil() {
		return "", false
	}
	return id.String(), true
}

// serveRequest answers a request of the server's (sampling, elicitation,
// roots) with the client's handler, on a goroutine of its own, as mcp-go
// does.
func (c *stdioConn) serveRequest(req transport.JSONRPCRequest) {
	c.handlerMu.RLock()
	h, ctx := c.onRequest, c.ctx
	c.handlerMu.RUnlock()
	if h == nil {
		c.respond(*transport.NewJSONRPCErrorResponse(req.ID, mcp.METHOD_NOT_FOUND, "No request handler configured", nil))
		return
	}
	go func() {
		if err := ctx.Err(); err != nil {
			c.respond(*transport.NewJSONRPCErrorResponse(req.ID, mcp.INTERNAL_ERROR, err.Error(), nil))
			return
		}
		resp, err := h(ctx, req)
		switch {
		case err != nil:
			c.respond(*transport.NewJSONRPCErrorResponse(req.ID, mcp.INTERNAL_ERROR, err.Error(), nil))
		case resp != nil:
			c.respond(*resp)
		}
	}()
}

func (c *stdioConn) respond(resp transport.JSONRPCResponse) {
	b, err := json.Marshal(resp)
	if err != nil {
		c.log.Error("encoding an answer to the server", "error", err)
		return
	}
	if err := c.write(append(b, '\n')); err != nil {
		c.log.Debug("writing an answer to the server", "error", err)
	}
}

// write writes one whole message, in one write with the messages other
// goroutines write meanwhile: the first of them yields once before it
// writes, so that the others ready to run (calls answered together by the
// read loop, requests of an HTTP front's connections read together) add
// theirs, and the server reads many messages at once instead of waking
// for each. Messages go out in the order their writes began; a write
// error is the error of every message in its group (the server's input is
// gone).
func (c *stdioConn) write(msg []byte) error {
	c.wmu.Lock()
	c.wbuf = append(c.wbuf, msg...)
	if c.flushing {
		c.wmu.Unlock()
		return nil // the gathering writer takes it
	}
	c.flushing = true
	c.wmu.Unlock()
	runtime.Gosched()
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.wmu.Lock()
	group := c.wbuf
	c.wbuf, c.spare = c.spare[:0], nil
	c.flushing = false
	c.wmu.Unlock()
	_, err := c.stdin.Write(group)
	if cap(group) <= 1<<20 {
		c.wmu.Lock()
		c.spare = group[:0]
		c.wmu.Unlock()
	}
	if err != nil {
		// The messages of others in the group are lost with this one:
		// the requests among them will get no answer.
		c.failPending(fmt.Errorf("failed to write request: %w", err))
	}
	return err
}

// expect registers key's answer channel; false once the connection has
// ended.
func (c *stdioConn) expect(key string) (chan answer, bool) {
	ch := make(chan answer, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, false
	}
	c.pending[key] = ch
	return ch, true
}

// forget stops waiting for key's answer.
func (c *stdioConn) forget(key string) {
	c.mu.Lock()
	delete(c.pending, key)
	c.mu.Unlock()
}

// send writes msg, a request whose answer has key, and returns the channel
// the answer comes on (an error answer if the connection ends first) and
// forget, to run when the caller stops waiting.
func (c *stdioConn) send(key string, msg []byte) (<-chan answer, func(), error) {
	ch, ok := c.expect(key)
	if !ok {
		return nil, nil, transport.ErrTransportClosed
	}
	if err := c.write(msg); err != nil {
		c.forget(key)
		return nil, nil, fmt.Errorf("failed to write request: %w", err)
	}
	return ch, func() { c.forget(key) }, nil
}

// startCall writes a tools/call request with id (a string the host
// made, "sb-N", which needs no escaping) for tool with args (JSON), asking
// for progress under id when progress is set; see send for the rest.
func (c *stdioConn) startCall(id, tool string, args []byte, progress bool) (<-chan answer, func(), error) {
	msg := make([]byte, 0, 112+len(tool)+len(args))
	msg = append(msg, `{"jsonrpc":"2.0","id":"`...)
	msg = append(msg, id...)
	msg = append(msg, `","method":"tools/call","params":{"name":`...)
	msg = appendJSONString(msg, tool)
	msg = append(msg, `,"arguments":`...)
	switch {
	case len(args) == 0:
		msg = append(msg, "null"...)
	case !json.Valid(args):
		return nil, nil, fmt.Errorf("failed to marshal request: the arguments are not JSON")
	case bytes.ContainsAny(args, "\r\n"):
		// One message per line.
		var b bytes.Buffer
		_ = json.Compact(&b, args)
		msg = append(msg, b.Bytes()...)
	default:
		msg = append(msg, args...)
	}
	if progress {
		msg = append(msg, `,"_meta":{"progressToken":"`...)
		msg = append(msg, id...)
		msg = append(msg, `"}`...)
	}
	msg = append(msg, "}}\n"...)
	return c.send("string:"+id, msg)
}

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// SendRequest sends req and waits for its answer (mcp-go's client calls).
func (c *stdioConn) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("failed to marshal request: %w", err)
	}
	ch, forget, err := c.send(req.ID.String(), append(b, '\n'))
	if err != nil {
		return nil, err
	}
	select {
	case a := <-ch:
		if a.err != nil {
			return nil, a.err
		}
		return &transport.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: req.ID, Result: a.result, Error: a.rpcErr}, nil
	case <-ctx.Done():
		forget()
		return nil, ctx.Err()
	}
}

// SendNotification sends n.
func (c *stdioConn) SendNotification(ctx context.Context, n mcp.JSONRPCNotification) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-c.done:
		return transport.ErrTransportClosed
	default:
	}
	b, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("failed to marshal notification: %w", err)
	}
	if err := c.write(append(b, '\n')); err != nil {
		return fmt.Errorf("failed to write notification: %w", err)
	}
	return nil
}

// SetNotificationHandler sets what receives the server's notifications,
// on the read loop: it must not block.
func (c *stdioConn) SetNotificationHandler(h func(mcp.JSONRPCNotification)) {
	c.handlerMu.Lock()
	c.onNotification = h
	c.handlerMu.Unlock()
}

// SetRequestHandler sets what answers the server's requests.
func (c *stdioConn) SetRequestHandler(h transport.RequestHandler) {
	c.handlerMu.Lock()
	c.onRequest = h
	c.handlerMu.Unlock()
}

// closeDone ends the connection: requests waiting get an error answer,
// and no more are taken.
func (c *stdioConn) closeDone() {
	c.doneOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		c.failPending(transport.ErrTransportClosed)
		close(c.done)
	})
}

// failPending answers every request waiting with err.
func (c *stdioConn) failPending(err error) {
	c.mu.Lock()
	waiting := c.pending
	c.pending = map[string]chan answer{}
	c.mu.Unlock()
	for _, ch := range waiting {
		ch <- answer{err: err}
	}
}

// Close closes the server's stdin (a stdio server's cue to exit) and
// ends the read of its output. It may be called more than once.
func (c *stdioConn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		err = c.stdin.Close()
		if cerr := c.closer.Close(); err == nil {
			err = cerr
		}
	})
	c.closeDone()
	return err
}

// GetSessionId is "": stdio has no sessions.
func (c *stdioConn) GetSessionId() string { return "" }

var _ transport.BidirectionalInterface = (*stdioConn)(nil)

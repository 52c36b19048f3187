package external

import (
	"context"
	"encoding/json"
	"slices"
	"sync"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// An external server's requests to its client (sampling/createMessage,
// elicitation/create, roots/list) reach the MCP client that called it. MCP
// does not say which call a request belongs to, so it goes to the client
// of the most recent call still in progress, or, when no call is in
// progress, of the most recent call (a server may ask between calls, e.g.
// for roots after a roots/list_changed). With no call ever made, or a call
// made by no MCP client (the CLI), the server gets an error.

// The server's log messages (notifications/message) go the same way: to
// the most recent call in progress that takes log messages, through its
// toolcall.LogFunc (so they reach its session, before its result); with
// no call in progress they become Log events (Watch), which the front end
// sends to every session.

// activeCall is a call in progress that can ask its client or takes log
// messages.
type activeCall struct {
	ask protocol.ClientRequester // nil when its caller cannot be asked
	// wake is signalled when a log message waits in logs; nil when the
	// call takes no log messages.
	wake chan struct{}
	mu   sync.Mutex
	logs []toolcall.Log // at most logQueue
}

// logQueue is how many log messages of a call wait for its goroutine;
// more are dropped (the read loop must never block).
const logQueue = 64

// calling records the call in ctx as in progress; the returned function
// ends the record.
func (s *Server) calling(ctx context.Context) (*activeCall, func()) {
	c := &activeCall{ask: protocol.ClientRequesterFrom(ctx)}
	if toolcall.LogFrom(ctx) != nil {
		c.wake = make(chan struct{}, 1)
	}
	if c.ask == nil && c.wake == nil {
		return c, func() {}
	}
	s.askMu.Lock()
	s.active = append(s.active, c)
	if c.ask != nil {
		s.last = c.ask
	}
	s.askMu.Unlock()
	return c, func() {
		s.askMu.Lock()
		s.active = slices.DeleteFunc(s.active, func(x *activeCall) bool { return x == c })
		s.askMu.Unlock()
	}
}

// queueLog queues l for the call; false when too many wait.
func (c *activeCall) queueLog(l toolcall.Log) bool {
	c.mu.Lock()
	full := len(c.logs) >= logQueue
	if !full {
		c.logs = append(c.logs, l)
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default: // already signalled
	}
	return !full
}

// drainLogs hands the log messages waiting to onLog, in order.
func (c *activeCall) drainLogs(onLog toolcall.LogFunc) {
	if c.wake == nil {
		return
	}
	c.mu.Lock()
	logs := c.logs
	c.logs = nil
	c.mu.Unlock()
	for _, l := range logs {
		onLog(l)
	}
}

// requester returns the requester a request of the server goes to.
func (s *Server) requester() protocol.ClientRequester {
	s.askMu.Lock()
	defer s.askMu.Unlock()
	for i := len(s.active) - 1; i >= 0; i-- {
		if s.active[i].ask != nil {
			return s.active[i].ask
		}
	}
	return s.last
}

// logToCall hands a notifications/message to the most recent call in
// progress that takes log messages, without blocking; false when there is
// none.
func (s *Server) logToCall(n mcp.JSONRPCNotification) bool {
	s.askMu.Lock()
	var to *activeCall
	for i := len(s.active) - 1; i >= 0 && to == nil; i-- {
		if s.active[i].wake != nil {
			to = s.active[i]
		}
	}
	s.askMu.Unlock()
	if to == nil {
		return false
	}
	f := n.Params.AdditionalFields
	l := toolcall.Log{}
	l.Level, _ = f["level"].(string)
	l.Logger, _ = f["logger"].(string)
	if text, ok := f["data"].(string); ok {
		l.Message = text
	} else if raw, err := json.Marshal(f["data"]); err == nil {
		l.Fields = raw
	}
	if !to.queueLog(l) {
		s.drops.dropped(s.log, "log messages of a call dropped: too many waiting")
	}
	return true
}

// asker implements mcp-go's client handlers by forwarding.
type asker struct{ s *Server }

func (a asker) forward(ctx context.Context, method string, params, result any) error {
	r := a.s.requester()
	if r == nil {
		return protocol.Errorf(protocol.CodeUnavailable, "%s: no MCP client has called this server through Switchboard yet", method)
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	res, err := r(ctx, method, raw)
	if err != nil {
		return err
	}
	return json.Unmarshal(res, result)
}

// CreateMessage forwards sampling/createMessage.
func (a asker) CreateMessage(ctx context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	var res mcp.CreateMessageResult
	return &res, a.forward(ctx, protocol.MethodSampling, req.CreateMessageParams, &res)
}

// Elicit forwards elicitation/create.
func (a asker) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	var res mcp.ElicitationResult
	return &res, a.forward(ctx, protocol.MethodElicitation, req.Params, &res)
}

// ListRoots forwards roots/list.
func (a asker) ListRoots(ctx context.Context, _ mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	var res mcp.ListRootsResult
	return &res, a.forward(ctx, protocol.MethodRoots, struct{}{}, &res)
}

var (
	_ client.SamplingHandler    = asker{}
	_ client.ElicitationHandler = asker{}
	_ client.RootsHandler       = asker{}
)

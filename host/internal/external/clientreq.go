package external

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboard-mcp/switchboard/internal/protocol"
)

// An external server's requests to its client (sampling/createMessage,
// elicitation/create, roots/list) reach the MCP client that called it. MCP
// does not say which call a request belongs to, so it goes to the client
// of the most recent call still in progress, or, when no call is in
// progress, of the most recent call (a server may ask between calls, e.g.
// for roots after a roots/list_changed). With no call ever made, or a call
// made by no MCP client (the CLI), the server gets an error.

// callAsker is a call in progress that can ask its client.
type callAsker struct {
	ask protocol.ClientRequester
}

// calling records the call in ctx as in progress, if its caller can be
// asked; the returned function ends the record.
func (s *Server) calling(ctx context.Context) func() {
	r := protocol.ClientRequesterFrom(ctx)
	if r == nil {
		return func() {}
	}
	c := &callAsker{ask: r}
	s.askMu.Lock()
	s.active = append(s.active, c)
	s.last = r
	s.askMu.Unlock()
	return func() {
		s.askMu.Lock()
		s.active = slices.DeleteFunc(s.active, func(x *callAsker) bool { return x == c })
		s.askMu.Unlock()
	}
}

// requester returns the requester a request of the server goes to.
func (s *Server) requester() protocol.ClientRequester {
	s.askMu.Lock()
	defer s.askMu.Unlock()
	if n := len(s.active); n > 0 {
		return s.active[n-1].ask
	}
	return s.last
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

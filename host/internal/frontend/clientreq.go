package frontend

import (
	"context"
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
)

// clientRequester returns the requester of a call: a request the call's
// server makes of its client (sampling/createMessage, elicitation/create,
// roots/list) goes to the session that made the call (callCtx carries it),
// for as long as the requester's own context lasts. The session must have
// declared the capability; a client of the 2026-07-28 era has no requests
// from server to client at all. Either way the tool gets an error it can
// report.
func (f *Frontend) clientRequester(callCtx context.Context) protocol.ClientRequester {
	return func(ctx context.Context, method string, params []byte) ([]byte, error) {
		// The request may come after the call ended (an external server
		// asking between calls): keep the call's values (the session),
		// not its end.
		rctx, stop := context.WithCancel(context.WithoutCancel(callCtx))
		defer stop()
		defer context.AfterFunc(ctx, stop)()
		return f.askClient(rctx, method, params)
	}
}

// askClient sends one request to the session in ctx and returns its
// result as JSON.
func (f *Frontend) askClient(ctx context.Context, method string, params []byte) ([]byte, error) {
	session := server.ClientSessionFromContext(ctx)
	if session == nil {
		return nil, protocol.Errorf(protocol.CodeUnavailable, "%s: no MCP client session made this call", method)
	}
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		return nil, protocol.Errorf(protocol.CodeUnavailable, "%s: the client speaks MCP %s, which has no requests from server to client", method, info.ProtocolVersion)
	}
	var caps mcp.ClientCapabilities
	if s, ok := session.(server.SessionWithClientInfo); ok {
		caps = s.GetClientCapabilities()
	}
	if len(params) == 0 {
		params = []byte("{}")
	}
	var (
		res any
		err error
	)
	switch method {
	case protocol.MethodSampling:
		if caps.Sampling == nil {
			return nil, protocol.Errorf(protocol.CodeUnavailable, "%s: the client did not declare the sampling capability", method)
		}
		var req mcp.CreateMessageRequest
		if err := json.Unmarshal(params, &req.CreateMessageParams); err != nil {
			return nil, protocol.Errorf(protocol.CodeInvalidArguments, "%s: params: %v", method, err)
		}
		res, err = f.srv.RequestSampling(ctx, req)
	case protocol.MethodElicitation:
		if caps.Elicitation == nil {
			return nil, protocol.Errorf(protocol.CodeUnavailable, "%s: the client did not declare the elicitation capability", method)
		}
		var req mcp.ElicitationRequest
		if err := json.Unmarshal(params, &req.Params); err != nil {
			return nil, protocol.Errorf(protocol.CodeInvalidArguments, "%s: params: %v", method, err)
		}
		res, err = f.srv.RequestElicitation(ctx, req)
	case protocol.MethodRoots:
		if caps.Roots == nil {
			return nil, protocol.Errorf(protocol.CodeUnavailable, "%s: the client did not declare the roots capability", method)
		}
		res, err = f.srv.RequestRoots(ctx, mcp.ListRootsRequest{})
	default:
		return nil, protocol.Errorf(protocol.CodeInvalidArguments, "%s: not a request a server may make of its client", method)
	}
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "%s: %v", method, err)
	}
	return json.Marshal(res)
}

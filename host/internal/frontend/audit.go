package frontend

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
)

// auditHooks make the tools/call requests mcp-go refuses before any
// handler runs (a tool name that is not served, a request that does not
// parse) leave an audit record, like every refusal the registry makes:
// probing for tools is visible in audit.jsonl.
func (f *Frontend) auditHooks() *server.Hooks {
	h := &server.Hooks{}
	h.AddOnError(func(ctx context.Context, _ any, method mcp.MCPMethod, message any, err error) {
		if method != mcp.MethodToolsCall {
			return
		}
		var name string
		var args []byte
		if req, ok := message.(*mcp.CallToolRequest); ok && req != nil {
			name = req.Params.Name
			args = []byte(req.Params.RawArguments)
			if len(args) == 0 && req.Params.Arguments != nil {
				args, _ = json.Marshal(req.Params.Arguments)
			}
		}
		decision := "invalid"
		if errors.Is(err, server.ErrToolNotFound) {
			decision = "unknown"
		}
		f.reg.AuditRefusal(registry.WithClient(ctx, clientID(ctx)), name, args, decision, err)
	})
	return h
}

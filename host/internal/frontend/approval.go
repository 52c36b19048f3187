package frontend

import (
	"context"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
)

// The four answers a person can give when a call needs approval.
const (
	AllowOnce   = "allow_once"
	AlwaysAllow = "always_allow"
	DenyOnce    = "deny"
	AlwaysDeny  = "always_deny"
)

// approvalID names the approval in an MRTR input request.
const approvalID = "switchboard_approval"

// approvalSchema is the form the client shows.
var approvalSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"decision": map[string]any{
			"type":      "string",
			"title":     "Decision",
			"enum":      []string{AllowOnce, AlwaysAllow, DenyOnce, AlwaysDeny},
			"enumNames": []string{"Allow once", "Always allow", "Deny", "Always deny"},
		},
	},
	"required": []string{"decision"},
}

// approvalState ties an answer to the call it was asked for.
func approvalState(canonical string, args []byte) string {
	return "approve:" + canonical + ":" + sha256Hex(args)
}

// clientCanElicit reports whether the client declared elicitation, for
// this request (modern) or for its session (legacy).
func clientCanElicit(ctx context.Context) bool {
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		return info.ClientCapabilities != nil && info.ClientCapabilities.Elicitation != nil
	}
	if s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
		return s.GetClientCapabilities().Elicitation != nil
	}
	return false
}

// askResult is the input request that asks the person.
func askResult(canonical string, args []byte, e *registry.ApprovalRequiredError) *mcp.CallToolResult {
	msg := fmt.Sprintf("Switchboard: allow %s?\nIt needs approval for: %s\nArguments: %s",
		canonical, strings.Join(e.Pending, ", "), abbreviate(string(args), 300))
	return server.NewInputRequestBuilder(approvalState(canonical, args)).
		Elicit(approvalID, mcp.ElicitationParams{Message: msg, RequestedSchema: approvalSchema}).
		ToolResult()
}

// answer returns the person's decision from a retried request, or "" when
// the request carries none for this call.
func answer(req mcp.CallToolRequest, canonical string, args []byte) string {
	if req.Params.RequestState == "" || req.Params.RequestState != approvalState(canonical, args) {
		return ""
	}
	res := server.ElicitationResponse(req.Params.InputResponses, approvalID)
	if res == nil {
		return ""
	}
	if res.Action != mcp.ElicitationResponseActionAccept {
		return DenyOnce // declined or cancelled
	}
	if m, ok := res.Content.(map[string]any); ok {
		if d, ok := m["decision"].(string); ok {
			switch d {
			case AllowOnce, AlwaysAllow, DenyOnce, AlwaysDeny:
				return d
			}
		}
	}
	return DenyOnce
}

// Apply carries out a person's answer to an approval: it returns the
// context to make the call with (approved) or the refusal, and stores
// "always" answers in the policy. rules are what an "always" answer stores
// (Decision.Rules, ApprovalRequiredError.Rules): each one matches the
// approved call's pattern literally, never as a glob.
func Apply(ctx context.Context, policy *registry.Policy, canonical string, rules []string, decision string) (context.Context, error) {
	switch decision {
	case AllowOnce:
		return registry.WithApproval(ctx), nil
	case AlwaysAllow:
		if len(rules) > 0 {
			if err := policy.Remember(rules, true); err != nil {
				return nil, fmt.Errorf("%s: allowed once, but the decision could not be saved: %v", canonical, err)
			}
		}
		return registry.WithApproval(ctx), nil
	case AlwaysDeny:
		if len(rules) > 0 {
			if err := policy.Remember(rules, false); err != nil {
				return nil, fmt.Errorf("%s denied (the decision could not be saved: %v)", canonical, err)
			}
		}
		return nil, fmt.Errorf("%s denied by the user, now and from now on (%s)", canonical, strings.Join(rules, ", "))
	default:
		return nil, fmt.Errorf("%s denied by the user", canonical)
	}
}

func abbreviate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

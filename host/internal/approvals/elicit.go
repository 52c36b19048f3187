package approvals

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
)

// elicitID names the approval in an input request.
const elicitID = "switchboard_approval"

// callForm is the form a client shows for a call.
var callForm = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"decision": map[string]any{
			"type":      "string",
			"title":     "Decision",
			"enum":      []string{AllowOnce.String(), AlwaysAllow.String(), DenyOnce.String(), AlwaysDeny.String()},
			"enumNames": []string{"Allow once", "Always allow", "Deny", "Always deny"},
		},
	},
	"required": []string{"decision"},
}

// ClientCanElicit reports whether the MCP client of the request in ctx
// declared elicitation: for this request (2026-07-28 era) or for its
// session (2025-11-25 era).
func ClientCanElicit(ctx context.Context) bool {
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		return info.ClientCapabilities != nil && info.ClientCapabilities.Elicitation != nil
	}
	if s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
		return s.GetClientCapabilities().Elicitation != nil
	}
	return false
}

// Elicitation is the Asker of one MCP tools/call request. A call is asked
// about through an input request (multi round-trip: the handler returns
// it, the client answers by sending the call again with the answer;
// mcp-go bridges 2025-11-25 sessions through elicitation/create and calls
// the handler again). So Ask returns the answer the request carries for
// this very call, else an *InputRequiredError when the client can elicit,
// else ErrCannotAsk.
type Elicitation struct {
	Request mcp.CallToolRequest
}

// Ask implements Asker.
func (e Elicitation) Ask(ctx context.Context, a registry.Approval) (Answer, error) {
	if answer, ok := e.answer(a); ok {
		return answer, nil
	}
	if !ClientCanElicit(ctx) {
		return 0, ErrCannotAsk
	}
	msg := fmt.Sprintf("Switchboard: allow %s?\nIt needs approval for: %s\nArguments: %s",
		a.Tool, a.What(), abbreviate(string(a.Args), 300))
	return 0, &InputRequiredError{Result: server.NewInputRequestBuilder(state(a)).
		Elicit(elicitID, mcp.ElicitationParams{Message: msg, RequestedSchema: callForm}).
		ToolResult()}
}

// answer returns the person's answer from a retried request, if it carries
// one for this call (same tool, same arguments). A client that declined
// or cancelled the form, or sent something else, said no.
func (e Elicitation) answer(a registry.Approval) (Answer, bool) {
	p := e.Request.Params
	if p.RequestState == "" || p.RequestState != state(a) {
		return 0, false
	}
	res := server.ElicitationResponse(p.InputResponses, elicitID)
	if res == nil {
		return 0, false
	}
	if res.Action != mcp.ElicitationResponseActionAccept {
		return DenyOnce, true
	}
	if m, ok := res.Content.(map[string]any); ok {
		if s, ok := m["decision"].(string); ok {
			if answer, ok := ParseAnswer(s); ok {
				return answer, true
			}
		}
	}
	return DenyOnce, true
}

// state ties an answer to the question it answers: this tool, these
// arguments, and these pending patterns (so a yes approves exactly what
// the person was shown; if the patterns came out differently on the
// retry, the person is asked again).
func state(a registry.Approval) string {
	h := sha256.New()
	h.Write(a.Args)
	for _, p := range a.Pending {
		h.Write([]byte{0})
		h.Write([]byte(p.String()))
	}
	return "approve:" + a.Tool + ":" + hex.EncodeToString(h.Sum(nil))
}

// InputRequiredError is how Elicitation asks: the call is refused for now,
// and the front end answers the request with Result, the input request
// that asks the person.
type InputRequiredError struct {
	Result *mcp.CallToolResult
}

func (e *InputRequiredError) Error() string {
	return "approvals: the client was asked; the call runs when it sends the answer"
}

// Decisions a person can give about a pending server.
const (
	StartServer = "start"
	KeepStopped = "keep_stopped"
)

var serverForm = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"decision": map[string]any{
			"type": "string", "title": "Decision",
			"enum":      []string{StartServer, KeepStopped},
			"enumNames": []string{"Start it", "Keep it stopped"},
		},
	},
	"required": []string{"decision"},
}

// ServerQuestion is the elicitation that asks whether to start a server
// that waits for approval (a new or changed .mcp.json entry); what says
// what would run.
func ServerQuestion(name, what string) mcp.ElicitationRequest {
	return mcp.ElicitationRequest{Params: mcp.ElicitationParams{
		Message:         fmt.Sprintf("Switchboard: start the MCP server %q from .mcp.json? It was added or changed in the project; it would run:\n%s", name, what),
		RequestedSchema: serverForm,
	}}
}

// ServerApproved reports whether a person answered ServerQuestion with
// "start it".
func ServerApproved(res *mcp.ElicitationResult) bool {
	if res == nil || res.Action != mcp.ElicitationResponseActionAccept {
		return false
	}
	m, ok := res.Content.(map[string]any)
	return ok && m["decision"] == StartServer
}

func abbreviate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

var _ Asker = Elicitation{}

package frontend

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
)

// postMsg is a POSTed message as the HTTP front end's own handlers need it,
// decoded once (limitBody) for all of them: the in-flight bound, the
// session rules and the invalid-request check each decoded the body again,
// some 6 % of the host's CPU per call.
type postMsg struct {
	// ok is set when the body decoded as one JSON-RPC object.
	ok  bool
	env envelope
	// invalid says why the message is an invalid request (-32600), if it
	// is one (see invalidRequest).
	invalid string
	// metaVersion is the protocol version in params' _meta, if any.
	metaVersion string
}

func parsePost(body []byte) *postMsg {
	p := &postMsg{}
	t := bytes.TrimSpace(body)
	if len(t) > 0 && t[0] != '[' && json.Unmarshal(t, &p.env) == nil {
		p.ok = true
		if len(p.env.ID) > 0 && !validID(p.env.ID) {
			p.invalid = "the request id must be a string or an integer, got " + string(p.env.ID)
		}
		p.metaVersion = metaVersion(p.env.Params)
		return p
	}
	// A batch, or a message whose fields are not of the envelope's types:
	// the general check (which mcp-go's own answer follows otherwise).
	p.invalid, _ = invalidRequest(body)
	return p
}

type postKey struct{}

// withPost keeps the decoded message beside the request.
func withPost(r *http.Request, body []byte) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), postKey{}, parsePost(body)))
}

// postOf returns the request's decoded message (nil when it has no body).
func postOf(r *http.Request) *postMsg {
	p, _ := r.Context().Value(postKey{}).(*postMsg)
	return p
}

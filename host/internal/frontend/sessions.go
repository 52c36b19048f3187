package frontend

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// HTTP sessions, per era of the protocol:
//
//   - Up to 2025-11-25, initialize starts a session and its response
//     carries an Mcp-Session-Id; every later request (POST, GET, DELETE)
//     must carry it. A request without one gets 400, one with an ID the
//     host did not mint, or whose session was ended (by DELETE, or idle for
//     HTTPOptions.SessionIdleTTL), gets 404, which tells the client to
//     start over with initialize. A session's end also ends its open
//     requests (its GET stream, its running calls). mcp-go's default session manager mints
//     IDs but accepts any well-formed one and forgets nothing on DELETE;
//     sessionIDs and enforceSessions are the host's.
//   - From 2026-07-28 there are no sessions: requests carry their protocol
//     version (header and _meta), an Mcp-Session-Id is ignored, and GET and
//     DELETE get 405 (mcp-go does all of that).

// errUnknownSession is what sessionIDs.Validate says of an ID it does not
// hold; mcp-go answers 404.
var errUnknownSession = errors.New("frontend: unknown or ended session")

// sessionIDs mints session IDs and remembers the live ones until they are
// terminated (DELETE, or idle too long: mcp-go's sweeper terminates them).
// Ending a session ends its requests still open: its GET stream and the
// calls it has running.
type sessionIDs struct {
	mu   sync.Mutex
	live map[string]chan struct{} // closed when the session ends
}

var _ server.SessionIdManager = (*sessionIDs)(nil)

// Generate mints the ID of a new session.
func (s *sessionIDs) Generate() string {
	id := "mcp-session-" + rand.Text()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live == nil {
		s.live = map[string]chan struct{}{}
	}
	s.live[id] = make(chan struct{})
	return id
}

// Validate fails for an ID that is not live.
func (s *sessionIDs) Validate(id string) (isTerminated bool, err error) {
	if s.ended(id) == nil {
		return false, errUnknownSession
	}
	return false, nil
}

// Terminate ends session id; later requests with it get 404.
func (s *sessionIDs) Terminate(id string) (isNotAllowed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if end, ok := s.live[id]; ok {
		close(end)
		delete(s.live, id)
	}
	return false, nil
}

// ended returns the channel closed when session id ends, or nil if it is
// not live.
func (s *sessionIDs) ended(id string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if end, ok := s.live[id]; ok {
		return end
	}
	return nil
}

// envelope is what enforceSessions reads of a POSTed message.
type envelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// enforceSessions answers the session rules mcp-go leaves out (400 for a
// missing Mcp-Session-Id, 404 for an unknown one on GET and DELETE too),
// and works around mcp-go refusing a 2026-07-28 message whose _meta lacks
// the protocol version (see modernWithoutMeta). Requests of the 2026-07-28
// era pass on: they have no session.
func enforceSessions(ids *sessionIDs, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m envelope
		if r.Method == http.MethodPost && r.Body != nil {
			body, err := io.ReadAll(r.Body) // already in memory: limitBody read it
			if err != nil {
				http.Error(w, "cannot read the request body", http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			if json.Unmarshal(body, &m) != nil {
				next.ServeHTTP(w, r) // mcp-go answers a parse error
				return
			}
			if headerVersion := r.Header.Get(mcp.HeaderProtocolVersion); mcp.IsModernProtocol(headerVersion) {
				if !modernWithoutMeta(w, r, body, m, headerVersion) {
					next.ServeHTTP(w, r)
				}
				return
			}
			if mcp.IsModernProtocol(metaVersion(m.Params)) || m.Method == string(mcp.MethodInitialize) {
				next.ServeHTTP(w, r)
				return
			}
		} else if mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
			next.ServeHTTP(w, r)
			return
		}
		switch r.Method {
		case http.MethodPost, http.MethodGet, http.MethodDelete:
			id := r.Header.Get(server.HeaderKeySessionID)
			if id == "" {
				http.Error(w, "Bad Request: Mcp-Session-Id header is required (send initialize first to start a session)", http.StatusBadRequest)
				return
			}
			end := ids.ended(id)
			if end == nil {
				http.Error(w, "Not Found: no such session (it ended, or was never started): send initialize to start a new one", http.StatusNotFound)
				return
			}
			if r.Method != http.MethodDelete {
				// The request ends with its session.
				ctx, cancel := context.WithCancel(r.Context())
				defer cancel()
				go func() {
					select {
					case <-end:
						cancel()
					case <-ctx.Done():
					}
				}()
				r = r.WithContext(ctx)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// metaVersion returns the protocol version in params' _meta, if any.
func metaVersion(params json.RawMessage) string {
	var p struct {
		Meta *mcp.Meta `json:"_meta"`
	}
	if len(params) == 0 || json.Unmarshal(params, &p) != nil {
		return ""
	}
	return p.Meta.ProtocolVersion()
}

// modernWithoutMeta works around mcp-go v1.2.1 refusing (HTTP 400) every
// POST whose Mcp-Protocol-Version header is of the 2026-07-28 era and
// whose _meta does not repeat the version. Clients send messages without
// _meta in that era: the Go SDK's notifications/cancelled, ping and
// logging/setLevel; the 400 ended the Go SDK's whole session. The version
// is in the header, so:
//
//   - a notification gets it added to its _meta and goes on to mcp-go
//     (which cancels the request named by notifications/cancelled);
//   - ping, and logging/setLevel (the era sends the level in each
//     request's _meta, and has no session to keep one), get an empty
//     result here: mcp-go would answer "method not found", a 404 in this
//     era, which ends a Go SDK session too.
//
// It reports whether it answered the request itself; otherwise r is ready
// for mcp-go (its body possibly rewritten). Messages that do carry the
// version, and other requests, are left to mcp-go.
func modernWithoutMeta(w http.ResponseWriter, r *http.Request, body []byte, m envelope, headerVersion string) (answered bool) {
	if metaVersion(m.Params) != "" || m.Method == "" || m.JSONRPC != mcp.JSONRPC_VERSION {
		return false
	}
	if len(m.ID) == 0 || string(m.ID) == "null" {
		params := map[string]json.RawMessage{}
		if len(m.Params) > 0 && string(m.Params) != "null" && json.Unmarshal(m.Params, &params) != nil {
			return false
		}
		meta := map[string]json.RawMessage{}
		if raw, ok := params["_meta"]; ok && string(raw) != "null" && json.Unmarshal(raw, &meta) != nil {
			return false
		}
		meta[mcp.MetaKeyProtocolVersion], _ = json.Marshal(headerVersion)
		params["_meta"], _ = json.Marshal(meta)
		rewritten, err := json.Marshal(struct {
			JSONRPC string                     `json:"jsonrpc"`
			Method  string                     `json:"method"`
			Params  map[string]json.RawMessage `json:"params"`
		}{mcp.JSONRPC_VERSION, m.Method, params})
		if err != nil {
			return false
		}
		r.Body = io.NopCloser(bytes.NewReader(rewritten))
		r.ContentLength = int64(len(rewritten))
		return false
	}
	switch mcp.MCPMethod(m.Method) {
	case mcp.MethodPing, mcp.MethodSetLogLevel:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(append(mustJSON(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  struct{}        `json:"result"`
		}{mcp.JSONRPC_VERSION, m.ID, struct{}{}}), '\n'))
		return true
	}
	return false
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

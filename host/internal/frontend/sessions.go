package frontend

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
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
	live map[string]*liveSession // ended when the session ends
	// use is each live session's open requests and last activity, for
	// the cap: the idle session used longest ago is ended first.
	use map[string]*sessionUse
	max int // most live sessions; 0 = DefaultMaxSessions
	// owner is the authenticated caller that owns each session ("" for
	// none; see claim): a request of another caller does not find it.
	owner map[string]string
}

// claim reports whether session id belongs to caller: the caller of the
// first request that uses the session after its initialize owns it (the
// client that started it: only it has the ID). Wrapping initialize's
// response to read the ID there broke mcp-go's sessions (a client's
// declared capabilities were lost), so the first use decides.
func (s *sessionIDs) claim(id, caller string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, live := s.live[id]; !live {
		return false
	}
	if s.owner == nil {
		s.owner = map[string]string{}
	}
	owner, set := s.owner[id]
	if !set {
		s.owner[id] = caller
		return true
	}
	return owner == caller
}

type sessionUse struct {
	open     int
	lastSeen time.Time
}

// DefaultMaxSessions caps the HTTP front end's live sessions (each holds
// some 20-40 KB in the host until it ends or idles out).
const DefaultMaxSessions = 1000

var _ server.SessionIdManager = (*sessionIDs)(nil)

// Generate mints the ID of a new session.
func (s *sessionIDs) Generate() string {
	id := "mcp-session-" + rand.Text()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live == nil {
		s.live = map[string]*liveSession{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.live[id] = &liveSession{ctx, cancel}
	if s.use == nil {
		s.use = map[string]*sessionUse{}
	}
	s.use[id] = &sessionUse{lastSeen: time.Now()}
	return id
}

// count is the number of live sessions.
func (s *sessionIDs) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live)
}

// begin and end bracket a request of session id.
func (s *sessionIDs) begin(id string) {
	s.mu.Lock()
	if u := s.use[id]; u != nil {
		u.open++
		u.lastSeen = time.Now()
	}
	s.mu.Unlock()
}

func (s *sessionIDs) end(id string) {
	s.mu.Lock()
	if u := s.use[id]; u != nil {
		u.open--
		u.lastSeen = time.Now()
	}
	s.mu.Unlock()
}

// full reports whether a new session would exceed the cap, and if so the
// idle session used longest ago that may be ended to make room ("" when
// every session has a request open).
//
// For an authenticated caller ("" for none) only its own sessions may be
// ended, and it may hold at most half the cap (found from outside: a
// read-only caller's 1,100 initializes ended every other caller's
// sessions).
func (s *sessionIDs) full(caller string) (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	limit := s.max
	if limit <= 0 {
		limit = DefaultMaxSessions
	}
	mine := 0
	if caller != "" {
		for _, o := range s.owner {
			if o == caller {
				mine++
			}
		}
	}
	if len(s.live) < limit && (caller == "" || mine < max(1, limit/2)) {
		return false, ""
	}
	victim, oldest := "", time.Time{}
	for id, u := range s.use {
		if u.open == 0 && (caller == "" || s.owner[id] == caller) && (victim == "" || u.lastSeen.Before(oldest)) {
			victim, oldest = id, u.lastSeen
		}
	}
	return true, victim
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
	if l, ok := s.live[id]; ok {
		l.end()
		delete(s.live, id)
	}
	delete(s.use, id)
	delete(s.owner, id)
	return false, nil
}

// ended returns the context that ends when session id ends, or nil if it
// is not live.
func (s *sessionIDs) ended(id string) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.live[id]; ok {
		return l.ctx
	}
	return nil
}

// liveSession is a session that has not ended: ctx ends with it.
type liveSession struct {
	ctx context.Context
	end context.CancelFunc
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
		if p := postOf(r); r.Method == http.MethodPost && p != nil { // limitBody decoded it
			if p.invalid != "" {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write(append(mustJSON(mcp.NewJSONRPCError(mcp.NewRequestId(nil), mcp.INVALID_REQUEST, p.invalid, nil)), '\n'))
				return
			}
			if !p.ok {
				next.ServeHTTP(w, r) // mcp-go answers a parse error
				return
			}
			m := p.env
			if headerVersion := r.Header.Get(mcp.HeaderProtocolVersion); mcp.IsModernProtocol(headerVersion) {
				if !modernWithoutMeta(w, r, p, headerVersion) {
					next.ServeHTTP(w, r)
				}
				return
			}
			if m.Method == string(mcp.MethodInitialize) && !mcp.IsModernProtocol(p.metaVersion) {
				if full, victim := ids.full(registry.CallerName(r.Context())); full {
					if victim == "" {
						http.Error(w, fmt.Sprintf("Service Unavailable: this host has %d sessions open, the most it keeps (--max-sessions), and all are busy; end one (DELETE) or try again later", ids.count()), http.StatusServiceUnavailable)
						return
					}
					// Make room: end the idle session used longest ago,
					// as its own DELETE would (mcp-go drops its state).
					evict(next, r, victim)
				}
			}
			if mcp.IsModernProtocol(p.metaVersion) {
				next.ServeHTTP(w, r)
				return
			}
			if m.Method == string(mcp.MethodInitialize) {
				next.ServeHTTP(w, r)
				// The session is its initializer's from the start, so that
				// its count and evictions are that caller's own (the
				// header is read after mcp-go answered, not wrapped).
				if caller := registry.CallerName(r.Context()); caller != "" {
					if id := w.Header().Get(server.HeaderKeySessionID); id != "" {
						ids.claim(id, caller)
					}
				}
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
			if end == nil || !ids.claim(id, registry.CallerName(r.Context())) {
				http.Error(w, "Not Found: no such session (it ended, or was never started): send initialize to start a new one", http.StatusNotFound)
				return
			}
			ids.begin(id)
			defer ids.end(id)
			if r.Method != http.MethodDelete {
				// The request ends with its session (without a goroutine
				// per request waiting for either).
				ctx, cancel := context.WithCancel(r.Context())
				defer cancel()
				defer context.AfterFunc(end, cancel)()
				r = r.WithContext(ctx)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// evict ends session id through mcp-go's own DELETE handling, so that its
// state goes too.
func evict(next http.Handler, r *http.Request, id string) {
	// Served in process by next, never sent anywhere.
	del, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), http.MethodDelete, r.URL.String(), nil) //nolint:gosec // G704: not an outgoing request
	if err != nil {
		return
	}
	del.Host = r.Host // mcp-go checks it (DNS rebinding)
	del.Header.Set(server.HeaderKeySessionID, id)
	del.Header.Set(mcp.HeaderProtocolVersion, "2025-11-25")
	next.ServeHTTP(discardResponse{header: http.Header{}}, del)
}

// discardResponse is a ResponseWriter whose writes go nowhere.
type discardResponse struct{ header http.Header }

func (d discardResponse) Header() http.Header         { return d.header }
func (d discardResponse) Write(b []byte) (int, error) { return len(b), nil }
func (d discardResponse) WriteHeader(int)             {}

// metaVersion returns the protocol version in params' _meta, if any.
// mayHoldMeta reports whether params could have a _meta key as
// encoding/json matches one (mcp-go decodes _meta with it): the key
// spelled in any case, or with \u escapes, the only escapes '_' and
// letters can have (and no other character folds to m, e, t or a). A
// call without _meta (most before the 2026-07-28 era) is then not decoded
// a second time.
func mayHoldMeta(params []byte) bool {
	if bytes.Contains(params, []byte(`\u`)) {
		return true
	}
	for rest := params; ; {
		i := bytes.IndexByte(rest, '_')
		if i < 0 {
			return false
		}
		if rest = rest[i+1:]; len(rest) >= 4 && bytes.EqualFold(rest[:4], []byte("meta")) {
			return true
		}
	}
}

func metaVersion(params json.RawMessage) string {
	// The one key, as mcp.Meta.ProtocolVersion reads it, without decoding
	// the rest of _meta into maps (a few per cent of the HTTP host's CPU
	// per call).
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if len(params) == 0 || !mayHoldMeta(params) {
		return ""
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	var v string
	if raw, ok := p.Meta[mcp.MetaKeyProtocolVersion]; !ok || json.Unmarshal(raw, &v) != nil {
		return ""
	}
	return v
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
func modernWithoutMeta(w http.ResponseWriter, r *http.Request, p *postMsg, headerVersion string) (answered bool) {
	m := p.env
	if p.metaVersion != "" || m.Method == "" || m.JSONRPC != mcp.JSONRPC_VERSION {
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

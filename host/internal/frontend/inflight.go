package frontend

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// DefaultMaxInFlightHTTP is how many requests one HTTP session may have
// unanswered at once, as many as a stdio client (MaxInFlight).
const DefaultMaxInFlightHTTP = MaxInFlight

// DefaultMaxInFlightTotal is how many requests all HTTP clients together
// may have unanswered at once.
const DefaultMaxInFlightTotal = 1024

// CodeTooManyInFlight is the JSON-RPC error code of a request refused
// because too many are in flight (in the range JSON-RPC leaves to
// servers).
const CodeTooManyInFlight = -32001

// inFlight counts the HTTP requests being answered, per session and in
// all. Over stdio the host stops reading when a client has too many in
// flight (backpressure); HTTP has no such brake, since each request is a
// connection of its own, so a request past a bound is refused at once: 429
// Too Many Requests with Retry-After, and a JSON-RPC error for the request's
// id that says which bound and what to do.
//
// Only requests count: notifications and the client's responses (to a
// sampling or elicitation request a call is waiting on) always pass, so
// calls at the bound can still finish. initialize passes too: the session
// cap bounds new sessions, and mcp-go's client takes any 4xx to
// initialize for an older transport.
type inFlight struct {
	perSession, total int

	mu        sync.Mutex
	n         int
	bySession map[string]int

	// Open GET streams (server-to-client event streams), bounded apart
	// from requests: each holds a connection, a goroutine and buffers for
	// as long as the client keeps it.
	streams          int
	streamsBySession map[string]int
}

// Bounds of the GET event streams: a session may keep a few open (the
// spec lets a client hold more than one), the host at most
// MaxStreamsTotal.
const (
	MaxStreamsPerSession = 4
	MaxStreamsTotal      = 1024
)

// acquireStream takes a GET stream's place, or says why not.
func (l *inFlight) acquireStream(session string) (refusal string, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.streamsBySession[session] >= MaxStreamsPerSession {
		return fmt.Sprintf("this session has %d event streams (GET) open, the most the host keeps for one session; close one first", MaxStreamsPerSession), false
	}
	if l.streams >= MaxStreamsTotal {
		return fmt.Sprintf("the host has %d event streams (GET) open, the most it keeps; retry later", MaxStreamsTotal), false
	}
	l.streams++
	l.streamsBySession[session]++
	return "", true
}

func (l *inFlight) releaseStream(session string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.streams--
	if l.streamsBySession[session]--; l.streamsBySession[session] <= 0 {
		delete(l.streamsBySession, session)
	}
}

func newInFlight(perSession, total int) *inFlight {
	if perSession <= 0 {
		perSession = DefaultMaxInFlightHTTP
	}
	if total <= 0 {
		total = DefaultMaxInFlightTotal
	}
	return &inFlight{perSession: perSession, total: total, bySession: map[string]int{}, streamsBySession: map[string]int{}}
}

// acquire takes a place for a request of session ("" for a request without
// one), or says why there is none.
func (l *inFlight) acquire(session string) (refusal string, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if session != "" && l.bySession[session] >= l.perSession {
		return fmt.Sprintf("this session has %d requests in flight, the most the host takes from one session (--max-inflight); wait for an answer before sending more", l.perSession), false
	}
	if l.n >= l.total {
		return fmt.Sprintf("the host has %d requests in flight over HTTP, the most it takes at once (--max-inflight-total); retry when one is answered", l.total), false
	}
	l.n++
	if session != "" {
		l.bySession[session]++
	}
	return "", true
}

func (l *inFlight) release(session string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n--
	if session != "" {
		if l.bySession[session]--; l.bySession[session] <= 0 {
			delete(l.bySession, session)
		}
	}
}

// limitInFlight applies l to the POSTed requests (bodies are in memory
// already: limitBody read them).
func limitInFlight(l *inFlight, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			session := r.Header.Get(server.HeaderKeySessionID)
			why, ok := l.acquireStream(session)
			if !ok {
				w.Header().Set("Retry-After", strconv.Itoa(5))
				http.Error(w, "Too many event streams: "+why, http.StatusTooManyRequests)
				return
			}
			defer l.releaseStream(session)
			next.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		p := postOf(r) // limitBody decoded it
		if p == nil || !p.ok {
			next.ServeHTTP(w, r)
			return
		}
		m := p.env
		if m.Method == "" || m.Method == string(mcp.MethodInitialize) || len(m.ID) == 0 || string(m.ID) == "null" {
			next.ServeHTTP(w, r)
			return
		}
		session := r.Header.Get(server.HeaderKeySessionID)
		if mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
			session = "" // that era has no sessions: the total bounds it
		}
		why, ok := l.acquire(session)
		if !ok {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", strconv.Itoa(1))
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write(append(mustJSON(mcp.NewJSONRPCError(mcp.NewRequestId(rawID(m.ID)), CodeTooManyInFlight, "Too many requests: "+why, nil)), '\n'))
			return
		}
		defer l.release(session)
		next.ServeHTTP(w, r)
	})
}

// rawID turns a request's id back into a value for the error.
func rawID(id json.RawMessage) any {
	d := json.NewDecoder(bytes.NewReader(id))
	d.UseNumber() // an integer id stays exact
	var v any
	if d.Decode(&v) != nil {
		return nil
	}
	return v
}

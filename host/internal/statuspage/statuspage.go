// Package statuspage serves a small live page about a running host: its
// servers (state, sandbox, tools), the recent calls with their outcome and
// duration, the refusals with the rule that made them, and what waits for
// a person's approval. The page is one self-contained HTML document (no
// external assets, so it works offline) that follows the host through
// server-sent events.
package statuspage

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
)

// Path is where the page is served; Path+"/events" streams its updates.
const Path = "/status"

// Call is one finished call, as the page shows it.
type Call struct {
	Time       time.Time `json:"time"`
	Client     string    `json:"client"`
	Tool       string    `json:"tool"`
	Decision   string    `json:"decision"`
	Rule       string    `json:"rule,omitempty"`
	Outcome    string    `json:"outcome"`
	DurationMS float64   `json:"duration_ms"`
	Error      string    `json:"error,omitempty"`
}

// Snapshot is everything the page shows.
type Snapshot struct {
	Host     string    `json:"host"`
	Time     time.Time `json:"time"`
	Servers  any       `json:"servers"`
	Calls    []Call    `json:"calls"`
	Refusals []Call    `json:"refusals"`
	// Waiting are servers waiting for a person (a changed tool surface,
	// a .mcp.json server to approve): name and why.
	Waiting []string `json:"waiting,omitempty"`
	Notices []string `json:"notices,omitempty"`
}

// keep is how many calls and refusals the page remembers.
const keep = 50

// Recorder remembers the recent calls of a registry (it is a
// registry.CallObserver) and tells the page's followers when one ends.
type Recorder struct {
	mu       sync.Mutex
	calls    ring
	refusals ring
	subs     map[chan struct{}]struct{}
}

// ring keeps the last keep calls.
type ring struct {
	items [keep]Call
	n     int // calls ever added
}

func (r *ring) add(c Call) { r.items[r.n%keep] = c; r.n++ }

// newestFirst returns the kept calls, newest first.
func (r *ring) newestFirst() []Call {
	out := make([]Call, 0, min(r.n, keep))
	for i := r.n - 1; i >= 0 && i >= r.n-keep; i-- {
		out = append(out, r.items[i%keep])
	}
	return out
}

// NewRecorder returns a recorder added to r's call observers.
func NewRecorder(r *registry.Registry) *Recorder {
	rec := &Recorder{subs: map[chan struct{}]struct{}{}}
	r.AddObserver(rec)
	return rec
}

// CallStarted implements registry.CallObserver.
func (*Recorder) CallStarted(string, string) {}

// CallEnded implements registry.CallObserver.
func (r *Recorder) CallEnded(_, _ string, a *registry.AuditRecord, _ time.Duration) {
	c := Call{Time: a.Time, Client: a.Client, Tool: a.Tool, Decision: a.Decision, Rule: a.Rule, Outcome: a.Outcome, DurationMS: a.DurationMS, Error: cut(a.Error, 300)}
	if c.Time.IsZero() {
		c.Time = time.Now().UTC()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls.add(c)
	if a.Outcome == "refused" {
		r.refusals.add(c)
	}
	for ch := range r.subs {
		select {
		case ch <- struct{}{}:
		default: // an update is already due
		}
	}
}

// Recent returns the recent calls and refusals, newest first.
func (r *Recorder) Recent() (calls, refusals []Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls.newestFirst(), r.refusals.newestFirst()
}

// subscribe returns a channel that gets a value after calls end.
func (r *Recorder) subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	r.mu.Lock()
	r.subs[ch] = struct{}{}
	r.mu.Unlock()
	return ch, func() {
		r.mu.Lock()
		delete(r.subs, ch)
		r.mu.Unlock()
	}
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Source gives the page its snapshots: Snapshot builds one, Changed (may
// be nil) signals that one is due; the page also refreshes every
// interval.
type Source struct {
	Snapshot func() (Snapshot, error)
	Changed  func() (<-chan struct{}, func())
	Interval time.Duration
}

// InProcess is the source of a page served by the host itself.
func InProcess(rec *Recorder, host string, servers func() any, waiting, notices func() []string) Source {
	return Source{
		Snapshot: func() (Snapshot, error) {
			calls, refusals := rec.Recent()
			s := Snapshot{Host: host, Time: time.Now().UTC(), Servers: servers(), Calls: calls, Refusals: refusals}
			if waiting != nil {
				s.Waiting = waiting()
			}
			if notices != nil {
				s.Notices = notices()
			}
			return s, nil
		},
		Changed:  rec.subscribe,
		Interval: 2 * time.Second,
	}
}

//go:embed page.html
var page []byte

// Handler serves the page at Path and its updates at Path+"/events".
func Handler(src Source) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Path, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:")
		w.Header().Set("X-Frame-Options", "DENY")
		_, _ = w.Write(page)
	})
	mux.HandleFunc("GET "+Path+"/snapshot", func(w http.ResponseWriter, _ *http.Request) {
		s, err := src.Snapshot()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s)
	})
	mux.HandleFunc("GET "+Path+"/events", func(w http.ResponseWriter, r *http.Request) {
		flusher, ok := w.(http.Flusher)
		if !ok {
			http.Error(w, "streaming unsupported", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-store")
		var changed <-chan struct{}
		if src.Changed != nil {
			var stop func()
			changed, stop = src.Changed()
			defer stop()
		}
		interval := src.Interval
		if interval <= 0 {
			interval = 2 * time.Second
		}
		tick := time.NewTicker(interval)
		defer tick.Stop()
		var last []byte
		send := func() bool {
			s, err := src.Snapshot()
			if err != nil {
				_, err = fmt.Fprintf(w, "event: error\ndata: %q\n\n", err.Error())
				flusher.Flush()
				return err == nil
			}
			b, _ := json.Marshal(s)
			if last != nil && jsonSameButTime(last, b) {
				return true
			}
			last = b
			if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
				return false
			}
			flusher.Flush()
			return true
		}
		if !send() {
			return
		}
		for {
			select {
			case <-r.Context().Done():
				return
			case <-changed:
				// Calls that end together make one update.
				time.Sleep(50 * time.Millisecond)
				if !send() {
					return
				}
			case <-tick.C:
				if !send() {
					return
				}
			}
		}
	})
	return mux
}

// jsonSameButTime reports whether two snapshots differ only in their time
// (nothing new to send).
func jsonSameButTime(a, b []byte) bool {
	var x, y map[string]json.RawMessage
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	delete(x, "time")
	delete(y, "time")
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}

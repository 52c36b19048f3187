// Package control lets the CLI talk to running hosts. Each `switchboard
// serve` listens on a Unix socket (mode 0600) named after its pid in the
// data directory's control folder, speaking a small JSON API over HTTP:
//
//	GET  /v1/status          the servers and their states, and the host's own figures
//	POST /v1/restart?name=N  a fresh start of one server, no backoff wait
//	POST /v1/reload          re-read the config file and apply the changes
//	POST /v1/external        connect an external MCP server (JSON body)
//	DELETE /v1/external?name=N  disconnect one
//	GET  /v1/logs?name=N[&since=RFC3339][&follow=1]  a server's recent log
//	                         lines, as JSON lines (streamed with follow)
//
// Only the host's user, from the host's own PID namespace and not from a
// plugin, is served (see Guard); every request, served or refused, is
// reported for the audit log.
//
// Several hosts may run on one config (each MCP client starts its own);
// the client side talks to every live one and removes sockets left by
// hosts that died.
package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/host/internal/logbook"
)

// Dir is the folder of control sockets in a data directory.
func Dir(dataDir string) string { return filepath.Join(dataDir, "control") }

// Handler is what a host offers over its socket.
type Handler interface {
	// Status returns a JSON-encodable description of the servers.
	Status() any
	Restart(name string) (string, error)
	// Reload returns a JSON-encodable summary, or an error whose text is
	// shown to the user (diagnostics for an invalid config).
	Reload(ctx context.Context) (any, error)
	Connect(ctx context.Context, spec ExternalSpec) error
	Disconnect(ctx context.Context, name string) error
}

// Noticer is an optional upgrade of a Handler whose status carries
// notices for a person (a changed config waiting for `switchboard
// reload`); GET /v1/status returns them as "notices".
type Noticer interface {
	Notices() []string
}

// LogReader is an optional upgrade of a Handler that keeps each server's
// recent log lines (GET /v1/logs).
type LogReader interface {
	// FollowLogs returns the server's kept lines at or after since and,
	// when follow is set, a channel of the lines that arrive until stop is
	// called. An unknown name is an error that lists the servers.
	FollowLogs(name string, since time.Time, follow bool) (past []logbook.Line, next <-chan logbook.Line, stop func(), err error)
}

// Activity is an optional upgrade of a Handler that describes what the
// host is doing for its status page (GET /v1/activity).
type Activity interface {
	Activity() (any, error)
}

// HostStats are the host process's own figures, the "host" section of
// GET /v1/status: what to watch for leaks (`make chaos` compares them
// before and after its faults).
type HostStats struct {
	// Goroutines is the number of goroutines the host runs.
	Goroutines int `json:"goroutines"`
	// HeapBytes is the memory held by live and not yet collected Go
	// objects (the process's RSS is in /proc).
	HeapBytes uint64 `json:"heap_bytes"`
}

// Stats reads this process's HostStats.
func Stats() HostStats {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	st := HostStats{Goroutines: runtime.NumGoroutine()}
	if sample[0].Value.Kind() == metrics.KindUint64 {
		st.HeapBytes = sample[0].Value.Uint64()
	}
	return st
}

// ExternalSpec is the body of POST /v1/external.
type ExternalSpec struct {
	Name    string            `json:"name"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// Event is one control action, served or refused, for the audit log.
type Event struct {
	// Action is status, restart, reload, connect or disconnect (or the
	// request's method and path, for anything else).
	Action string
	// Target is the server named, if any.
	Target string
	// Detail says what connect would start: the command line or the URL
	// (header and environment values are left out: they may be secrets).
	Detail string
	Peer   Peer
	// Outcome is ok, error or refused (the peer was not served).
	Outcome string
	Error   string
}

// Options configure a control socket.
type Options struct {
	// Guard decides which peers are served. Listen refuses to start
	// without one.
	Guard *Guard
	// Audit receives every request, served or refused, after it is
	// answered. It may be nil.
	Audit func(Event)
}

// Server is a host's control socket.
type Server struct {
	path string
	ln   net.Listener
	http *http.Server
	done chan struct{}
	// stop ends the requests that stream (logs --follow) on Close.
	stop context.CancelFunc
}

// Listen opens this process's socket under dataDir and serves h until
// Close. Every request comes from a peer the guard accepted (others get
// 403 and nothing else), and every request is reported to opts.Audit.
func Listen(dataDir string, h Handler, opts Options) (*Server, error) {
	if opts.Guard == nil {
		return nil, errors.New("control: no guard: the socket would serve any process of this user")
	}
	dir := Dir(dataDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	path := filepath.Join(dir, strconv.Itoa(os.Getpid())+".sock")
	if len(path) > 100 {
		return nil, fmt.Errorf("control: socket path %s is longer than Unix sockets allow; use a shorter data_dir", path)
	}
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control: %w", err)
	}
	audit := opts.Audit
	if audit == nil {
		audit = func(Event) {}
	}
	// handle serves one action: fn returns the status code and reply, and
	// fills in the event's target and detail.
	handle := func(action string, fn func(r *http.Request, ev *Event) (int, any)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			info := peerOf(r.Context())
			ev := Event{Action: action, Peer: info.peer}
			if info.err != nil {
				ev.Outcome, ev.Error = "refused", info.err.Error()
				reply(w, http.StatusForbidden, map[string]any{"error": info.err.Error()})
				audit(ev)
				return
			}
			code, body := fn(r, &ev)
			ev.Outcome = "ok"
			if code != http.StatusOK {
				ev.Outcome = "error"
				if m, ok := body.(map[string]any); ok {
					ev.Error, _ = m["error"].(string)
				}
			}
			reply(w, code, body)
			audit(ev)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /v1/status", handle("status", func(*http.Request, *Event) (int, any) {
		body := map[string]any{"pid": os.Getpid(), "host": Stats(), "servers": h.Status()}
		if n, ok := h.(Noticer); ok {
			if notes := n.Notices(); len(notes) > 0 {
				body["notices"] = notes
			}
		}
		return http.StatusOK, body
	}))
	mux.Handle("POST /v1/restart", handle("restart", func(r *http.Request, ev *Event) (int, any) {
		ev.Target = r.URL.Query().Get("name")
		msg, err := h.Restart(ev.Target)
		if err != nil {
			return http.StatusNotFound, map[string]any{"error": err.Error()}
		}
		return http.StatusOK, map[string]any{"pid": os.Getpid(), "restarting": ev.Target, "message": msg}
	}))
	mux.Handle("POST /v1/reload", handle("reload", func(r *http.Request, _ *Event) (int, any) {
		res, err := h.Reload(r.Context())
		if err != nil {
			return http.StatusUnprocessableEntity, map[string]any{"error": err.Error()}
		}
		return http.StatusOK, map[string]any{"pid": os.Getpid(), "result": res}
	}))
	mux.Handle("POST /v1/external", handle("connect", func(r *http.Request, ev *Event) (int, any) {
		var spec ExternalSpec
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&spec); err != nil {
			return http.StatusBadRequest, map[string]any{"error": "bad request: " + err.Error()}
		}
		ev.Target, ev.Detail = spec.Name, spec.describe()
		if err := h.Connect(r.Context(), spec); err != nil {
			return http.StatusUnprocessableEntity, map[string]any{"error": err.Error()}
		}
		return http.StatusOK, map[string]any{"pid": os.Getpid(), "connected": spec.Name}
	}))
	mux.Handle("DELETE /v1/external", handle("disconnect", func(r *http.Request, ev *Event) (int, any) {
		ev.Target = r.URL.Query().Get("name")
		if err := h.Disconnect(r.Context(), ev.Target); err != nil {
			return http.StatusNotFound, map[string]any{"error": err.Error()}
		}
		return http.StatusOK, map[string]any{"pid": os.Getpid(), "disconnected": ev.Target}
	}))
	mux.Handle("GET /v1/activity", handle("activity", func(*http.Request, *Event) (int, any) {
		a, ok := h.(Activity)
		if !ok {
			return http.StatusNotFound, map[string]any{"error": "this host keeps no activity"}
		}
		v, err := a.Activity()
		if err != nil {
			return http.StatusServiceUnavailable, map[string]any{"error": err.Error()}
		}
		return http.StatusOK, v
	}))
	mux.HandleFunc("GET /v1/logs", func(w http.ResponseWriter, r *http.Request) {
		info := peerOf(r.Context())
		q := r.URL.Query()
		ev := Event{Action: "logs", Target: q.Get("name"), Peer: info.peer, Outcome: "ok"}
		defer func() { audit(ev) }()
		if info.err != nil {
			ev.Outcome, ev.Error = "refused", info.err.Error()
			reply(w, http.StatusForbidden, map[string]any{"error": info.err.Error()})
			return
		}
		lr, ok := h.(LogReader)
		if !ok {
			ev.Outcome, ev.Error = "error", "this host keeps no logs"
			reply(w, http.StatusNotFound, map[string]any{"error": ev.Error})
			return
		}
		var since time.Time
		if v := q.Get("since"); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				ev.Outcome, ev.Error = "error", "since: "+err.Error()
				reply(w, http.StatusBadRequest, map[string]any{"error": ev.Error})
				return
			}
			since = t
		}
		follow := q.Get("follow") == "1"
		past, next, stop, err := lr.FollowLogs(ev.Target, since, follow)
		if err != nil {
			ev.Outcome, ev.Error = "error", err.Error()
			reply(w, http.StatusNotFound, map[string]any{"error": err.Error()})
			return
		}
		defer stop()
		w.Header().Set("Content-Type", "application/jsonl")
		w.WriteHeader(http.StatusOK)
		enc := json.NewEncoder(w)
		for _, l := range past {
			_ = enc.Encode(l)
		}
		if !follow {
			return
		}
		flusher, _ := w.(http.Flusher)
		for {
			if flusher != nil {
				flusher.Flush()
			}
			select {
			case <-r.Context().Done():
				return
			case l := <-next:
				if enc.Encode(l) != nil {
					return
				}
			}
		}
	})
	root := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			handle(r.Method+" "+r.URL.Path, func(*http.Request, *Event) (int, any) {
				return http.StatusNotFound, map[string]any{"error": "no such control action"}
			})(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
	base, stop := context.WithCancel(context.Background())
	s := &Server{path: path, ln: ln, done: make(chan struct{}), stop: stop, http: &http.Server{
		Handler: root, ReadHeaderTimeout: 5 * time.Second,
		ConnContext: connContext(opts.Guard),
		BaseContext: func(net.Listener) context.Context { return base },
	}}
	go func() {
		defer close(s.done)
		_ = s.http.Serve(ln)
	}()
	return s, nil
}

// describe is what connect would start, without secrets.
func (s ExternalSpec) describe() string {
	if s.URL != "" {
		return s.URL
	}
	return strings.Join(append([]string{s.Command}, s.Args...), " ")
}

// Path is the socket's path.
func (s *Server) Path() string { return s.path }

// Close stops serving and removes the socket.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s.stop()
	err := s.http.Shutdown(ctx)
	<-s.done
	_ = os.Remove(s.path)
	return err
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// ErrNoHost means no running host was found for the data directory.
var ErrNoHost = errors.New("control: no running switchboard serve")

// Reply is one host's answer.
type Reply struct {
	Socket string
	Code   int
	Body   json.RawMessage
}

// Call sends a request to every live host under dataDir; body, if not
// nil, is sent as JSON.
func Call(ctx context.Context, dataDir, method, path string, body ...any) ([]Reply, error) {
	var payload []byte
	if len(body) > 0 {
		var err error
		if payload, err = json.Marshal(body[0]); err != nil {
			return nil, err
		}
	}
	socks, _ := filepath.Glob(filepath.Join(Dir(dataDir), "*.sock"))
	slices.Sort(socks)
	var out []Reply
	for _, sock := range socks {
		c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}, Timeout: time.Minute}
		req, err := http.NewRequestWithContext(ctx, method, "http://switchboard"+path, bytes.NewReader(payload))
		if err != nil {
			return nil, err
		}
		resp, err := c.Do(req)
		c.CloseIdleConnections()
		if err != nil {
			if isGone(err) {
				_ = os.Remove(sock) // left by a host that died
			}
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			continue
		}
		out = append(out, Reply{Socket: sock, Code: resp.StatusCode, Body: body})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w for this config (no live socket in %s); start one with `switchboard serve`", ErrNoHost, Dir(dataDir))
	}
	return out, nil
}

// Stream sends a GET to every live host under dataDir and calls line for
// each line of each answer as it arrives (answers that are not 200 are
// passed whole), until every answer ends or ctx is done. It returns
// ErrNoHost when no host answered.
func Stream(ctx context.Context, dataDir, path string, line func(socket string, code int, b []byte)) error {
	socks, _ := filepath.Glob(filepath.Join(Dir(dataDir), "*.sock"))
	slices.Sort(socks)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		answered int
	)
	for _, sock := range socks {
		c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://switchboard"+path, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			if isGone(err) {
				_ = os.Remove(sock)
			}
			continue
		}
		answered++
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.CloseIdleConnections()
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				mu.Lock()
				line(sock, resp.StatusCode, sc.Bytes())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if answered == 0 {
		return fmt.Errorf("%w for this config (no live socket in %s); start one with `switchboard serve`", ErrNoHost, Dir(dataDir))
	}
	return nil
}

func isGone(err error) bool {
	s := err.Error()
	return strings.Contains(s, "connection refused") || strings.Contains(s, "no such file")
}

// Package control lets the CLI talk to running hosts. Each `switchboard
// serve` listens on a Unix socket (mode 0600) named after its pid in the
// data directory's control folder, speaking a small JSON API over HTTP:
//
//	GET  /v1/status          the servers and their states
//	POST /v1/restart?name=N  a fresh start of one server, no backoff wait
//	POST /v1/reload          re-read the config file and apply the changes
//	POST /v1/external        connect an external MCP server (JSON body)
//	DELETE /v1/external?name=N  disconnect one
//
// Several hosts may run on one config (each MCP client starts its own);
// the client side talks to every live one and removes sockets left by
// hosts that died.
package control

import (
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
	"slices"
	"strconv"
	"strings"
	"time"
)

// Dir is the folder of control sockets in a data directory.
func Dir(dataDir string) string { return filepath.Join(dataDir, "control") }

// Handler is what a host offers over its socket.
type Handler interface {
	// Status returns a JSON-encodable description of the servers.
	Status() any
	Restart(name string) error
	// Reload returns a JSON-encodable summary, or an error whose text is
	// shown to the user (diagnostics for an invalid config).
	Reload(ctx context.Context) (any, error)
	Connect(ctx context.Context, spec ExternalSpec) error
	Disconnect(ctx context.Context, name string) error
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

// Server is a host's control socket.
type Server struct {
	path string
	ln   net.Listener
	http *http.Server
	done chan struct{}
}

// Listen opens this process's socket under dataDir and serves h until
// Close.
func Listen(dataDir string, h Handler) (*Server, error) {
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
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, _ *http.Request) {
		reply(w, http.StatusOK, map[string]any{"pid": os.Getpid(), "servers": h.Status()})
	})
	mux.HandleFunc("POST /v1/restart", func(w http.ResponseWriter, r *http.Request) {
		if err := h.Restart(r.URL.Query().Get("name")); err != nil {
			reply(w, http.StatusNotFound, map[string]any{"error": err.Error()})
			return
		}
		reply(w, http.StatusOK, map[string]any{"pid": os.Getpid(), "restarting": r.URL.Query().Get("name")})
	})
	mux.HandleFunc("POST /v1/reload", func(w http.ResponseWriter, r *http.Request) {
		res, err := h.Reload(r.Context())
		if err != nil {
			reply(w, http.StatusUnprocessableEntity, map[string]any{"error": err.Error()})
			return
		}
		reply(w, http.StatusOK, map[string]any{"pid": os.Getpid(), "result": res})
	})
	mux.HandleFunc("POST /v1/external", func(w http.ResponseWriter, r *http.Request) {
		var spec ExternalSpec
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&spec); err != nil {
			reply(w, http.StatusBadRequest, map[string]any{"error": "bad request: " + err.Error()})
			return
		}
		if err := h.Connect(r.Context(), spec); err != nil {
			reply(w, http.StatusUnprocessableEntity, map[string]any{"error": err.Error()})
			return
		}
		reply(w, http.StatusOK, map[string]any{"pid": os.Getpid(), "connected": spec.Name})
	})
	mux.HandleFunc("DELETE /v1/external", func(w http.ResponseWriter, r *http.Request) {
		if err := h.Disconnect(r.Context(), r.URL.Query().Get("name")); err != nil {
			reply(w, http.StatusNotFound, map[string]any{"error": err.Error()})
			return
		}
		reply(w, http.StatusOK, map[string]any{"pid": os.Getpid(), "disconnected": r.URL.Query().Get("name")})
	})
	s := &Server{path: path, ln: ln, http: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = s.http.Serve(ln)
	}()
	return s, nil
}

// Path is the socket's path.
func (s *Server) Path() string { return s.path }

// Close stops serving and removes the socket.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
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

func isGone(err error) bool {
	s := err.Error()
	return strings.Contains(s, "connection refused") || strings.Contains(s, "no such file")
}

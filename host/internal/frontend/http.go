package frontend

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/switchboard-mcp/switchboard/host/internal/auth"
)

// HTTPOptions configure the streamable HTTP front end.
type HTTPOptions struct {
	// AllowRemote permits listening on a non-loopback address without
	// authentication: only do this behind something that provides it.
	AllowRemote bool
	// Auth, when set, checks every request's bearer token once a token
	// or issuer is configured (auth.Verifier.Enabled), serves the
	// protected resource metadata, and permits non-loopback listening.
	Auth *auth.Verifier
	// TLS, when set, serves HTTPS (with ClientCAs and ClientAuth set:
	// mTLS).
	TLS *tls.Config
	// ShutdownGrace is how long in-flight requests may take to finish
	// once ctx ends (default 5 s): the listener closes at once, new
	// requests are refused, open streams end, and calls that outlast the
	// grace are cut off. Interrupted, when it reports true (Ctrl-C), makes
	// the grace 0.
	ShutdownGrace time.Duration
	Interrupted   func() bool
	// SessionIdleTTL ends sessions a client abandoned (mcp-go's default
	// keeps them forever).
	SessionIdleTTL time.Duration
	// MaxBodyBytes caps a request's body (default DefaultMaxBodyBytes); a
	// larger one gets 413 without being read into memory.
	MaxBodyBytes int64
	// MaxSessions caps live sessions (default DefaultMaxSessions): a new
	// session ends the idle one used longest ago, or gets 503 when every
	// session has a request open.
	MaxSessions int
	// MaxInFlight caps the requests one session may have unanswered
	// (default DefaultMaxInFlightHTTP), MaxInFlightTotal those of all
	// clients together (default DefaultMaxInFlightTotal): a request past
	// either gets 429 and a JSON-RPC error saying so (see inFlight).
	MaxInFlight, MaxInFlightTotal int
	// BodyTimeout is how long a request's body may take to arrive
	// (default DefaultBodyTimeout); a slower one gets 408 and the
	// connection is closed.
	BodyTimeout time.Duration
	// Metrics, when set, is served at MetricsPath (the same origin checks
	// as MCP).
	Metrics http.Handler
	// Status, when set, is served at /status and below it (the status
	// page; the same origin checks as MCP).
	Status http.Handler
	// Ready, when set, is asked by every GET of ReadyPath whether the
	// host can serve (the shared store answers); nil means it can.
	Ready func(ctx context.Context) error
}

// MetricsPath is where the HTTP front end serves the host's metrics.
const MetricsPath = "/metrics"

// DefaultMaxBodyBytes is the largest request body the HTTP front end
// reads: one JSON-RPC message, whose tool arguments may carry a whole file
// (a write_file's content, base64 data), so generous; but bounded, so a
// client cannot make the host hold an arbitrary amount of memory.
const DefaultMaxBodyBytes = 16 << 20

// DefaultBodyTimeout bounds the time a request body may take: ample for
// DefaultMaxBodyBytes on any link, and a slow-body client cannot hold a
// request (and its buffer) open forever.
const DefaultBodyTimeout = 30 * time.Second

// EndpointPath is where MCP is served over HTTP.
const EndpointPath = "/mcp"

// ListenHTTP opens the HTTP listener, refusing non-loopback addresses
// unless opts allow them: AllowRemote, or an Auth that requires tokens. An
// address without a host means 127.0.0.1.
func ListenHTTP(addr string, opts HTTPOptions) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--http %q: %v (use 127.0.0.1:PORT)", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if !opts.AllowRemote && !opts.Auth.Enabled() && !isLoopbackHost(host) {
		return nil, fmt.Errorf("--http %s would listen beyond this machine, and no token or issuer is configured, so anyone who reaches it could call every tool; create a token (`switchboard token new NAME`) or configure an issuer in the auth block, use 127.0.0.1:%s, or pass --allow-remote behind an authenticating proxy", addr, port)
	}
	return net.Listen("tcp", net.JoinHostPort(host, port))
}

func isLoopbackHost(h string) bool {
	h = strings.Trim(h, "[]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// ServeHTTP serves MCP over streamable HTTP on ln until ctx ends. Requests
// from a browser page of another origin, including a page served by
// another port of this machine, are refused (403), and so are requests
// whose Host is not the listener's, so a web page cannot drive the host
// through the user's browser (DNS rebinding). Bodies are limited in size
// (413) and in time (408), requests in flight per session and in all
// (429). Sessions are enforced as sessions.go describes,
// and a call's progress goes out in its own response, before its result
// (see httpStream).
func (f *Frontend) ServeHTTP(ctx context.Context, ln net.Listener, opts HTTPOptions) error {
	if opts.SessionIdleTTL <= 0 {
		opts.SessionIdleTTL = 30 * time.Minute
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = DefaultBodyTimeout
	}
	ids := &sessionIDs{max: opts.MaxSessions}
	f.httpSessions.Store(ids)
	// With auth, requests from beyond this machine are expected: the
	// token decides, not the Host header (a browser never sends a bearer
	// token by itself, so DNS rebinding gains nothing), and a proxy on
	// this machine may pass the public Host on.
	authOn := opts.Auth.Enabled()
	remote := opts.AllowRemote || authOn
	hopts := []server.StreamableHTTPOption{
		server.WithEndpointPath(EndpointPath),
		server.WithSessionIdManager(ids),
		server.WithSessionIdleTTL(opts.SessionIdleTTL),
		server.WithHeartbeatInterval(30 * time.Second),
	}
	if authOn {
		hopts = append(hopts, server.WithDisableLocalhostProtection(true))
	}
	mcpHTTP := server.NewStreamableHTTPServer(f.srv, hopts...)
	drain := newDrain()
	guard := func(h http.Handler) http.Handler { return checkOrigin(ln.Addr(), remote, opts.Auth.Require(h)) }
	mux := http.NewServeMux()
	mux.Handle(EndpointPath, drain.wrap(guard(
		limitBody(opts.MaxBodyBytes, opts.BodyTimeout,
			drain.streams(limitInFlight(newInFlight(opts.MaxInFlight, opts.MaxInFlightTotal), enforceSessions(ids, streamPosts(mcpHTTP))))))))
	if opts.Auth != nil {
		meta := opts.Auth.MetadataHandler()
		mux.Handle(auth.MetadataPath, meta)
		mux.Handle(auth.MetadataPath+"/", meta)
	}
	if opts.Metrics != nil {
		mux.Handle(MetricsPath, guard(opts.Metrics))
	}
	if opts.Status != nil {
		h := guard(opts.Status)
		mux.Handle("/status", h)
		mux.Handle("/status/", h)
	}
	serveProbes(mux, opts.Ready)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if opts.TLS != nil {
		ln = tls.NewListener(ln, opts.TLS)
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		grace := opts.ShutdownGrace
		if grace <= 0 {
			grace = 5 * time.Second
		}
		if opts.Interrupted != nil && opts.Interrupted() {
			grace = 0
		}
		// Drain: stop accepting, refuse new requests, end the open
		// streams (they are not calls), and let the calls in flight
		// finish within the grace.
		drain.start()
		sctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			_ = hs.Close() // the grace is up: cut off what is left
		}
		cctx, ccancel := context.WithTimeout(context.Background(), time.Second)
		defer ccancel()
		_ = mcpHTTP.Shutdown(cctx)
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}

// drain refuses requests once the HTTP front end is shutting down and
// ends its open streams then, so that only calls are waited for.
type drain struct {
	done chan struct{}
	once sync.Once
}

func newDrain() *drain { return &drain{done: make(chan struct{})} }

func (d *drain) start() { d.once.Do(func() { close(d.done) }) }

func (d *drain) draining() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// wrap refuses a request that arrives during the drain (503): a client
// should retry on another replica.
func (d *drain) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.draining() {
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", "1")
			http.Error(w, "Service Unavailable: this host is shutting down; send the request again (another replica, or this host once it is back)", http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// streams makes a request that is a stream rather than a call (a GET
// stream, a 2026-07-28 subscriptions/listen) end when the drain starts;
// the body was read and decoded by limitBody (postOf).
func (d *drain) streams(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stream := r.Method == http.MethodGet
		if p := postOf(r); r.Method == http.MethodPost && p != nil && p.ok {
			stream = p.env.Method == string(mcp.MethodSubscriptionsListen)
		}
		if stream {
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			go func() {
				select {
				case <-d.done:
					cancel()
				case <-ctx.Done():
				}
			}()
			r = r.WithContext(ctx)
		}
		next.ServeHTTP(w, r)
	})
}

// HTTPSessions is the number of live HTTP sessions (0 when not serving
// HTTP).
func (f *Frontend) HTTPSessions() int {
	if ids := f.httpSessions.Load(); ids != nil {
		return ids.count()
	}
	return 0
}

// CheckOrigin wraps next with the front end's origin and Host checks for a
// listener at addr (see checkOrigin): for other pages a host serves on
// loopback (`switchboard ui`).
func CheckOrigin(addr net.Addr, next http.Handler) http.Handler {
	return checkOrigin(addr, false, next)
}

// checkOrigin refuses cross-origin browser requests. An Origin header, if
// present, must be the listener's own origin: http://127.0.0.1:PORT,
// http://localhost:PORT or http://[::1]:PORT for a loopback listener, with
// the listener's port (a page served by another local port is another
// origin). The Host header must likewise name a loopback host and the
// listener's port, which defeats DNS rebinding (a page of evil.example
// whose name now resolves to 127.0.0.1 sends Host: evil.example). With
// allowRemote, whatever host the request was sent to is accepted as long as
// Origin names the same host and port: the authenticating proxy in front
// decides.
func checkOrigin(addr net.Addr, allowRemote bool, next http.Handler) http.Handler {
	port := ""
	if tcp, ok := addr.(*net.TCPAddr); ok {
		port = strconv.Itoa(tcp.Port)
	} else if _, p, err := net.SplitHostPort(addr.String()); err == nil {
		port = p
	}
	local := func(hostport string) bool {
		h, p, err := net.SplitHostPort(hostport)
		return err == nil && p == port && isLoopbackHost(h)
	}
	forbid := func(w http.ResponseWriter, why string) {
		http.Error(w, "Forbidden: "+why, http.StatusForbidden)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowRemote && !local(r.Host) {
			forbid(w, "Host "+r.Host+" is not this server's address")
			return
		}
		if o := r.Header.Get("Origin"); o != "" {
			u, err := url.Parse(o)
			switch {
			case o == "null", err != nil, u.Scheme != "http" && u.Scheme != "https", u.Port() == "":
				forbid(w, "cross-origin request refused")
				return
			case local(u.Host):
			case allowRemote && strings.EqualFold(u.Host, r.Host):
			default:
				forbid(w, "cross-origin request refused")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// limitBody reads a request's whole body before next sees it, refusing one
// larger than max (413, without reading it into memory) or slower than
// timeout (408). The read deadline covers the body only: once it is read,
// the connection may stay open as long as the response needs (a stream).
func limitBody(max int64, timeout time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > max {
			w.Header().Set("Connection", "close")
			http.Error(w, fmt.Sprintf("request body of %d bytes is larger than the limit of %d", r.ContentLength, max), http.StatusRequestEntityTooLarge)
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(timeout))
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
		if err != nil {
			var tooBig *http.MaxBytesError
			var ne net.Error
			switch {
			case errors.As(err, &tooBig):
				http.Error(w, fmt.Sprintf("request body is larger than the limit of %d bytes", max), http.StatusRequestEntityTooLarge)
			case errors.As(err, &ne) && ne.Timeout():
				w.Header().Set("Connection", "close")
				http.Error(w, fmt.Sprintf("request body did not arrive within %s", timeout), http.StatusRequestTimeout)
			default:
				http.Error(w, "cannot read the request body", http.StatusBadRequest)
			}
			return
		}
		_ = rc.SetReadDeadline(time.Time{})
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		if r.Method == http.MethodPost {
			r = withPost(r, body)
		}
		next.ServeHTTP(w, r)
	})
}

package frontend

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// HTTPOptions configure the streamable HTTP front end.
type HTTPOptions struct {
	// AllowRemote permits listening on a non-loopback address. There is no
	// authentication: only do this behind something that provides it.
	AllowRemote bool
	// SessionIdleTTL ends sessions a client abandoned (mcp-go's default
	// keeps them forever).
	SessionIdleTTL time.Duration
}

// EndpointPath is where MCP is served over HTTP.
const EndpointPath = "/mcp"

// ListenHTTP opens the HTTP listener, refusing non-loopback addresses
// unless opts allow them. An address without a host means 127.0.0.1.
func ListenHTTP(addr string, opts HTTPOptions) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--http %q: %v (use 127.0.0.1:PORT)", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if !opts.AllowRemote && !isLoopbackHost(host) {
		return nil, fmt.Errorf("--http %s would listen beyond this machine, and the HTTP front end has no authentication; use 127.0.0.1:%s, or pass --allow-remote behind an authenticating proxy", addr, port)
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
// from a browser page of another origin are refused (403), so a web page
// cannot drive the host through the user's browser (DNS rebinding).
func (f *Frontend) ServeHTTP(ctx context.Context, ln net.Listener, opts HTTPOptions) error {
	if opts.SessionIdleTTL <= 0 {
		opts.SessionIdleTTL = 30 * time.Minute
	}
	mcpHTTP := server.NewStreamableHTTPServer(f.srv,
		server.WithEndpointPath(EndpointPath),
		server.WithSessionIdleTTL(opts.SessionIdleTTL),
		server.WithHeartbeatInterval(30*time.Second),
	)
	mux := http.NewServeMux()
	mux.Handle(EndpointPath, checkOrigin(mcpHTTP))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = mcpHTTP.Shutdown(sctx)
		_ = hs.Shutdown(sctx)
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}

// checkOrigin refuses cross-origin browser requests: an Origin header, if
// present, must name a loopback host or the host the request was sent to.
func checkOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" && o != "null" {
			u, err := url.Parse(o)
			if err != nil || (!isLoopbackHost(u.Hostname()) && !strings.EqualFold(u.Host, r.Host)) {
				http.Error(w, "Forbidden: cross-origin request refused", http.StatusForbidden)
				return
			}
		} else if o == "null" {
			http.Error(w, "Forbidden: cross-origin request refused", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

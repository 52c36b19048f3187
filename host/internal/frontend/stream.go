package frontend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// A call's progress must reach the client before the call's response: the
// spec says so, and clients drop progress that comes after (the TypeScript
// client dropped the last one in up to 5 of 12 calls). mcp-go cannot
// promise it: its notifications go through a queue that another goroutine
// drains, so on stdio a notification can follow the result it belongs to,
// and over HTTP it can be lost when the tool returns at once, or go out on
// another request's stream, since a session's requests share the queue.
// So a transport that owns its output puts a callStream in the call's
// context, and the front end writes the call's progress through it itself,
// before its handler returns (and so before mcp-go writes the response).

// callStream is where a call's own notifications go out.
type callStream interface {
	// notify writes n before it returns. It fails when n cannot go out
	// on this stream any more.
	notify(n mcp.JSONRPCNotification) error
}

// responseDropper is a callStream of one request that can leave the
// request unanswered: MCP says a cancelled request gets no response. A
// stream shared by many requests (stdio) is not one; stdio drops the
// responses of cancelled requests by their id (see cancelFilter).
type responseDropper interface {
	callStream
	// dropResponse makes sure the request's response is not sent. It is
	// called before the handler returns.
	dropResponse()
}

type streamKey struct{}

// withStream returns ctx carrying s for the calls made under it.
func withStream(ctx context.Context, s callStream) context.Context {
	return context.WithValue(ctx, streamKey{}, s)
}

// streamFrom returns the stream of ctx, or nil.
func streamFrom(ctx context.Context) callStream {
	s, _ := ctx.Value(streamKey{}).(callStream)
	return s
}

// notifyCall sends a notification about the call of ctx: through the
// call's stream when there is one, otherwise through mcp-go. Like
// mcp-go's SendNotificationToClient, it sends nothing to a session that is
// not initialized.
func (f *Frontend) notifyCall(ctx context.Context, method string, params map[string]any) error {
	s := streamFrom(ctx)
	if s == nil {
		return f.srv.SendNotificationToClient(ctx, method, params)
	}
	if session := server.ClientSessionFromContext(ctx); session == nil || !session.Initialized() {
		return server.ErrNotificationNotInitialized
	}
	return s.notify(mcp.JSONRPCNotification{
		JSONRPC:      mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: method, Params: mcp.NotificationParams{AdditionalFields: params}},
	})
}

// stdioStream writes a call's notifications straight to the stdio output,
// one whole line per Write (w is the session's lineWriter).
type stdioStream struct{ w io.Writer }

func (s stdioStream) notify(n mcp.JSONRPCNotification) error {
	b, err := json.Marshal(n)
	if err != nil {
		return err
	}
	_, err = s.w.Write(append(b, '\n'))
	return err
}

// errStreamDone is notify's answer once the response is under way or was
// dropped.
var errStreamDone = errors.New("frontend: the request's stream is closed")

// httpStream is the response of one POST: mcp-go writes the response, and
// the front end writes the call's progress into the same response first.
// When progress comes before mcp-go has chosen between a JSON and an SSE
// response, httpStream starts an SSE stream, and a JSON body mcp-go then
// writes goes out as the stream's last event. Every Write is whole with
// respect to the others (mcp-go writes one SSE event per Write).
type httpStream struct {
	w http.ResponseWriter

	mu      sync.Mutex
	started bool         // the status line and headers are written
	sse     bool         // the response is an SSE stream
	json    bool         // mcp-go is writing a JSON body into our SSE stream
	body    bytes.Buffer // that body, sent as an event by finish
	dropped bool         // the request was cancelled: no response
	done    bool         // the handler returned: no more notify
}

var (
	_ responseDropper = (*httpStream)(nil)
	_ http.Flusher    = (*httpStream)(nil)
)

// Header implements http.ResponseWriter.
func (h *httpStream) Header() http.Header { return h.w.Header() }

// WriteHeader implements http.ResponseWriter. Once the front end has
// started an SSE stream, mcp-go's choice of a JSON response is turned into
// a last event.
func (h *httpStream) WriteHeader(code int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dropped {
		return
	}
	if h.started {
		if h.sse && isJSON(h.w.Header().Get("Content-Type")) {
			h.w.Header().Set("Content-Type", "text/event-stream")
			h.json = true
		}
		return
	}
	h.started = true
	h.sse = h.w.Header().Get("Content-Type") == "text/event-stream"
	h.w.WriteHeader(code)
}

func isJSON(contentType string) bool {
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt == "application/json"
}

// Write implements http.ResponseWriter.
func (h *httpStream) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.dropped:
		return len(p), nil
	case h.json:
		return h.body.Write(p)
	}
	h.started = true
	return h.w.Write(p)
}

// Flush implements http.Flusher, which mcp-go needs to stream.
func (h *httpStream) Flush() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.flush()
}

func (h *httpStream) flush() {
	if fl, ok := h.w.(http.Flusher); ok && h.started && !h.json {
		fl.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection (mcp-go sets
// write deadlines through it).
func (h *httpStream) Unwrap() http.ResponseWriter { return h.w }

// notify writes n as an SSE event, starting the stream if nothing was
// written yet.
func (h *httpStream) notify(n mcp.JSONRPCNotification) error {
	b, err := json.Marshal(n)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done || h.dropped {
		return errStreamDone
	}
	if !h.started {
		h.w.Header().Set("Content-Type", "text/event-stream")
		h.w.Header().Set("Cache-Control", "no-cache")
		h.w.WriteHeader(http.StatusOK)
		h.started, h.sse = true, true
	}
	if !h.sse {
		return errStreamDone
	}
	if _, err := fmt.Fprintf(h.w, "event: message\ndata: %s\n\n", b); err != nil {
		return err
	}
	h.flush()
	return nil
}

// dropResponse implements responseDropper: whatever mcp-go writes from now
// on is discarded.
func (h *httpStream) dropResponse() {
	h.mu.Lock()
	h.dropped = true
	h.mu.Unlock()
}

// finish completes the response once mcp-go is done with it: a JSON body
// written into an SSE stream goes out as its last event, and a request
// left unanswered gets an SSE stream that ends without a response (a POST
// of a request must be answered with JSON or with a stream).
func (h *httpStream) finish() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.done = true
	switch {
	case h.json && !h.dropped:
		_, _ = fmt.Fprintf(h.w, "event: message\ndata: %s\n\n", bytes.TrimSpace(h.body.Bytes()))
		h.json = false
		h.flush()
	case h.dropped && !h.started:
		h.w.Header().Set("Content-Type", "text/event-stream")
		h.w.Header().Set("Cache-Control", "no-cache")
		h.w.WriteHeader(http.StatusOK)
		h.started = true
	}
}

// streamPosts gives every POST an httpStream, so that the calls it makes
// can write their progress into its response.
func streamPosts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		h := &httpStream{w: w}
		next.ServeHTTP(h, r.WithContext(withStream(r.Context(), h)))
		h.finish()
	})
}

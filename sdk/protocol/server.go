package protocol

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"

	plugin "github.com/hashicorp/go-plugin"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/tracing"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/workpool"
)

// server is the plugin side of the gRPC service: it runs each call on its
// own goroutine and serialises the events they send back.
type server struct {
	pluginv1.UnimplementedToolServerServer
	impl     Handler
	version  int   // the protocol version negotiated with the host
	versions []int // every version the plugin offers
	broker   *plugin.GRPCBroker

	mu         sync.Mutex
	configured bool
}

// KeepFirstConfigure makes a plugin answer a second Configure (another
// host attaching to a plugin in debug mode) without configuring it again.
var KeepFirstConfigure bool

func newServer(impl Handler, version int, versions []int) *server {
	return &server{impl: impl, version: version, versions: versions}
}

func (s *server) Configure(ctx context.Context, req *pluginv1.ConfigureRequest) (*pluginv1.ConfigureResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.configured {
		if KeepFirstConfigure {
			// A plugin in debug mode serves host after host; it keeps
			// the configuration of the first.
			return &pluginv1.ConfigureResponse{}, nil
		}
		return nil, status.Error(codes.FailedPrecondition, "plugin is already configured")
	}
	if id := req.GetHostService(); id != 0 {
		conn, err := dialHost(s.broker, id)
		if err != nil {
			return nil, statusError(err, CodeUnavailable)
		}
		ctx = context.WithValue(ctx, hostConnKey{}, conn)
	}
	if err := s.impl.Configure(ctx, req); err != nil {
		return nil, statusError(err, CodeInvalidArguments)
	}
	s.configured = true
	return &pluginv1.ConfigureResponse{}, nil
}

func (s *server) Describe(ctx context.Context, _ *pluginv1.DescribeRequest) (*pluginv1.DescribeResponse, error) {
	resp, err := s.impl.Describe(ctx)
	if err != nil {
		return nil, statusError(err, CodeInternal)
	}
	if len(resp.ProtocolVersions) == 0 {
		for _, v := range s.versions {
			resp.ProtocolVersions = append(resp.ProtocolVersions, int32(v)) //nolint:gosec // G115: protocol versions are small integers
		}
	}
	return resp, nil
}

func (s *server) PermissionPattern(ctx context.Context, req *pluginv1.PermissionPatternRequest) (*pluginv1.PermissionPatternResponse, error) {
	pats, err := s.impl.PermissionPattern(ctx, req)
	if err != nil {
		return nil, statusError(err, CodeInvalidArguments)
	}
	return &pluginv1.PermissionPatternResponse{Patterns: pats}, nil
}

// CallTool serves one multiplexed stream until the host closes it.
func (s *server) CallTool(stream pluginv1.ToolServer_CallToolServer) error {
	s.serveCalls(stream.Context(), stream)
	return nil
}

// serveCalls runs the calls arriving on stream, each on its own goroutine,
// until the stream ends. Every call still running then is cancelled and
// waited for.
func (s *server) serveCalls(parent context.Context, stream pluginv1.ToolServer_CallToolServer) {
	ctx, cancelAll := context.WithCancel(parent)
	defer cancelAll()

	var (
		sendMu  sync.Mutex
		callsMu sync.Mutex
		calls   = map[uint64]*running{}
		wg      sync.WaitGroup
	)
	// Calls run on reused goroutines: a fresh one would grow its stack
	// anew for every call.
	pool := workpool.New(64)
	defer func() {
		// The stream is gone: stop the calls still running, then wait.
		cancelAll()
		wg.Wait()
		pool.Close()
	}()

	// A gRPC stream takes one Send at a time.
	send := func(ev *pluginv1.CallToolEvent) {
		sendMu.Lock()
		defer sendMu.Unlock()
		err := stream.Send(ev)
		if err != nil && tooLarge(err) && (ev.GetResult() != nil || ev.GetError() != nil) {
			// The call's answer cannot travel; say so instead, or the
			// host would wait for it forever.
			_ = stream.Send(&pluginv1.CallToolEvent{CallId: ev.GetCallId(), Kind: &pluginv1.CallToolEvent_Error{Error: &pluginv1.Error{
				Code:    CodeInternal,
				Message: fmt.Sprintf("the tool's result (%d bytes) exceeds the plugin protocol's limit of %d bytes; ask for less (a range, a page, a filter)", proto.Size(ev), MaxMessageSize),
			}}})
		}
		// Any other failed send means the stream is gone; the receive
		// loop sees that too and cancels everything.
	}

	for {
		req, err := stream.Recv()
		if err != nil {
			return // host closed the stream or went away
		}
		id := req.GetCallId()
		switch k := req.GetKind().(type) {
		case *pluginv1.CallToolRequest_Cancel:
			callsMu.Lock()
			if r, ok := calls[id]; ok {
				r.cancel()
			}
			callsMu.Unlock()
		case *pluginv1.CallToolRequest_ClientResponse:
			callsMu.Lock()
			r := calls[id]
			callsMu.Unlock()
			if r != nil {
				r.sink.answer(k.ClientResponse)
			}
		case *pluginv1.CallToolRequest_Call:
			callCtx, cancel := context.WithCancel(ctx)
			callsMu.Lock()
			if _, dup := calls[id]; dup {
				callsMu.Unlock()
				cancel()
				send(&pluginv1.CallToolEvent{CallId: id, Kind: &pluginv1.CallToolEvent_Error{
					Error: &pluginv1.Error{Code: CodeInternal, Message: fmt.Sprintf("call id %d is already in flight", id)},
				}})
				continue
			}
			sink := &eventSink{id: id, send: send, wantProgress: k.Call.GetWantProgress(), version: s.version}
			calls[id] = &running{cancel: cancel, sink: sink}
			callsMu.Unlock()
			wg.Add(1)
			pool.Go(func() {
				defer wg.Done()
				defer func() {
					callsMu.Lock()
					delete(calls, id)
					callsMu.Unlock()
					cancel()
				}()
				res, err := s.runCall(callCtx, k.Call, sink)
				sink.close()
				ev := &pluginv1.CallToolEvent{CallId: id}
				switch {
				case err != nil:
					ev.Kind = &pluginv1.CallToolEvent_Error{Error: toWire(err)}
				case callCtx.Err() != nil && res == nil:
					ev.Kind = &pluginv1.CallToolEvent_Error{Error: toWire(callCtx.Err())}
				default:
					if res == nil {
						res = &pluginv1.Result{}
					}
					ev.Kind = &pluginv1.CallToolEvent_Result{Result: res}
				}
				send(ev)
			})
		default:
			// An unknown message kind from a newer host: ignore it.
		}
	}
}

// runCall runs the handler, turning a panic into an internal error so that
// one broken tool cannot take the plugin down.
func (s *server) runCall(ctx context.Context, call *pluginv1.Call, sink *eventSink) (res *pluginv1.Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			res = nil
			err = Errorf(CodeInternal, "tool %q panicked: %v\n%s", call.GetTool(), r, debug.Stack())
		}
	}()
	if call.GetTraceparent() != "" {
		// The host traces this call: the handler's span is a child of the
		// host's (recorded when the plugin sets up an OpenTelemetry
		// provider; otherwise it only carries the trace's identity).
		var span trace.Span
		ctx, span = tracing.Tracer().Start(tracing.Extract(ctx, call.GetTraceparent(), call.GetTracestate()), "tools/call "+call.GetTool(),
			trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
	}
	res, err = s.impl.CallTool(ctx, call, sink)
	if err != nil && ctx.Err() != nil && !errors.Is(err, ErrCancelled) && !errors.Is(err, ErrDeadline) {
		// The handler failed because it was cancelled; say so.
		if errors.Is(ctx.Err(), context.Canceled) {
			return nil, Errorf(CodeCancelled, "call cancelled: %v", err)
		}
	}
	return res, err
}

// running is one call in flight.
type running struct {
	cancel context.CancelFunc
	sink   *eventSink
}

// eventSink sends one call's events; it drops events after the call ended.
type eventSink struct {
	id           uint64
	send         func(*pluginv1.CallToolEvent)
	wantProgress bool
	version      int

	mu      sync.Mutex
	done    bool
	nextReq uint64
	waiting map[uint64]chan *pluginv1.ClientResponse
}

// Request implements EventSink: it sends a ClientRequest and waits for the
// host's ClientResponse, the call's end, or ctx.
func (e *eventSink) Request(ctx context.Context, method string, params []byte) ([]byte, error) {
	if e.version < Version2 {
		return nil, Errorf(CodeUnavailable, "the host speaks plugin protocol %d, which cannot pass %s to the client (it needs version %d: upgrade the host)", e.version, method, Version2)
	}
	ch := make(chan *pluginv1.ClientResponse, 1)
	e.mu.Lock()
	if e.done {
		e.mu.Unlock()
		return nil, Errorf(CodeCancelled, "%s: the call has ended", method)
	}
	e.nextReq++
	rid := e.nextReq
	if e.waiting == nil {
		e.waiting = map[uint64]chan *pluginv1.ClientResponse{}
	}
	e.waiting[rid] = ch
	e.send(&pluginv1.CallToolEvent{CallId: e.id, Kind: &pluginv1.CallToolEvent_ClientRequest{ClientRequest: &pluginv1.ClientRequest{
		RequestId: rid, Method: method, ParamsJson: params,
	}}})
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.waiting, rid)
		e.mu.Unlock()
	}()
	select {
	case resp := <-ch:
		if w := resp.GetError(); w != nil {
			return nil, fromWire(w)
		}
		return resp.GetResultJson(), nil
	case <-ctx.Done():
		return nil, Errorf(CodeCancelled, "%s: %v", method, ctx.Err())
	}
}

// answer hands the host's response to the request waiting for it.
func (e *eventSink) answer(resp *pluginv1.ClientResponse) {
	e.mu.Lock()
	ch := e.waiting[resp.GetRequestId()]
	e.mu.Unlock()
	if ch != nil {
		select {
		case ch <- resp:
		default:
		}
	}
}

func (e *eventSink) Progress(p *pluginv1.Progress) {
	if !e.wantProgress {
		return
	}
	e.emit(&pluginv1.CallToolEvent{CallId: e.id, Kind: &pluginv1.CallToolEvent_Progress{Progress: p}})
}

func (e *eventSink) Log(l *pluginv1.Log) {
	e.emit(&pluginv1.CallToolEvent{CallId: e.id, Kind: &pluginv1.CallToolEvent_Log{Log: l}})
}

func (e *eventSink) emit(ev *pluginv1.CallToolEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done {
		return
	}
	e.send(ev)
}

func (e *eventSink) close() {
	e.mu.Lock()
	e.done = true
	e.mu.Unlock()
}

// The version 2 features. Each is refused at version 1 (the host does not
// call them then) and when the plugin does not implement FeatureHandler.

func (s *server) features(what string) (FeatureHandler, error) {
	if s.version < Version2 {
		return nil, statusError(Errorf(CodeUnavailable, "%s needs plugin protocol %d; this connection speaks %d", what, Version2, s.version), CodeUnavailable)
	}
	f, ok := s.impl.(FeatureHandler)
	if !ok {
		return nil, statusError(Errorf(CodeUnavailable, "the plugin offers no %s", what), CodeUnavailable)
	}
	return f, nil
}

var _ pluginv1.ToolServerServer = (*server)(nil)

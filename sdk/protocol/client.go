package protocol

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/caller"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/tracing"
)

// DefaultCancelGrace is how long Call waits, after its context ends, for the
// plugin to acknowledge the cancellation before giving up on the call.
const DefaultCancelGrace = 5 * time.Second

// Client is the host's side of one plugin connection. All tool calls share
// one persistent CallTool stream, opened on first use and reopened after it
// breaks. A Client is safe for concurrent use; Close may be called more than
// once.
type Client struct {
	rpc pluginv1.ToolServerClient

	// CancelGrace bounds the wait for a cancelled call's acknowledgement.
	CancelGrace time.Duration
	// Log receives the plugin's log events of calls made with Call (nil
	// drops them). Set it before the first call.
	Log hclog.Logger
	// Broker is go-plugin's broker of the plugin's connection (nil when
	// the Client was made with NewClient): the host serves the host
	// service on it (see ConfigureRequest.host_service).
	Broker *plugin.GRPCBroker

	mu      sync.Mutex
	stream  *callStream
	nextID  uint64
	closed  bool
	streams sync.WaitGroup
}

// callStream is one CallTool stream and the calls in flight on it.
type callStream struct {
	s       pluginv1.ToolServer_CallToolClient
	cancel  func()
	sending chan struct{} // held by the one Send at a time (capacity 1)
	mu      sync.Mutex
	pending map[uint64]*pendingCall
	err     error // set once the stream is broken
}

type pendingCall struct {
	events chan *pluginv1.CallToolEvent // progress and log; lossy when full
	done   chan *pluginv1.CallToolEvent // the final event; capacity 1

	// ctx and requester answer the call's requests to its client
	// (version 2); set before the call is sent.
	ctx       context.Context
	requester ClientRequester
	// asking counts the call's requests to its client still being
	// answered (see MaxClientRequests).
	asking atomic.Int32
	// flooded is set once the call was ended for sending more.
	flooded atomic.Bool
}

// MaxClientRequests bounds the requests to its client (sampling,
// elicitation, roots) one call may have waiting for their answers. A plugin
// that sends more without waiting ends that call with an error (red team,
// 2026-12-07: a plugin that sent roots/list requests in a loop made the
// host start a goroutine for each, 5 GB in 40 s, and held the call's answer
// past its timeout).
const MaxClientRequests = 16

// NewClient returns a Client over a generated gRPC client.
func NewClient(rpc pluginv1.ToolServerClient) *Client {
	return &Client{rpc: rpc, CancelGrace: DefaultCancelGrace}
}

// Configure calls the plugin's Configure. An error is an *Error with the
// code the plugin gave it (CodeInvalidArguments for a plain refusal).
func (c *Client) Configure(ctx context.Context, req *pluginv1.ConfigureRequest) error {
	_, err := c.rpc.Configure(ctx, req)
	return rpcError(err)
}

// Describe calls the plugin's Describe. An error is an *Error with the
// code the plugin gave it.
func (c *Client) Describe(ctx context.Context) (*pluginv1.DescribeResponse, error) {
	resp, err := c.rpc.Describe(ctx, &pluginv1.DescribeRequest{})
	if err != nil {
		return nil, rpcError(err)
	}
	return resp, nil
}

// PermissionPattern calls the plugin's PermissionPattern. An error is an
// *Error with the code the plugin gave it (CodeInvalidArguments for a
// plain error).
func (c *Client) PermissionPattern(ctx context.Context, tool string, args []byte) ([]string, error) {
	resp, err := c.rpc.PermissionPattern(ctx, &pluginv1.PermissionPatternRequest{Tool: tool, Arguments: args})
	if err != nil {
		return nil, rpcError(err)
	}
	return resp.GetPatterns(), nil
}

// ProgressFunc receives a call's progress and log events as they travel on
// the wire, in order, on the calling goroutine of CallEvents.
type ProgressFunc func(ev *pluginv1.CallToolEvent)

// Call runs one tool call in the host's terms (package toolcall): the
// caller's identity in ctx (package caller) goes with it as its owner,
// onProgress, if not nil, asks for progress and receives it, and the
// plugin's log events go to Log and to the toolcall.LogFunc in ctx, if
// any. Errors are as for CallEvents.
func (c *Client) Call(ctx context.Context, tool string, args []byte, onProgress toolcall.ProgressFunc) (*toolcall.Result, error) {
	call := &pluginv1.Call{Tool: tool, Arguments: args, WantProgress: onProgress != nil, Owner: caller.From(ctx), DeniedPatterns: toolcall.DeniedFrom(ctx)}
	call.Traceparent, call.Tracestate = tracing.Inject(ctx)
	toClient := toolcall.LogFrom(ctx)
	res, err := c.CallEvents(ctx, call, func(ev *pluginv1.CallToolEvent) {
		switch k := ev.GetKind().(type) {
		case *pluginv1.CallToolEvent_Progress:
			if onProgress != nil {
				onProgress(progressFromWire(k.Progress))
			}
		case *pluginv1.CallToolEvent_Log:
			logEvent(c.Log, tool, k.Log)
			if toClient != nil {
				toClient(logFromWire(k.Log))
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return resultFromWire(res), nil
}

// CallEvents runs one call exactly as given over the shared stream, at the
// level of the wire (sdktest uses it to show plugin authors every event).
// onEvent, if not nil, gets progress and log events (progress only when
// call.WantProgress). When ctx ends the plugin is told to cancel the call;
// CallEvents then returns the plugin's answer (normally an *Error with
// CodeCancelled) or, if the plugin does not answer within CancelGrace, an
// *Error with CodeCancelled or CodeDeadline.
//
// A returned error is always an *Error: ErrUnavailable when the plugin
// cannot be reached or the connection broke mid-call.
func (c *Client) CallEvents(ctx context.Context, call *pluginv1.Call, onEvent ProgressFunc) (*pluginv1.Result, error) {
	tool := call.GetTool()
	cs, id, pc, err := c.start()
	if err != nil {
		return nil, err
	}
	defer cs.forget(id)
	pc.ctx, pc.requester = ctx, requesterFrom(ctx)

	req := &pluginv1.CallToolRequest{CallId: id, Kind: &pluginv1.CallToolRequest_Call{Call: call}}
	if err := cs.send(ctx, req); err != nil {
		return nil, err
	}

	var grace <-chan time.Time
	ctxDone := ctx.Done()
	for {
		select {
		case ev := <-pc.events:
			if onEvent != nil {
				onEvent(ev)
			}
		case ev := <-pc.done:
			// Deliver what arrived before the end, then finish.
			drain(pc.events, onEvent)
			return finalOf(ev)
		case <-ctxDone:
			ctxDone = nil
			sendCtx, stop := context.WithTimeout(context.Background(), c.CancelGrace)
			_ = cs.send(sendCtx, &pluginv1.CallToolRequest{CallId: id, Kind: &pluginv1.CallToolRequest_Cancel{
				Cancel: &pluginv1.Cancel{Reason: context.Cause(ctx).Error()},
			}})
			stop()
			t := time.NewTimer(c.CancelGrace)
			defer t.Stop()
			grace = t.C
		case <-grace:
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, Errorf(CodeDeadline, "tool %q timed out and the plugin did not stop it within %s", tool, c.CancelGrace)
			}
			return nil, Errorf(CodeCancelled, "tool %q was cancelled but the plugin did not stop it within %s", tool, c.CancelGrace)
		}
	}
}

// drain delivers the events already queued.
func drain(events <-chan *pluginv1.CallToolEvent, onEvent ProgressFunc) {
	for {
		select {
		case e := <-events:
			if onEvent != nil {
				onEvent(e)
			}
		default:
			return
		}
	}
}

func finalOf(ev *pluginv1.CallToolEvent) (*pluginv1.Result, error) {
	switch k := ev.GetKind().(type) {
	case *pluginv1.CallToolEvent_Result:
		return k.Result, nil
	case *pluginv1.CallToolEvent_Error:
		return nil, fromWire(k.Error)
	default:
		return nil, Errorf(CodeInternal, "plugin ended a call with an unexpected event")
	}
}

// start registers a new call on the current stream, opening one if needed.
func (c *Client) start() (*callStream, uint64, *pendingCall, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, 0, nil, Errorf(CodeUnavailable, "plugin connection is closed")
	}
	if c.stream == nil || c.stream.broken() != nil {
		if err := c.openLocked(); err != nil {
			return nil, 0, nil, err
		}
	}
	c.nextID++
	id := c.nextID
	pc := &pendingCall{
		events: make(chan *pluginv1.CallToolEvent, 64),
		done:   make(chan *pluginv1.CallToolEvent, 1),
	}
	cs := c.stream
	cs.mu.Lock()
	if cs.err != nil {
		cs.mu.Unlock()
		return nil, 0, nil, cs.err
	}
	cs.pending[id] = pc
	cs.mu.Unlock()
	return cs, id, pc, nil
}

func (c *Client) openLocked() error {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := c.rpc.CallTool(ctx)
	if err != nil {
		cancel()
		return Errorf(CodeUnavailable, "plugin unreachable: %v", rpcError(err))
	}
	cs := &callStream{s: s, cancel: cancel, sending: make(chan struct{}, 1), pending: map[uint64]*pendingCall{}}
	c.stream = cs
	c.streams.Add(1)
	go func() {
		defer c.streams.Done()
		cs.receive()
	}()
	return nil
}

// receive dispatches events until the stream ends, then fails every call
// still waiting on it.
func (cs *callStream) receive() {
	for {
		ev, err := cs.s.Recv()
		if err != nil {
			cs.fail(Errorf(CodeUnavailable, "plugin connection lost mid-call: %v", rpcError(err)))
			return
		}
		cs.mu.Lock()
		pc := cs.pending[ev.GetCallId()]
		cs.mu.Unlock()
		if pc == nil {
			continue // a late event for a call that already ended
		}
		switch k := ev.GetKind().(type) {
		case *pluginv1.CallToolEvent_ClientRequest:
			// Never dropped: the plugin waits for the answer. Past
			// MaxClientRequests waiting at once, the call ends.
			if pc.asking.Add(1) > MaxClientRequests {
				pc.asking.Add(-1)
				if pc.flooded.CompareAndSwap(false, true) {
					why := fmt.Sprintf("the plugin sent more than %d requests to the client (%s) without waiting for their answers", MaxClientRequests, k.ClientRequest.GetMethod())
					end(pc, ev.GetCallId(), Errorf(CodeInternal, "%s; the call was ended", why))
					go cs.cancelCall(ev.GetCallId(), why)
				}
				continue
			}
			go func(id uint64, req *pluginv1.ClientRequest) {
				defer pc.asking.Add(-1)
				cs.answerClient(id, pc, req)
			}(ev.GetCallId(), k.ClientRequest)
		case *pluginv1.CallToolEvent_Result, *pluginv1.CallToolEvent_Error:
			select {
			case pc.done <- ev:
			default:
			}
		default:
			select {
			case pc.events <- ev:
			default: // the caller is slow; progress is advisory
			}
		}
	}
}

func (cs *callStream) fail(err *Error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.err == nil {
		cs.err = err
	}
	for id, pc := range cs.pending {
		end(pc, id, err)
	}
}

// cancelCall tells the plugin to cancel call id, which has already been
// answered here.
func (cs *callStream) cancelCall(id uint64, reason string) {
	ctx, stop := context.WithTimeout(context.Background(), DefaultCancelGrace)
	defer stop()
	_ = cs.send(ctx, &pluginv1.CallToolRequest{CallId: id, Kind: &pluginv1.CallToolRequest_Cancel{Cancel: &pluginv1.Cancel{Reason: reason}}})
}

// end gives call id the final answer err, unless it has one already.
func end(pc *pendingCall, id uint64, err *Error) {
	select {
	case pc.done <- &pluginv1.CallToolEvent{CallId: id, Kind: &pluginv1.CallToolEvent_Error{Error: toWire(err)}}:
	default:
	}
}

func (cs *callStream) broken() error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.err
}

func (cs *callStream) forget(id uint64) {
	cs.mu.Lock()
	delete(cs.pending, id)
	cs.mu.Unlock()
}

// send sends one message for a call whose context is ctx. A plugin that
// stops reading must not hold the host: waiting for the stream gives up
// when ctx ends, and a send still blocked when ctx ends breaks the stream
// (its calls fail as on a lost connection and the next call opens a new
// one; red team, 2026-12-07: an argument larger than the flow-control
// window, to a plugin that read nothing, held its call past its timeout,
// every later call and the host's exit).
func (cs *callStream) send(ctx context.Context, req *pluginv1.CallToolRequest) error {
	if ctx.Err() != nil {
		return ctxError(ctx, "before it was sent")
	}
	// A stream takes one Send at a time.
	select {
	case cs.sending <- struct{}{}:
	case <-ctx.Done():
		return Errorf(CodeUnavailable, "the plugin is not reading its calls: %v", context.Cause(ctx))
	}
	defer func() { <-cs.sending }()
	stop := context.AfterFunc(ctx, cs.cancel)
	err := cs.s.Send(req)
	if !stop() {
		return Errorf(CodeUnavailable, "the plugin is not reading its calls: %v; its connection was reset", context.Cause(ctx))
	}
	if err != nil {
		if tooLarge(err) {
			// Only this call is refused; the stream is fine.
			return Errorf(CodeInvalidArguments, "the call's arguments (%d bytes) exceed the plugin protocol's limit of %d bytes", proto.Size(req), MaxMessageSize)
		}
		return Errorf(CodeUnavailable, "plugin connection lost: %v", rpcError(err))
	}
	return nil
}

// ctxError is the error of a call whose context ended (what).
func ctxError(ctx context.Context, what string) *Error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return Errorf(CodeDeadline, "the call timed out %s: %v", what, context.Cause(ctx))
	}
	return Errorf(CodeCancelled, "the call was cancelled %s: %v", what, context.Cause(ctx))
}

// tooLarge reports whether a send failed only because the message exceeds
// the protocol's limit.
func tooLarge(err error) bool {
	return status.Code(err) == codes.ResourceExhausted
}

// Close ends the call stream (cancelling calls still on it in the plugin)
// and waits for its receiver to stop. It does not stop the plugin process.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	cs := c.stream
	c.stream = nil
	c.mu.Unlock()
	if cs != nil {
		// Break the stream first: a Send blocked on a plugin that reads
		// nothing returns, and nothing waits for it.
		cs.cancel()
	}
	c.streams.Wait()
	return nil
}

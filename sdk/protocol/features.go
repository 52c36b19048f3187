package protocol

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
)

// Version2 is protocol version 2: version 1 plus resources, prompts,
// completion, notifications from the plugin, and requests from a call to
// its client (sampling, elicitation, roots).
const Version2 = 2

// Methods a call may send to its client with EventSink.Request.
const (
	MethodSampling    = "sampling/createMessage"
	MethodElicitation = "elicitation/create"
	MethodRoots       = "roots/list"
)

// ReadResource reads a resource of a version 2 plugin.
func (c *Client) ReadResource(ctx context.Context, req *pluginv1.ReadResourceRequest) (*pluginv1.ReadResourceResponse, error) {
	resp, err := c.rpc.ReadResource(ctx, req)
	return resp, rpcError(err)
}

// GetPrompt renders a prompt of a version 2 plugin.
func (c *Client) GetPrompt(ctx context.Context, req *pluginv1.GetPromptRequest) (*pluginv1.GetPromptResponse, error) {
	resp, err := c.rpc.GetPrompt(ctx, req)
	return resp, rpcError(err)
}

// Complete asks a version 2 plugin for completions.
func (c *Client) Complete(ctx context.Context, req *pluginv1.CompleteRequest) (*pluginv1.CompleteResponse, error) {
	resp, err := c.rpc.Complete(ctx, req)
	return resp, rpcError(err)
}

// Subscribe starts or stops updates of one resource of a version 2 plugin.
func (c *Client) Subscribe(ctx context.Context, req *pluginv1.SubscribeRequest) error {
	_, err := c.rpc.Subscribe(ctx, req)
	return rpcError(err)
}

// Notifications receives a version 2 plugin's notifications and hands each
// to fn until ctx ends or the plugin goes; it returns why it stopped.
func (c *Client) Notifications(ctx context.Context, fn func(*pluginv1.Notification)) error {
	stream, err := c.rpc.Notifications(ctx, &pluginv1.NotificationsRequest{})
	if err != nil {
		return rpcError(err)
	}
	for {
		n, err := stream.Recv()
		if err != nil {
			return rpcError(err)
		}
		fn(n)
	}
}

// The plugin's side of the version 2 RPCs.

func (s *server) ReadResource(ctx context.Context, req *pluginv1.ReadResourceRequest) (*pluginv1.ReadResourceResponse, error) {
	f, err := s.features("resources")
	if err != nil {
		return nil, err
	}
	resp, err := f.ReadResource(ctx, req)
	return resp, statusError(err, CodeInternal)
}

func (s *server) GetPrompt(ctx context.Context, req *pluginv1.GetPromptRequest) (*pluginv1.GetPromptResponse, error) {
	f, err := s.features("prompts")
	if err != nil {
		return nil, err
	}
	resp, err := f.GetPrompt(ctx, req)
	return resp, statusError(err, CodeInternal)
}

func (s *server) Complete(ctx context.Context, req *pluginv1.CompleteRequest) (*pluginv1.CompleteResponse, error) {
	f, err := s.features("completion")
	if err != nil {
		return nil, err
	}
	resp, err := f.Complete(ctx, req)
	return resp, statusError(err, CodeInternal)
}

func (s *server) Subscribe(ctx context.Context, req *pluginv1.SubscribeRequest) (*pluginv1.SubscribeResponse, error) {
	f, err := s.features("resource subscriptions")
	if err != nil {
		return nil, err
	}
	if err := f.Subscribe(ctx, req); err != nil {
		return nil, statusError(err, CodeInternal)
	}
	return &pluginv1.SubscribeResponse{}, nil
}

func (s *server) Notifications(_ *pluginv1.NotificationsRequest, stream pluginv1.ToolServer_NotificationsServer) error {
	f, err := s.features("notifications")
	if err != nil {
		return err
	}
	if err := f.Notifications(stream.Context(), stream.Send); err != nil {
		return statusError(err, CodeInternal)
	}
	return nil
}

// ClientRequester passes a call's request (sampling, elicitation, roots) to
// the client that made the call and returns the client's result as JSON.
type ClientRequester func(ctx context.Context, method string, params []byte) ([]byte, error)

type requesterKey struct{}

// WithClientRequester returns ctx carrying r, for the calls made with it:
// their plugins' requests to the client go to r. Without one a request is
// refused with an error the tool can report.
func WithClientRequester(ctx context.Context, r ClientRequester) context.Context {
	return context.WithValue(ctx, requesterKey{}, r)
}

// ClientRequesterFrom returns the ClientRequester in ctx, or nil (an
// external server's own requests to the client use it).
func ClientRequesterFrom(ctx context.Context) ClientRequester { return requesterFrom(ctx) }

func requesterFrom(ctx context.Context) ClientRequester {
	r, _ := ctx.Value(requesterKey{}).(ClientRequester)
	return r
}

// answerClient runs one request of a call against its requester and sends
// the answer back on the stream.
func (cs *callStream) answerClient(id uint64, pc *pendingCall, req *pluginv1.ClientRequest) {
	resp := &pluginv1.ClientResponse{RequestId: req.GetRequestId()}
	if pc.requester == nil {
		resp.Error = toWire(Errorf(CodeUnavailable, "%s: the caller of this tool cannot be asked (no MCP client session made the call)", req.GetMethod()))
	} else if res, err := pc.requester(pc.ctx, req.GetMethod(), req.GetParamsJson()); err != nil {
		resp.Error = toWire(err)
	} else {
		resp.ResultJson = res
	}
	_ = cs.send(pc.ctx, &pluginv1.CallToolRequest{CallId: id, Kind: &pluginv1.CallToolRequest_ClientResponse{ClientResponse: resp}})
}

// versionsPrefix starts the line a plugin writes on stderr when it shares no
// protocol version with the host: go-plugin's handshake names only one.
const versionsPrefix = "switchboard plugin protocol versions: "

// VersionsLine is that line for versions.
func VersionsLine(versions []int) string {
	parts := make([]string, len(versions))
	for i, v := range versions {
		parts[i] = strconv.Itoa(v)
	}
	return versionsPrefix + strings.Join(parts, " ")
}

// ParseVersionsLine reads a VersionsLine (found anywhere in line, which may
// carry a logger's prefix).
func ParseVersionsLine(line string) ([]int, bool) {
	_, rest, ok := strings.Cut(line, versionsPrefix)
	if !ok {
		return nil, false
	}
	var vs []int
	for _, f := range strings.Fields(rest) {
		v, err := strconv.Atoi(f)
		if err != nil {
			return nil, false
		}
		vs = append(vs, v)
	}
	return vs, len(vs) > 0
}

// SharesVersion reports whether the host's versions (go-plugin's
// PLUGIN_PROTOCOL_VERSIONS, comma-separated) include one of ours; true
// when hostList is empty (no host said).
func SharesVersion(hostList string, ours []int) bool {
	if hostList == "" {
		return true
	}
	for _, f := range strings.Split(hostList, ",") {
		if v, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && slices.Contains(ours, v) {
			return true
		}
	}
	return false
}

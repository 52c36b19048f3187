// Package protocol is the contract between the Switchboard host and its
// plugins: the go-plugin handshake, the protocol versions, the go-plugin
// adapters on both sides, and the coded errors that survive the wire.
//
// Host, launcher, sdk and sdktest all import this package (as go-plugin's
// examples share a contract package).
//
// Lifecycle of a plugin as seen from here: the host starts the binary with
// go-plugin, both sides agree on the highest protocol version they share,
// the host calls Configure once and Describe once, and then every tool call
// travels over one persistent CallTool stream managed by [Client].
//
// Host plumbing, not a plugin author's API: package protocol and the
// packages under it (sdk/protocol/...: pluginv1, the generated gRPC code;
// launcher, which starts and talks to plugin processes for the host and for
// sdktest; pluginserve, the plugin side's server; and the small packages
// they share) are the wire protocol and launch core that the SDK and the
// host have in common. They live in the SDK's module so that the host and
// the SDK build the protocol from one source, and they are exported only
// because the host is another module (Go's internal rule would hide them
// from it). Their Go API may change in any release; the only compatibility
// promise is the protocol version ([SupportedVersions]). A plugin author
// uses package sdk and package sdktest; a plugin in another language
// implements sdk/proto/switchboard/plugin/v1/plugin.proto (docs/PROTOCOL.md).
package protocol

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/ablate"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
)

// Handshake is the go-plugin handshake every Switchboard plugin uses. The
// cookie only tells a user who runs a plugin binary by hand that it is meant
// to be started by the host; it is not a security measure.
var Handshake = plugin.HandshakeConfig{
	// ProtocolVersion is unused: Switchboard negotiates with VersionedPlugins.
	ProtocolVersion:  0,
	MagicCookieKey:   "SWITCHBOARD_PLUGIN",
	MagicCookieValue: "d1b0f5a3-mcp-tool-server",
}

// PluginName is the key of the tool server in go-plugin's plugin sets.
const PluginName = "toolserver"

// Version1 is protocol version 1: Configure, Describe, CallTool (one
// multiplexed stream), PermissionPattern.
const Version1 = 1

// SupportedVersions lists the protocol versions this build speaks, lowest
// first.
var SupportedVersions = []int{Version1, Version2}

// MaxMessageSize bounds one gRPC message in either direction. gRPC's default
// of 4 MB is far too small for files and command output.
const MaxMessageSize = 256 << 20

// FlowWindow is the fixed gRPC flow-control window, per stream and per
// connection, of both ends of the plugin connection. gRPC's default is a
// 64 KiB window that grows by measuring the bandwidth-delay product: each
// time data arrives after the last measurement ended, the receiver sends a
// ping and waits for its answer. Calls between host and plugin go back and
// forth one at a time, so that was a ping and an answer per call in each
// direction, extra wake-ups of both processes, on a local socket whose
// bandwidth-delay product is tiny. A fixed window (gRPC turns the
// measurement off when one is set) of 4 MiB lets a large result flow
// without waiting for window updates.
const FlowWindow = 4 << 20

// GRPCServerOptions are the options the SDK's gRPC server is built with.
func GRPCServerOptions() []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageSize),
		grpc.MaxSendMsgSize(MaxMessageSize),
		grpc.ForceServerCodecV2(utf8Codec),
	}
	if !ablate.Off(ablate.FlowWindow) {
		opts = append(opts, grpc.InitialWindowSize(FlowWindow), grpc.InitialConnWindowSize(FlowWindow))
	}
	return opts
}

// GRPCDialOptions are the options the host dials plugins with.
func GRPCDialOptions() []grpc.DialOption {
	opts := []grpc.DialOption{
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(MaxMessageSize),
			grpc.MaxCallSendMsgSize(MaxMessageSize),
			grpc.ForceCodecV2(utf8Codec),
		),
	}
	if !ablate.Off(ablate.FlowWindow) {
		opts = append(opts, grpc.WithInitialWindowSize(FlowWindow), grpc.WithInitialConnWindowSize(FlowWindow))
	}
	return opts
}

// OpaquePrefix starts a permission pattern that stands for something the
// plugin could not read (a command line that does not parse, a command
// whose name is computed at run time). The host never lets an allow rule
// match such a pattern; only the default or a deny rule decides it.
const OpaquePrefix = "\x00"

// Opaque returns an opaque permission pattern with a reason for humans.
func Opaque(reason string) string { return OpaquePrefix + reason }

// Handler is what a plugin implements at the protocol level. The friendly
// layer in package sdk implements it for typed Go handlers.
//
// Configure is called once, before Describe. CallTool and PermissionPattern
// may be called concurrently from many goroutines; CallTool must return when
// ctx is done (the host cancelled the call or is shutting down).
type Handler interface {
	Configure(ctx context.Context, req *pluginv1.ConfigureRequest) error
	Describe(ctx context.Context) (*pluginv1.DescribeResponse, error)
	// CallTool runs one call. Events sends progress and log events while it
	// runs; it is safe for concurrent use and must not be used after
	// CallTool returns. A tool failure is a Result with IsError set; an
	// error return means the tool did not run or was cut short, and should
	// be an *Error so its code survives the wire.
	CallTool(ctx context.Context, call *pluginv1.Call, events EventSink) (*pluginv1.Result, error)
	PermissionPattern(ctx context.Context, req *pluginv1.PermissionPatternRequest) ([]string, error)
}

// EventSink receives the progress and log events of one call, and carries
// its requests to the client.
type EventSink interface {
	Progress(p *pluginv1.Progress)
	Log(l *pluginv1.Log)
	// Request sends an MCP request (sampling/createMessage,
	// elicitation/create, roots/list) to the client that made the call and
	// returns the client's result object as JSON. It needs protocol
	// version 2.
	Request(ctx context.Context, method string, params []byte) ([]byte, error)
}

// FeatureHandler is what a plugin implements for protocol version 2's
// features beyond tools. Errors should be *Error so their codes survive.
type FeatureHandler interface {
	ReadResource(ctx context.Context, req *pluginv1.ReadResourceRequest) (*pluginv1.ReadResourceResponse, error)
	GetPrompt(ctx context.Context, req *pluginv1.GetPromptRequest) (*pluginv1.GetPromptResponse, error)
	Complete(ctx context.Context, req *pluginv1.CompleteRequest) (*pluginv1.CompleteResponse, error)
	Subscribe(ctx context.Context, req *pluginv1.SubscribeRequest) error
	// Notifications sends the plugin's notifications with send until ctx
	// ends (the host closed the stream) or send fails.
	Notifications(ctx context.Context, send func(*pluginv1.Notification) error) error
}

// GRPCPlugin adapts a Handler (plugin side) and a Client (host side) to
// go-plugin. Impl is only set on the plugin side.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl Handler
	// Version is the protocol version this plugin set serves, and Versions
	// every version the plugin offers (reported in Describe).
	Version  int
	Versions []int
}

// GRPCServer registers the tool server on the plugin's gRPC server.
func (p *GRPCPlugin) GRPCServer(broker *plugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return fmt.Errorf("protocol: GRPCPlugin has no Impl")
	}
	srv := newServer(p.Impl, p.Version, p.Versions)
	srv.broker = broker
	pluginv1.RegisterToolServerServer(s, srv)
	return nil
}

// GRPCClient returns a *Client for the host; its Broker is the
// connection's go-plugin broker (for the host service).
func (p *GRPCPlugin) GRPCClient(_ context.Context, broker *plugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	c := NewClient(pluginv1.NewToolServerClient(cc))
	c.Broker = broker
	return c, nil
}

// PluginSets returns the VersionedPlugins map for the given versions, each
// mapped to a GRPCPlugin with impl. The host passes a nil impl.
func PluginSets(impl Handler, versions []int) map[int]plugin.PluginSet {
	sets := make(map[int]plugin.PluginSet, len(versions))
	for _, v := range versions {
		sets[v] = plugin.PluginSet{PluginName: &GRPCPlugin{Impl: impl, Version: v, Versions: versions}}
	}
	return sets
}

// FormatVersions renders a version list as "[1 2]".
func FormatVersions(vs []int) string {
	s := slices.Clone(vs)
	slices.Sort(s)
	return fmt.Sprint(s)
}

// ValidateToolName checks a tool name against MCP's grammar: 1 to 128 of
// [A-Za-z0-9_.-].
func ValidateToolName(name string) error {
	if !validToolName(name) {
		return fmt.Errorf("tool name %q is invalid: use 1-128 of [A-Za-z0-9_.-]", name)
	}
	return nil
}

// validToolName is ValidateToolName's check, by hand: a bounded repetition
// in a regular expression compiles to as many copies, and a package-level
// one is compiled at every start of every plugin and of the host.
func validToolName(name string) bool {
	if name == "" || len(name) > 128 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// ValidateDescribe checks what a plugin describes: every tool name valid
// and unique, every input schema a JSON object, every output schema (when
// given) a JSON object. The host refuses a plugin that fails it, and the
// SDK and sdktest run the same check, so a plugin that passes its tests
// loads in the host.
func ValidateDescribe(info *pluginv1.DescribeResponse) error {
	seen := map[string]bool{}
	for _, t := range info.GetTools() {
		if err := ValidateToolName(t.GetName()); err != nil {
			return err
		}
		if seen[t.GetName()] {
			return fmt.Errorf("tool %q is described twice", t.GetName())
		}
		seen[t.GetName()] = true
		if !isJSONObject(t.GetInputSchema()) {
			return fmt.Errorf("tool %q: input schema is not a JSON object", t.GetName())
		}
		if len(t.GetOutputSchema()) > 0 && !isJSONObject(t.GetOutputSchema()) {
			return fmt.Errorf("tool %q: output schema is not a JSON object", t.GetName())
		}
	}
	return nil
}

func isJSONObject(b []byte) bool {
	var obj map[string]any
	return len(b) > 0 && json.Unmarshal(b, &obj) == nil && obj != nil
}

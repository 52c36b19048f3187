// Package sdktest starts a plugin for real and calls its tools, so a plugin
// author can test a plugin in one line:
//
//	res := sdktest.StartInProcess(t, myplugin.New()).Call("greet", map[string]any{"name": "Ada"})
//	if !strings.Contains(res.Text(), "Ada") { … }
//
// StartInProcess serves the plugin in go-plugin's in-process test mode (real
// gRPC, no subprocess); Start launches a built plugin binary as the host
// would. Both configure the plugin, describe it, and stop it when the test
// ends.
package sdktest

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/switchboard-mcp/switchboard/sdk"
	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginserve"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/quietio"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// ReattachWaitFunction is the go-plugin goroutine that in-process test mode
// leaves behind, for goleak.IgnoreTopFunction.
const ReattachWaitFunction = "github.com/hashicorp/go-plugin/internal/cmdrunner.pidWait"

// Plugin is a started plugin, with what it said about itself in Describe.
type Plugin struct {
	// Name, Version and SDKVersion are what the plugin reported.
	Name, Version, SDKVersion string
	// Instructions are the plugin's instructions for the model.
	Instructions string
	// Tools are the plugin's tools as the host sees them.
	Tools []Tool
	// Sandbox is what the plugin declared it needs from its sandbox (nil
	// if it declared nothing).
	Sandbox *sdk.SandboxNeeds
	// Resources, ResourceTemplates and Prompts are what the plugin offers
	// beyond tools (protocol version 2); their Complete functions are nil
	// here: use Complete.
	Resources         []sdk.Resource
	ResourceTemplates []sdk.ResourceTemplate
	Prompts           []sdk.Prompt
	// ProtocolVersions are the plugin protocol versions the plugin offers.
	ProtocolVersions []int
	// PID is the plugin's process id (0 in process).
	PID int

	t        testing.TB
	owner    string
	denied   []string
	client   ClientFunc
	proto    *protocol.Client
	call     func(ctx context.Context, call *pluginv1.Call, onEvent protocol.ProgressFunc) (*pluginv1.Result, error)
	patterns func(ctx context.Context, tool string, args []byte) ([]string, error)
	stop     *stopper
}

type stopper struct {
	once sync.Once
	fn   func()
}

// Tool is one described tool, as the host publishes it.
type Tool struct {
	Name, Title, Description  string
	InputSchema, OutputSchema json.RawMessage
	// Access is the level a caller needs: sdk.AccessRead or sdk.AccessWrite.
	Access sdk.Access
	// ReadOnly, Destructive, Idempotent and OpenWorld are the MCP hints
	// (nil: not set).
	ReadOnly                           bool
	Destructive, Idempotent, OpenWorld *bool
	SkipDuplicateCheck                 bool
	// CustomPermissionPattern says the tool has a PermissionPattern function.
	CustomPermissionPattern bool
	// MaxDuration is the tool's own limit (sdk.Tool.MaxDuration).
	MaxDuration time.Duration
}

// Result is a tool's result as the host receives it.
type Result struct {
	IsError bool
	Content []Content
	// Structured is the structured content (raw JSON; nil if none).
	Structured json.RawMessage
}

// Text returns the result's text blocks joined by newlines.
func (r *Result) Text() string {
	var parts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Content is one content block of a result. Type is "text", "image",
// "audio", "resource_link" or "resource"; the other fields are set as the
// type has them.
type Content struct {
	Type                   string
	Text                   string
	Data                   []byte
	MimeType               string
	URI, Name, Description string
}

// Progress is one progress notification of a call.
type Progress struct {
	Progress, Total float64
	Message         string
}

// Stop stops the plugin as the host would (closing the connection, which
// asks it to shut down gracefully). The test's cleanup calls it too; it may
// be called more than once.
func (p *Plugin) Stop() {
	p.stop.once.Do(p.stop.fn)
}

// As returns the plugin seen by one caller: calls made through it carry
// owner as their owner (sdk.Request.Owner), as a host sends the caller it
// serves. Tools that keep state per caller are tested with two owners.
func (p *Plugin) As(owner string) *Plugin {
	c := *p
	c.owner = owner
	return &c
}

// Denying returns the plugin called as under host deny rules with these
// pattern parts ("*.env" of "fs.*:*.env"): calls made through it carry
// them (sdk.Request.Denied), as a host sends its rules for the tool.
func (p *Plugin) Denying(patterns ...string) *Plugin {
	c := *p
	c.denied = patterns
	return &c
}

// Option adjusts how a plugin is started.
type Option func(*options)

type options struct {
	settings   any
	projectDir string
	dataDir    string
	name       string
	protected  []string
	client     ClientFunc
}

// ClientFunc answers a tool's request to its client (method is
// "sampling/createMessage", "elicitation/create" or "roots/list"; params
// and the result are MCP's JSON objects), as the MCP client a host passes
// it to would.
type ClientFunc func(method string, params json.RawMessage) (json.RawMessage, error)

// WithClient answers the plugin's requests to its client with fn. Without
// it such requests fail, as with a client that cannot be asked.
func WithClient(fn ClientFunc) Option { return func(o *options) { o.client = fn } }

// WithSettings sends v (marshalled to JSON) as the plugin's settings.
func WithSettings(v any) Option { return func(o *options) { o.settings = v } }

// WithProjectDir sets the project directory (default: a new temp dir).
func WithProjectDir(dir string) Option { return func(o *options) { o.projectDir = dir } }

// WithServerName sets the name the plugin is configured under.
func WithServerName(name string) Option { return func(o *options) { o.name = name } }

// WithDataDir sets the plugin's data directory (default: a new temp dir).
func WithDataDir(dir string) Option { return func(o *options) { o.dataDir = dir } }

// WithProtectedPaths configures the plugin as a host that protects paths
// (its config, data_dir, plugin binaries): sdk.Config.ProtectedPaths.
func WithProtectedPaths(paths ...string) Option {
	return func(o *options) { o.protected = append(o.protected, paths...) }
}

// StartInProcess serves s in-process over real gRPC (go-plugin's test mode:
// the same gRPC service as a plugin process, without the process) and
// returns it configured and described.
//
// go-plugin's test mode leaves one goroutine polling the test's own pid
// (cmdrunner.pidWait); tests using goleak should ignore it with
// goleak.IgnoreTopFunction(sdktest.ReattachWaitFunction).
func StartInProcess(t testing.TB, s *sdk.Server, opts ...Option) *Plugin {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	reattach := make(chan *plugin.ReattachConfig, 1)
	closed := make(chan struct{})
	go pluginserve.Serve(pluginserve.SDK(s), pluginserve.WithTestConfig(&plugin.ServeTestConfig{
		Context: ctx, ReattachConfigCh: reattach, CloseCh: closed,
	}))
	var rc *plugin.ReattachConfig
	select {
	case rc = <-reattach:
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("sdktest: plugin did not start serving within 10s")
	}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig: protocol.Handshake,
		// go-plugin reads Plugins, not VersionedPlugins, when reattaching.
		Plugins:          protocol.PluginSets(nil, []int{rc.ProtocolVersion})[rc.ProtocolVersion],
		Reattach:         rc,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		// Read and written as the host's connections are (the last
		// credentials given win over go-plugin's).
		GRPCDialOptions: append(protocol.GRPCDialOptions(), grpc.WithTransportCredentials(quietio.Creds(insecure.NewCredentials()))),
		Logger:          hclog.NewNullLogger(),
	})
	p, pc := connect(t, client, opts)
	p.stop = &stopper{fn: func() {
		_ = pc.Close()
		// Closing the connection asks the plugin to shut down; only if it
		// does not is the serve context cancelled (doing both at once races
		// inside go-plugin's test mode).
		if rpc, err := client.Client(); err == nil {
			_ = rpc.Close()
		}
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			cancel()
			<-closed
		}
		cancel()
		client.Kill()
	}}
	t.Cleanup(p.Stop)
	return p
}

// Start launches the plugin binary at path (with args) as a subprocess
// through the host's own launch code (clean environment, own process group,
// handshake, the same checks of what Describe reports), and returns it
// configured and described. The host's kernel sandbox is not applied: it
// needs the switchboard binary.
func Start(t testing.TB, path string, args []string, opts ...Option) *Plugin {
	t.Helper()
	o := resolve(t, opts)
	lp, err := launcher.Launch(context.Background(), launcher.Spec{
		Name: o.name, Path: path, Args: args, Settings: o.settingsJSON(t),
		ProjectDir: o.projectDir, DataDir: o.dataDir, ProtectedPaths: o.protected,
	}, hclog.New(&hclog.LoggerOptions{Name: "sdktest", Level: hclog.Warn, Output: os.Stderr}))
	if err != nil {
		t.Fatalf("sdktest: %v", err)
	}
	p := described(t, lp.Describe())
	p.PID, p.patterns, p.proto, p.client = lp.PID(), lp.PermissionPatterns, lp.Protocol(), o.client
	p.call = func(ctx context.Context, call *pluginv1.Call, onEvent protocol.ProgressFunc) (*pluginv1.Result, error) {
		return lp.CallEvents(ctx, call, onEvent)
	}
	p.stop = &stopper{fn: func() { _ = lp.Close(context.Background()) }}
	t.Cleanup(p.Stop)
	return p
}

func resolve(t testing.TB, opts []Option) options {
	o := options{name: "plugin"}
	for _, fn := range opts {
		fn(&o)
	}
	if o.projectDir == "" {
		o.projectDir = t.TempDir()
	}
	if o.dataDir == "" {
		o.dataDir = t.TempDir()
	}
	return o
}

func (o options) settingsJSON(t testing.TB) []byte {
	if o.settings == nil {
		return nil
	}
	b, err := json.Marshal(o.settings)
	if err != nil {
		t.Fatalf("sdktest: settings: %v", err)
	}
	return b
}

// connect configures and describes an in-process plugin the way the
// launcher does, with the same checks.
func connect(t testing.TB, client *plugin.Client, opts []Option) (*Plugin, *protocol.Client) {
	t.Helper()
	o := resolve(t, opts)
	rpc, err := client.Client()
	if err != nil {
		client.Kill()
		t.Fatalf("sdktest: starting plugin: %v", err)
	}
	raw, err := rpc.Dispense(protocol.PluginName)
	if err != nil {
		client.Kill()
		t.Fatalf("sdktest: dispensing plugin: %v", err)
	}
	pc := raw.(*protocol.Client)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pc.Configure(ctx, &pluginv1.ConfigureRequest{
		ServerName: o.name, ProjectDir: o.projectDir, DataDir: o.dataDir, SettingsJson: o.settingsJSON(t), HostVersion: "sdktest",
		ProtectedPaths: o.protected,
	}); err != nil {
		client.Kill()
		t.Fatalf("sdktest: Configure: %v", err)
	}
	info, err := pc.Describe(ctx)
	if err == nil {
		err = protocol.ValidateDescribe(info)
	}
	if err != nil {
		client.Kill()
		t.Fatalf("sdktest: Describe: %v", err)
	}
	p := described(t, protocol.DescriptionFromWire(info))
	p.call, p.patterns, p.proto, p.client = pc.CallEvents, pc.PermissionPattern, pc, o.client
	return p, pc
}

// PermissionPatterns returns the patterns the plugin gives for a call, as
// the host asks before it decides.
func (p *Plugin) PermissionPatterns(tool string, args any) []string {
	p.t.Helper()
	pats, err := p.patterns(context.Background(), tool, p.raw(args))
	if err != nil {
		p.t.Fatalf("sdktest: permission patterns for %s: %v", tool, err)
	}
	return pats
}

// Call calls tool with args (any JSON-marshallable value, or a string or
// []byte of raw JSON) and fails the test if the call did not run. An error
// result (IsError) is returned, not a failure.
func (p *Plugin) Call(tool string, args any) *Result {
	p.t.Helper()
	res, err := p.CallContext(context.Background(), tool, args, nil)
	if err != nil {
		p.t.Fatalf("sdktest: call %s: %v", tool, err)
	}
	return res
}

// CallContext calls tool and returns the protocol error, if any (compare
// with errors.Is against sdk.ErrInvalidArguments, sdk.ErrCancelled, …).
// onProgress, if set, asks for progress and receives it.
func (p *Plugin) CallContext(ctx context.Context, tool string, args any, onProgress func(Progress)) (*Result, error) {
	call := &pluginv1.Call{Tool: tool, Arguments: p.raw(args), WantProgress: onProgress != nil, Owner: p.owner, DeniedPatterns: p.denied}
	if p.client != nil {
		ctx = protocol.WithClientRequester(ctx, func(_ context.Context, method string, params []byte) ([]byte, error) {
			return p.client(method, params)
		})
	}
	res, err := p.call(ctx, call, func(ev *pluginv1.CallToolEvent) {
		if pr := ev.GetProgress(); pr != nil && onProgress != nil {
			onProgress(Progress{Progress: pr.GetProgress(), Total: pr.GetTotal(), Message: pr.GetMessage()})
		}
	})
	if err != nil {
		return nil, err
	}
	return result(res), nil
}

func (p *Plugin) raw(args any) []byte {
	switch a := args.(type) {
	case nil:
		return []byte("{}")
	case string:
		return []byte(a)
	case []byte:
		return a
	case json.RawMessage:
		return a
	}
	raw, err := json.Marshal(args)
	if err != nil {
		p.t.Fatalf("sdktest: arguments: %v", err)
	}
	return raw
}

// Tool returns the described tool called name, or nil.
func (p *Plugin) Tool(name string) *Tool {
	for i := range p.Tools {
		if p.Tools[i].Name == name {
			return &p.Tools[i]
		}
	}
	return nil
}

// described is a Plugin holding what info says.
func described(t testing.TB, info *toolcall.Description) *Plugin {
	p := &Plugin{
		t: t, Name: info.Name, Version: info.PluginVersion, SDKVersion: info.SDKVersion,
		Instructions: info.Instructions,
	}
	for _, v := range info.ProtocolVersions {
		p.ProtocolVersions = append(p.ProtocolVersions, int(v))
	}
	for _, r := range info.Resources {
		p.Resources = append(p.Resources, sdk.Resource{URI: r.URI, Name: r.Name, Title: r.Title, Description: r.Description, MIMEType: r.MIMEType, Size: r.Size})
	}
	for _, r := range info.ResourceTemplates {
		p.ResourceTemplates = append(p.ResourceTemplates, sdk.ResourceTemplate{URITemplate: r.URITemplate, Name: r.Name, Title: r.Title, Description: r.Description, MIMEType: r.MIMEType})
	}
	for _, wp := range info.Prompts {
		pr := sdk.Prompt{Name: wp.Name, Title: wp.Title, Description: wp.Description}
		for _, a := range wp.Arguments {
			pr.Arguments = append(pr.Arguments, sdk.PromptArgument{Name: a.Name, Title: a.Title, Description: a.Description, Required: a.Required})
		}
		p.Prompts = append(p.Prompts, pr)
	}
	if n := info.Sandbox; n != nil {
		p.Sandbox = &sdk.SandboxNeeds{Read: n.Read, Write: n.Write, Network: n.Network}
	}
	for _, wt := range info.Tools {
		tool := Tool{
			Name: wt.Name, Title: wt.Title, Description: wt.Description,
			InputSchema: wt.InputSchema, OutputSchema: wt.OutputSchema,
			Access:             sdk.AccessWrite,
			SkipDuplicateCheck: wt.SkipDuplicateCheck, CustomPermissionPattern: wt.CustomPermissionPattern,
			MaxDuration: wt.MaxDuration,
		}
		if wt.Access == toolcall.AccessRead {
			tool.Access = sdk.AccessRead
		}
		if a := wt.Annotations; a != nil {
			tool.ReadOnly = a.ReadOnlyHint != nil && *a.ReadOnlyHint
			tool.Destructive, tool.Idempotent, tool.OpenWorld = a.DestructiveHint, a.IdempotentHint, a.OpenWorldHint
		}
		p.Tools = append(p.Tools, tool)
	}
	return p
}

// result converts a wire result.
func result(r *pluginv1.Result) *Result {
	out := &Result{IsError: r.GetIsError(), Structured: r.GetStructuredContent()}
	for _, c := range r.GetContent() {
		switch k := c.GetKind().(type) {
		case *pluginv1.Content_Text:
			out.Content = append(out.Content, Content{Type: "text", Text: k.Text.GetText()})
		case *pluginv1.Content_Image:
			out.Content = append(out.Content, Content{Type: "image", Data: k.Image.GetData(), MimeType: k.Image.GetMimeType()})
		case *pluginv1.Content_Audio:
			out.Content = append(out.Content, Content{Type: "audio", Data: k.Audio.GetData(), MimeType: k.Audio.GetMimeType()})
		case *pluginv1.Content_ResourceLink:
			l := k.ResourceLink
			out.Content = append(out.Content, Content{Type: "resource_link", URI: l.GetUri(), Name: l.GetName(), Description: l.GetDescription(), MimeType: l.GetMimeType()})
		case *pluginv1.Content_Resource:
			e := k.Resource
			out.Content = append(out.Content, Content{Type: "resource", URI: e.GetUri(), MimeType: e.GetMimeType(), Text: e.GetText(), Data: e.GetBlob()})
		}
	}
	return out
}

// ReadResource reads a resource as the host would, failing the test on an
// error.
func (p *Plugin) ReadResource(uri string) []sdk.ResourceContents {
	p.t.Helper()
	c, err := p.ReadResourceContext(context.Background(), uri)
	if err != nil {
		p.t.Fatalf("sdktest: read %s: %v", uri, err)
	}
	return c
}

// ReadResourceContext reads a resource and returns the protocol error, if
// any (sdk.ErrUnknownTool for a URI the plugin does not have).
func (p *Plugin) ReadResourceContext(ctx context.Context, uri string) ([]sdk.ResourceContents, error) {
	resp, err := p.proto.ReadResource(ctx, &pluginv1.ReadResourceRequest{Uri: uri, Owner: p.owner})
	if err != nil {
		return nil, err
	}
	var out []sdk.ResourceContents
	for _, c := range resp.GetContents() {
		out = append(out, sdk.ResourceContents{URI: c.GetUri(), MIMEType: c.GetMimeType(), Text: c.GetText(), Blob: c.GetBlob()})
	}
	return out, nil
}

// GetPrompt renders a prompt, failing the test on an error.
func (p *Plugin) GetPrompt(name string, args map[string]string) *sdk.PromptResult {
	p.t.Helper()
	r, err := p.GetPromptContext(context.Background(), name, args)
	if err != nil {
		p.t.Fatalf("sdktest: prompt %s: %v", name, err)
	}
	return r
}

// GetPromptContext renders a prompt and returns the protocol error, if any
// (sdk.ErrInvalidArguments when a required argument is missing).
func (p *Plugin) GetPromptContext(ctx context.Context, name string, args map[string]string) (*sdk.PromptResult, error) {
	resp, err := p.proto.GetPrompt(ctx, &pluginv1.GetPromptRequest{Name: name, Arguments: args, Owner: p.owner})
	if err != nil {
		return nil, err
	}
	out := &sdk.PromptResult{Description: resp.GetDescription()}
	for _, m := range resp.GetMessages() {
		pm := sdk.PromptMessage{Role: m.GetRole()}
		switch k := m.GetContent().GetKind().(type) {
		case *pluginv1.Content_Text:
			pm.Text = k.Text.GetText()
		case *pluginv1.Content_Image:
			pm.Image, pm.MIMEType = k.Image.GetData(), k.Image.GetMimeType()
		case *pluginv1.Content_Audio:
			pm.Audio, pm.MIMEType = k.Audio.GetData(), k.Audio.GetMimeType()
		case *pluginv1.Content_Resource:
			e := k.Resource
			pm.Resource = &sdk.ResourceContents{URI: e.GetUri(), MIMEType: e.GetMimeType(), Text: e.GetText(), Blob: e.GetBlob()}
		}
		out.Messages = append(out.Messages, pm)
	}
	return out, nil
}

// Complete asks for completions of a prompt's argument (refType "prompt",
// ref the prompt's name) or a resource template's variable (refType
// "resource", ref the URI template), failing the test on an error.
func (p *Plugin) Complete(refType, ref, argument, value string, resolved map[string]string) []string {
	p.t.Helper()
	resp, err := p.proto.Complete(context.Background(), &pluginv1.CompleteRequest{RefType: refType, Ref: ref, Argument: argument, Value: value, Context: resolved})
	if err != nil {
		p.t.Fatalf("sdktest: complete %s %s: %v", ref, argument, err)
	}
	return resp.GetValues()
}

// Subscribe subscribes to updates of uri and returns a channel that gets
// the URI of every resources/updated notification the plugin sends, and ""
// for each list change, until the test ends.
func (p *Plugin) Subscribe(uri string) <-chan string {
	p.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan string, 64)
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var once sync.Once
		_ = p.proto.Notifications(ctx, func(n *pluginv1.Notification) {
			if n.GetKind() == nil { // the plugin listens now
				once.Do(func() { close(ready) })
				return
			}
			select {
			case out <- n.GetResourceUpdated().GetUri():
			default:
			}
		})
	}()
	p.t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-ready:
	case <-done:
		p.t.Fatalf("sdktest: the plugin does not send notifications")
	}
	if err := p.proto.Subscribe(ctx, &pluginv1.SubscribeRequest{Uri: uri}); err != nil {
		p.t.Fatalf("sdktest: subscribe %s: %v", uri, err)
	}
	return out
}

// Package sdktest starts a plugin for real and calls its tools, so a plugin
// author can test a plugin in one line:
//
//	res := sdktest.StartInProcess(t, myplugin.New()).Call("greet", map[string]any{"name": "Ada"})
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

	"github.com/switchboard-mcp/switchboard/internal/launcher"
	"github.com/switchboard-mcp/switchboard/internal/pluginv1"
	"github.com/switchboard-mcp/switchboard/internal/protocol"
	"github.com/switchboard-mcp/switchboard/sdk"
)

// ReattachWaitFunction is the go-plugin goroutine that in-process test mode
// leaves behind, for goleak.IgnoreTopFunction.
const ReattachWaitFunction = "github.com/hashicorp/go-plugin/internal/cmdrunner.pidWait"

// Plugin is a started plugin.
type Plugin struct {
	t testing.TB
	// Info is the plugin's answer to Describe.
	Info *pluginv1.DescribeResponse
	// PID is the plugin's process id (0 in process).
	PID int

	call     func(ctx context.Context, call *pluginv1.Call, onEvent protocol.ProgressFunc) (*pluginv1.Result, error)
	patterns func(ctx context.Context, tool string, args []byte) ([]string, error)
	stopOnce sync.Once
	stop     func()
}

// Stop stops the plugin as the host would (closing the connection, which
// asks it to shut down gracefully). The test's cleanup calls it too; it may
// be called more than once.
func (p *Plugin) Stop() {
	p.stopOnce.Do(p.stop)
}

// Option adjusts how a plugin is started.
type Option func(*options)

type options struct {
	settings   any
	projectDir string
	dataDir    string
	name       string
}

// WithSettings sends v (marshalled to JSON) as the plugin's settings.
func WithSettings(v any) Option { return func(o *options) { o.settings = v } }

// WithProjectDir sets the project directory (default: a new temp dir).
func WithProjectDir(dir string) Option { return func(o *options) { o.projectDir = dir } }

// WithServerName sets the name the plugin is configured under.
func WithServerName(name string) Option { return func(o *options) { o.name = name } }

// StartInProcess serves h in-process over real gRPC and returns it
// configured and described.
//
// go-plugin's test mode leaves one goroutine polling the test's own pid
// (cmdrunner.pidWait); tests using goleak should ignore it with
// goleak.IgnoreTopFunction(sdktest.ReattachWaitFunction).
func StartInProcess(t testing.TB, h protocol.Handler, opts ...Option) *Plugin {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	reattach := make(chan *plugin.ReattachConfig, 1)
	closed := make(chan struct{})
	go sdk.ServeHandler(h, sdk.WithTestConfig(&plugin.ServeTestConfig{
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
		GRPCDialOptions:  protocol.GRPCDialOptions(),
		Logger:           hclog.NewNullLogger(),
	})
	p, pc := connect(t, client, opts)
	p.stop = func() {
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
	}
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
		ProjectDir: o.projectDir, DataDir: o.dataDir,
	}, hclog.New(&hclog.LoggerOptions{Name: "sdktest", Level: hclog.Warn, Output: os.Stderr}))
	if err != nil {
		t.Fatalf("sdktest: %v", err)
	}
	p := &Plugin{t: t, Info: lp.Describe(), PID: lp.PID(), patterns: lp.PermissionPatterns}
	p.call = func(ctx context.Context, call *pluginv1.Call, onEvent protocol.ProgressFunc) (*pluginv1.Result, error) {
		return lp.CallEvents(ctx, call, onEvent)
	}
	p.stop = func() { _ = lp.Close(context.Background()) }
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
	return &Plugin{t: t, Info: info, call: pc.CallEvents, patterns: pc.PermissionPattern}, pc
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
func (p *Plugin) Call(tool string, args any) *pluginv1.Result {
	p.t.Helper()
	res, err := p.CallContext(context.Background(), tool, args, nil)
	if err != nil {
		p.t.Fatalf("sdktest: call %s: %v", tool, err)
	}
	return res
}

// CallContext calls tool and returns the protocol error, if any; onEvent
// receives progress (requested when onEvent is set) and log events.
func (p *Plugin) CallContext(ctx context.Context, tool string, args any, onEvent protocol.ProgressFunc) (*pluginv1.Result, error) {
	return p.call(ctx, &pluginv1.Call{Tool: tool, Arguments: p.raw(args), WantProgress: onEvent != nil}, onEvent)
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
func (p *Plugin) Tool(name string) *pluginv1.Tool {
	for _, t := range p.Info.GetTools() {
		if t.GetName() == name {
			return t
		}
	}
	return nil
}

// Text returns the text blocks of a result joined by newlines.
func Text(r *pluginv1.Result) string {
	var parts []string
	for _, c := range r.GetContent() {
		if t := c.GetText(); t != nil {
			parts = append(parts, t.GetText())
		}
	}
	return strings.Join(parts, "\n")
}

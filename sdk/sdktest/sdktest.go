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
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"

	"github.com/switchboard-mcp/switchboard/sdk"
	"github.com/switchboard-mcp/switchboard/sdk/pluginv1"
	"github.com/switchboard-mcp/switchboard/sdk/protocol"
)

// ReattachWaitFunction is the go-plugin goroutine that in-process test mode
// leaves behind, for goleak.IgnoreTopFunction.
const ReattachWaitFunction = "github.com/hashicorp/go-plugin/internal/cmdrunner.pidWait"

// Plugin is a started plugin.
type Plugin struct {
	t testing.TB
	// Client is the host-side protocol client, for calls the helpers below
	// do not cover.
	Client *protocol.Client
	// Info is the plugin's answer to Describe.
	Info *pluginv1.DescribeResponse
	// PID is the plugin's process id (0 in process).
	PID int

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
	p := connect(t, client, nil, nil, opts)
	p.stop = func() {
		_ = p.Client.Close()
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

// Start launches the plugin binary at path (with args) as a subprocess, as
// the host would, and returns it configured and described.
func Start(t testing.TB, path string, args []string, opts ...Option) *Plugin {
	t.Helper()
	cmd := exec.Command(path, args...)
	// Calls travel over the call channel, as they do under the host.
	channel, child, err := protocol.AttachCallChannel(cmd)
	if err != nil {
		t.Fatalf("sdktest: %v", err)
	}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  protocol.Handshake,
		VersionedPlugins: protocol.PluginSets(nil, protocol.SupportedVersions),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		GRPCDialOptions:  protocol.GRPCDialOptions(),
		StartTimeout:     30 * time.Second,
		Logger:           hclog.New(&hclog.LoggerOptions{Name: "sdktest", Level: hclog.Warn, Output: os.Stderr}),
	})
	p := connect(t, client, channel, child, opts)
	if rc := client.ReattachConfig(); rc != nil {
		p.PID = rc.Pid
	}
	p.stop = func() {
		_ = p.Client.Close()
		client.Kill()
	}
	t.Cleanup(p.Stop)
	return p
}

// connect starts the plugin (if client launches one), offers it the call
// channel (if any) and configures and describes it.
func connect(t testing.TB, client *plugin.Client, channel net.Conn, child *os.File, opts []Option) *Plugin {
	t.Helper()
	if channel != nil {
		defer func() {
			if channel != nil {
				_ = channel.Close()
			}
		}()
	}
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
	rpc, err := client.Client()
	if child != nil {
		_ = child.Close() // the plugin holds its own copy now
	}
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
	if channel != nil {
		pc.OfferChannel(channel)
		channel = nil
	}
	var settings []byte
	if o.settings != nil {
		if settings, err = json.Marshal(o.settings); err != nil {
			t.Fatalf("sdktest: settings: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pc.Configure(ctx, &pluginv1.ConfigureRequest{
		ServerName: o.name, ProjectDir: o.projectDir, DataDir: o.dataDir, SettingsJson: settings, HostVersion: "sdktest",
	}); err != nil {
		client.Kill()
		t.Fatalf("sdktest: Configure: %v", err)
	}
	info, err := pc.Describe(ctx)
	if err != nil {
		client.Kill()
		t.Fatalf("sdktest: Describe: %v", err)
	}
	return &Plugin{t: t, Client: pc, Info: info}
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
	var raw []byte
	switch a := args.(type) {
	case nil:
		raw = []byte("{}")
	case string:
		raw = []byte(a)
	case []byte:
		raw = a
	case json.RawMessage:
		raw = a
	default:
		var err error
		if raw, err = json.Marshal(a); err != nil {
			p.t.Fatalf("sdktest: arguments: %v", err)
		}
	}
	return p.Client.Call(ctx, tool, raw, onEvent != nil, onEvent)
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

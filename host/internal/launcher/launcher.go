// Package launcher starts plugin subprocesses with go-plugin and speaks the
// Switchboard protocol to them.
//
// Launch runs the binary (after checking its pinned SHA-256, if any) in its
// own process group with a clean environment, negotiates the highest
// protocol version both sides speak, configures the plugin, and asks it to
// describe itself. The returned *Plugin carries calls until Close, which
// stops the plugin gracefully, then with SIGTERM, then SIGKILL of its whole
// process group, every wait bounded.
package launcher

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"

	"github.com/switchboard-mcp/switchboard/sdk"
	"github.com/switchboard-mcp/switchboard/sdk/pluginv1"
	"github.com/switchboard-mcp/switchboard/sdk/protocol"
)

// Errors callers may check with errors.Is / errors.As.
var (
	// ErrChecksum means the binary's SHA-256 differs from its pin.
	ErrChecksum = errors.New("launcher: plugin binary does not match its sha256 pin")
	// ErrStart means the process could not be started or did not complete
	// the handshake in time.
	ErrStart = errors.New("launcher: plugin did not start")
)

// ProtocolMismatchError means the plugin and the host share no protocol
// version.
type ProtocolMismatchError struct {
	Plugin         string
	Path           string
	PluginVersions []int
	HostVersions   []int
}

func (e *ProtocolMismatchError) Error() string {
	advice := "upgrade the host"
	if len(e.PluginVersions) > 0 && slices.Max(e.PluginVersions) < slices.Min(e.HostVersions) {
		advice = "rebuild the plugin against a newer Switchboard SDK"
	}
	return fmt.Sprintf("plugin %s (%s) speaks protocol %s; this host speaks %s: %s",
		e.Plugin, e.Path, protocol.FormatVersions(e.PluginVersions), protocol.FormatVersions(e.HostVersions), advice)
}

// Spec says what to launch.
type Spec struct {
	// Name is the server name the plugin is registered under.
	Name string
	// Path and Args are the command to run.
	Path string
	Args []string
	// Env adds variables to the plugin's clean environment.
	Env map[string]string
	// SHA256, if set, pins the binary (64 hex digits).
	SHA256 string
	// Settings is sent to the plugin's Configure as JSON.
	Settings []byte
	// ProjectDir and DataDir are sent to Configure.
	ProjectDir string
	DataDir    string
	// HostDataDir is the host's own state directory, which plugins must
	// leave alone (sent to Configure).
	HostDataDir string
	// StartTimeout bounds the handshake, Configure and Describe together.
	StartTimeout time.Duration
	// KillGrace is how long each shutdown step waits (default 2s).
	KillGrace time.Duration
	// Versions overrides the protocol versions the host offers (tests).
	Versions []int
	// NoCallChannel carries calls on the gRPC CallTool stream instead of
	// offering the plugin a call channel (benchmarks, debugging; the
	// environment variable SWITCHBOARD_CALL_CHANNEL=off does the same).
	NoCallChannel bool
}

// EnvCallChannel set to "off" makes every launch behave as NoCallChannel.
const EnvCallChannel = "SWITCHBOARD_CALL_CHANNEL"

// EnvAllowlist lists the host variables a plugin inherits; everything else
// (tokens, keys) stays in the host.
var EnvAllowlist = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "TMPDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"}

// HostVersion is reported to plugins in Configure.
var HostVersion = "dev"

// Plugin is a running plugin.
type Plugin struct {
	spec    Spec
	log     hclog.Logger
	client  *plugin.Client
	runner  *groupRunner
	proto   *protocol.Client
	info    *pluginv1.DescribeResponse
	version int

	closeOnce sync.Once
}

var incompatibleRE = regexp.MustCompile(`Plugin version: (\d+)`)

// Launch starts and describes the plugin. log is the host's logger; the
// plugin's own log lines appear under plugin.<name>.
func Launch(ctx context.Context, spec Spec, log hclog.Logger) (p *Plugin, err error) {
	if spec.StartTimeout <= 0 {
		spec.StartTimeout = 30 * time.Second
	}
	if spec.KillGrace <= 0 {
		spec.KillGrace = 2 * time.Second
	}
	versions := spec.Versions
	if len(versions) == 0 {
		versions = protocol.SupportedVersions
	}
	if spec.SHA256 != "" {
		if _, err := hex.DecodeString(spec.SHA256); err != nil || len(spec.SHA256) != 2*sha256.Size {
			return nil, fmt.Errorf("launcher: plugin %s: sha256 pin %q is not 64 hex digits", spec.Name, spec.SHA256)
		}
	}
	env := cleanEnv(spec.Env, log)

	pluginLog := log.Named("plugin")
	offerChannel := !spec.NoCallChannel && os.Getenv(EnvCallChannel) != "off"
	var (
		gr      *groupRunner
		channel net.Conn // the host's end of the call channel
	)
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:     protocol.Handshake,
		VersionedPlugins:    protocol.PluginSets(nil, versions),
		SkipHostEnv:         true,
		AutoMTLS:            true,
		AllowedProtocols:    []plugin.Protocol{plugin.ProtocolGRPC},
		GRPCDialOptions:     protocol.GRPCDialOptions(),
		StartTimeout:        spec.StartTimeout,
		Logger:              pluginLog,
		PluginLogBufferSize: 1 << 20,
		SyncStdout:          pluginLog.Named(spec.Name).StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Info}),
		SyncStderr:          pluginLog.Named(spec.Name).StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn}),
		// go-plugin hands RunnerFunc a placeholder command carrying only
		// its own variables (cookie, certificate, socket directory); the
		// real command is built here.
		RunnerFunc: func(_ hclog.Logger, placeholder *exec.Cmd, _ string) (runner.Runner, error) {
			// The pin is checked right before exec, on every start.
			if spec.SHA256 != "" {
				actual, err := FileSHA256(spec.Path)
				if err != nil {
					return nil, fmt.Errorf("%w: cannot read %s: %v", ErrChecksum, spec.Path, err)
				}
				if actual != spec.SHA256 {
					return nil, fmt.Errorf("%w: plugin %s (%s) has sha256 %s, but the config pins %s; if you rebuilt or upgraded it on purpose, update sha256 in its plugin block",
						ErrChecksum, spec.Name, spec.Path, actual, spec.SHA256)
				}
			}
			cmd := exec.Command(spec.Path, spec.Args...)
			cmd.Env = append(env, placeholder.Env...)
			var child *os.File
			if offerChannel {
				var err error
				if channel, child, err = protocol.AttachCallChannel(cmd); err != nil {
					return nil, err
				}
			}
			var err error
			if gr, err = newGroupRunner(spec.Name, cmd, spec.KillGrace, child); err != nil && child != nil {
				_ = child.Close()
			}
			return gr, err
		},
	})
	p = &Plugin{spec: spec, log: log.Named(spec.Name), client: client}
	defer func() {
		if err != nil {
			if channel != nil {
				_ = channel.Close()
			}
			client.Kill()
			if gr != nil {
				gr.sweep()
			}
		}
	}()

	rpc, err := client.Client()
	if err != nil {
		return nil, p.startError(err, versions)
	}
	p.runner = gr
	p.version = client.NegotiatedVersion()
	raw, err := rpc.Dispense(protocol.PluginName)
	if err != nil {
		return nil, fmt.Errorf("%w: plugin %s: %v", ErrStart, spec.Name, err)
	}
	pc, ok := raw.(*protocol.Client)
	if !ok {
		return nil, fmt.Errorf("%w: plugin %s: unexpected client type %T", ErrStart, spec.Name, raw)
	}
	p.proto = pc
	if channel != nil {
		pc.OfferChannel(channel) // the client owns it from here
		channel = nil
	}

	cctx, cancel := context.WithTimeout(ctx, spec.StartTimeout)
	defer cancel()
	if err := pc.Configure(cctx, &pluginv1.ConfigureRequest{
		ServerName:   spec.Name,
		ProjectDir:   spec.ProjectDir,
		DataDir:      spec.DataDir,
		SettingsJson: spec.Settings,
		HostVersion:  HostVersion,
		HostDataDir:  spec.HostDataDir,
	}); err != nil {
		return nil, fmt.Errorf("launcher: plugin %s refused its configuration: %v", spec.Name, err)
	}
	info, err := pc.Describe(cctx)
	if err != nil {
		return nil, fmt.Errorf("launcher: plugin %s: Describe failed: %v", spec.Name, err)
	}
	if err := validateDescribe(info); err != nil {
		return nil, fmt.Errorf("launcher: plugin %s (%s): %w", spec.Name, spec.Path, err)
	}
	p.info = info
	p.log.Debug("plugin started", "pid", p.PID(), "protocol", p.version, "version", info.GetPluginVersion(), "tools", len(info.GetTools()), "calls", pc.Transport())
	return p, nil
}

func (p *Plugin) startError(err error, versions []int) error {
	msg := err.Error()
	if m := incompatibleRE.FindStringSubmatch(msg); m != nil {
		v, _ := strconv.Atoi(m[1])
		return &ProtocolMismatchError{Plugin: p.spec.Name, Path: p.spec.Path, PluginVersions: []int{v}, HostVersions: versions}
	}
	if errors.Is(err, ErrChecksum) {
		return err
	}
	if strings.Contains(msg, "timeout while waiting for plugin to start") {
		return fmt.Errorf("%w: plugin %s (%s) did not complete the handshake within %s; raise start_timeout if it is just slow", ErrStart, p.spec.Name, p.spec.Path, p.spec.StartTimeout)
	}
	return fmt.Errorf("%w: plugin %s (%s): %v", ErrStart, p.spec.Name, p.spec.Path, err)
}

var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// validateDescribe refuses a description the host cannot serve faithfully.
func validateDescribe(info *pluginv1.DescribeResponse) error {
	seen := map[string]bool{}
	for _, t := range info.GetTools() {
		if !toolNameRE.MatchString(t.GetName()) {
			return fmt.Errorf("tool name %q is invalid: use 1-128 of [A-Za-z0-9_.-]", t.GetName())
		}
		if seen[t.GetName()] {
			return fmt.Errorf("tool %q is described twice", t.GetName())
		}
		seen[t.GetName()] = true
		var obj map[string]any
		if len(t.GetInputSchema()) == 0 || json.Unmarshal(t.GetInputSchema(), &obj) != nil {
			return fmt.Errorf("tool %q: input schema is not a JSON object", t.GetName())
		}
		if len(t.GetOutputSchema()) > 0 && json.Unmarshal(t.GetOutputSchema(), &obj) != nil {
			return fmt.Errorf("tool %q: output schema is not a JSON object", t.GetName())
		}
	}
	return nil
}

func cleanEnv(extra map[string]string, log hclog.Logger) []string {
	var env []string
	for _, k := range EnvAllowlist {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	level := "info"
	if log.IsTrace() {
		level = "trace"
	} else if log.IsDebug() {
		level = "debug"
	}
	env = append(env, sdk.EnvLogLevel+"="+level)
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// FileSHA256 returns the hex SHA-256 of a file, as sha256 pins are written.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Name returns the server name.
func (p *Plugin) Name() string { return p.spec.Name }

// Describe returns what the plugin reported at start.
func (p *Plugin) Describe() *pluginv1.DescribeResponse { return p.info }

// ProtocolVersion returns the negotiated protocol version.
func (p *Plugin) ProtocolVersion() int { return p.version }

// PID returns the plugin's process id.
func (p *Plugin) PID() int {
	if p.runner == nil {
		return 0
	}
	return p.runner.pid
}

// Transport says what carries the plugin's calls: protocol.TransportChannel
// or protocol.TransportGRPC.
func (p *Plugin) Transport() string {
	if t := p.proto.Transport(); t != "" {
		return t
	}
	return protocol.TransportGRPC
}

// Exited reports whether the plugin process has ended.
func (p *Plugin) Exited() bool { return p.client.Exited() }

// Call runs one tool call. onEvent gets progress (when wantProgress) and
// the plugin's log events are logged here.
func (p *Plugin) Call(ctx context.Context, tool string, args []byte, wantProgress bool, onProgress func(*pluginv1.Progress)) (*pluginv1.Result, error) {
	res, err := p.proto.Call(ctx, tool, args, wantProgress, func(ev *pluginv1.CallToolEvent) {
		if pr := ev.GetProgress(); pr != nil && onProgress != nil {
			onProgress(pr)
		}
		if l := ev.GetLog(); l != nil {
			p.logEvent(tool, l)
		}
	})
	if err != nil && errors.Is(err, protocol.ErrUnavailable) {
		// Give go-plugin a moment to notice the exit, for a clearer message.
		for i := 0; i < 25 && !p.client.Exited(); i++ {
			time.Sleep(10 * time.Millisecond)
		}
		if p.client.Exited() {
			return nil, protocol.Errorf(protocol.CodeUnavailable, "plugin %s exited during the call to %s", p.spec.Name, tool)
		}
	}
	return res, err
}

func (p *Plugin) logEvent(tool string, l *pluginv1.Log) {
	var kv []any
	if len(l.GetFieldsJson()) > 0 {
		var m map[string]any
		if json.Unmarshal(l.GetFieldsJson(), &m) == nil {
			for k, v := range m {
				kv = append(kv, k, v)
			}
		}
	}
	kv = append(kv, "tool", tool)
	level := hclog.Info
	switch l.GetLevel() {
	case pluginv1.LogLevel_LOG_LEVEL_TRACE:
		level = hclog.Trace
	case pluginv1.LogLevel_LOG_LEVEL_DEBUG:
		level = hclog.Debug
	case pluginv1.LogLevel_LOG_LEVEL_WARN:
		level = hclog.Warn
	case pluginv1.LogLevel_LOG_LEVEL_ERROR:
		level = hclog.Error
	}
	p.log.Log(level, l.GetMessage(), kv...)
}

// PermissionPatterns asks the plugin for a call's permission patterns.
func (p *Plugin) PermissionPatterns(ctx context.Context, tool string, args []byte) ([]string, error) {
	return p.proto.PermissionPattern(ctx, tool, args)
}

// Close stops the plugin: it closes the call stream (cancelling calls still
// on it), asks for a graceful shutdown and waits up to KillGrace for the
// process to exit, then sends SIGTERM and, after KillGrace, SIGKILL to its
// process group, and finally sweeps the group for children that outlived
// the plugin. A plugin that no longer answers (hung, stopped) cannot hold
// Close up: go-plugin's own Kill may block on its shutdown RPC, so it only
// gets the graceful window. Close may be called more than once.
func (p *Plugin) Close(ctx context.Context) error {
	p.closeOnce.Do(func() {
		if p.proto != nil {
			_ = p.proto.Close()
		}
		killed := make(chan struct{})
		go func() {
			p.client.Kill()
			close(killed)
		}()
		if p.runner == nil {
			select {
			case <-killed:
			case <-ctx.Done():
			case <-time.After(4 * p.spec.KillGrace):
			}
			return
		}
		select {
		case <-p.runner.exited:
		case <-ctx.Done():
		case <-time.After(p.spec.KillGrace):
			p.log.Warn("plugin did not stop gracefully; sending SIGTERM, then SIGKILL", "pid", p.runner.pid)
			_ = p.runner.Kill(ctx)
		}
		p.runner.sweep()
		select {
		case <-killed:
		case <-time.After(p.spec.KillGrace):
			p.log.Debug("go-plugin's shutdown did not return in time", "pid", p.runner.pid)
		}
	})
	return nil
}

// Rename changes the server name a plugin is registered under (a
// discovered plugin takes the name it reports). Call it before the plugin
// is registered.
func (p *Plugin) Rename(name string) {
	p.spec.Name = name
	p.log = p.log.ResetNamed("switchboard." + name)
}

// Done is closed when the plugin process exits.
func (p *Plugin) Done() <-chan struct{} {
	if p.runner == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return p.runner.exited
}

// Ping checks the plugin's gRPC health service, bounded by ctx.
func (p *Plugin) Ping(ctx context.Context) error {
	rpc, err := p.client.Client()
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- rpc.Ping() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("plugin %s did not answer its health check: %w", p.spec.Name, ctx.Err())
	}
}

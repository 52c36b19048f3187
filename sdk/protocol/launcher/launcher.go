// Package launcher starts plugin subprocesses with go-plugin and speaks the
// Switchboard protocol to them.
//
// Launch runs the binary (after checking its pinned SHA-256, if any) in its
// own process group with a clean environment, negotiates the highest
// protocol version both sides speak, configures the plugin, and asks it to
// describe itself. The returned *Plugin carries calls until Close, which
// stops the plugin gracefully, then with SIGTERM, then SIGKILL of its whole
// process group, every wait bounded.
//
// Host plumbing, not a plugin author's API: this package belongs to the
// wire protocol and launch core that the SDK and the host share (see
// package [github.com/switchboard-mcp/switchboard/sdk/protocol]). It is
// exported only because the host is another module; its Go API may change
// in any release, and the only compatibility promise is the protocol
// version. Plugins use package sdk and sdktest.
package launcher

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/caller"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginserve"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/quietio"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
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
	// SHA256, if set, pins the binary (64 hex digits). The launcher hashes
	// an open descriptor of the file and executes that same descriptor, so
	// a file swapped in after the check never runs.
	SHA256 string
	// PinnedBy names the file the SHA256 pin comes from when it is not
	// the plugin's block (the lock file); a mismatch then tells the
	// operator to re-lock rather than edit the block.
	PinnedBy string
	// Hasher, if set, returns the SHA-256 (hex) of the opened binary in
	// place of reading it whole: a cache of hashes keyed by the file's
	// identity (device, inode, size, mtime, ctime), so that a pinned
	// binary is not read at every start. Nil: the launcher hashes it.
	Hasher func(*os.File) (string, error)
	// Settings is sent to the plugin's Configure as JSON.
	Settings []byte
	// ProjectDir and DataDir are sent to Configure.
	ProjectDir string
	DataDir    string
	// HostDataDir is the host's own state directory, which plugins must
	// leave alone (sent to Configure).
	HostDataDir string
	// ProtectedPaths are the host's control plane, which no tool may touch
	// (sent to Configure).
	ProtectedPaths []string
	// StartTimeout bounds the handshake, Configure and Describe together.
	StartTimeout time.Duration
	// KillGrace is how long each shutdown step waits (default 2s).
	KillGrace time.Duration
	// Versions overrides the protocol versions the host offers (tests).
	Versions []int
	// Sandbox, if set, confines the plugin process and everything it
	// starts. Without one the plugin runs with the host's privileges.
	Sandbox Sandbox
	// HostService, if set, is served to this plugin alone over go-plugin's
	// broker (see HostService); nil for every plugin but the built-in
	// `switchboard` server.
	HostService HostService
	// Reattach, if set, uses a plugin started by hand in debug mode
	// instead of starting one: no process is started, checked, sandboxed
	// or stopped by the launcher (Path, SHA256 and Sandbox are unused).
	Reattach *protocol.Reattach
}

// Sandbox confines a plugin process. The launcher hands Wrap the command it
// would run (the plugin's path, arguments, clean environment and process
// attributes, and any descriptors in ExtraFiles) and go-plugin's socket
// folder, which the plugin must be able to write; Wrap rewrites cmd in place
// to run the same program confined, and returns the Confinement of this one
// start (nil when it changed nothing). Wrap is called once per start, right
// before the process starts. A Wrap that sets cmd.SysProcAttr must start
// from sysproc.Attr(syscall.SIGTERM): the plugin's own process group and
// parent-death signal are what Close and a dying host rely on.
type Sandbox interface {
	Wrap(cmd *exec.Cmd, socketDir string) (Confinement, error)
}

// NeedsChecker is a Sandbox that can say which of a plugin's declared needs
// (Description.Sandbox) it does not grant; the launcher logs them and
// Plugin.Unmet reports them.
type NeedsChecker interface {
	Unmet(needs *toolcall.SandboxNeeds) []string
}

// Offline is a Confinement that may say its plugin has no network: the
// plugin's handshake must then name a Unix socket in its socket folder.
// A TCP address from a plugin that cannot listen on the host's loopback
// would only have the host connect, from its own network, to whatever
// listens at the port the plugin chose (red team round 9).
type Offline interface {
	Offline() bool
}

// Confinement is one confined start of a plugin.
type Confinement interface {
	// Started is called once the process runs, before the handshake; an
	// error stops the process and fails the launch.
	Started(pid int) error
	// Stopped is called once the process has exited. It releases what
	// the start held and returns why the sandbox ended the process ("" if
	// it did not), e.g. "it reached its memory limit of 256 MiB".
	Stopped() string
}

// ProcessStarter is a Confinement that starts its process itself (the
// host's sandbox has a small process of its own start its helpers): the
// runner then starts and waits for the process through it, not through
// exec.Cmd. cmd's standard streams are files (the runner's pipes) or nil.
type ProcessStarter interface {
	StartProcess(cmd *exec.Cmd) (Process, error)
}

// Process is a process a ProcessStarter started.
type Process interface {
	Pid() int
	// Wait waits for the process to exit and reports it as exec.Cmd.Wait
	// does (nil for exit status 0).
	Wait() error
}

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
	info    atomic.Pointer[toolcall.Description] // replaced when the plugin's lists change
	version int
	unmet   []string
	stderr  stderrWatch // the plugin's raw stderr: its tail, and its versions on a mismatch
	// reattached is the pid of a plugin started by hand (Spec.Reattach);
	// reattachedDone is closed when that process is gone.
	reattached     int
	reattachedDone chan struct{}
	unwatch        chan struct{} // closed by Close
	hostID         uint32        // the broker id of the host service, 0 without one
	hostAddr       atomic.Value  // string: where the host service answered the plugin

	closeOnce sync.Once
}

var incompatibleRE = regexp.MustCompile(`Plugin version: (\d+)`)

// Launch starts the plugin, configures it and asks it to describe itself.
// log is the host's logger; the plugin's own log lines appear under
// plugin.<name>. On any failure the process is gone when Launch returns.
func Launch(ctx context.Context, spec Spec, log hclog.Logger) (_ *Plugin, err error) {
	spec, err = spec.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Plugin{spec: spec, log: log.Named(spec.Name)}
	defer func() {
		if err != nil {
			p.kill()
		}
	}()
	if spec.DataDir != "" {
		// The plugin's own state folder exists before it is told about it
		// (sdktest makes one too: a plugin that passed its tests must not
		// fail its first real call on a missing folder).
		if err := os.MkdirAll(spec.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("%w: plugin %s: its data directory %s: %v", ErrStart, spec.Name, spec.DataDir, err)
		}
	}
	if err := p.start(log); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, spec.StartTimeout)
	defer cancel()
	if err := p.configure(cctx); err != nil {
		return nil, err
	}
	if err := p.describe(cctx); err != nil {
		return nil, err
	}
	p.log.Debug("plugin started", "pid", p.PID(), "protocol", p.version, "version", p.Describe().PluginVersion, "tools", len(p.Describe().Tools))
	return p, nil
}

// withDefaults fills in the defaults and checks what can be checked before
// anything runs.
func (s Spec) withDefaults() (Spec, error) {
	if s.StartTimeout <= 0 {
		s.StartTimeout = 30 * time.Second
	}
	if s.KillGrace <= 0 {
		s.KillGrace = 2 * time.Second
	}
	if len(s.Versions) == 0 {
		s.Versions = protocol.SupportedVersions
	}
	if s.SHA256 != "" {
		if _, err := hex.DecodeString(s.SHA256); err != nil || len(s.SHA256) != 2*sha256.Size {
			return s, fmt.Errorf("launcher: plugin %s: sha256 pin %q is not 64 hex digits", s.Name, s.SHA256)
		}
	}
	return s, nil
}

// start runs the process through go-plugin, completes the handshake and
// dispenses the protocol client.
func (p *Plugin) start(log hclog.Logger) error {
	spec := p.spec
	env := cleanEnv(spec.Env, log)
	pluginLog := newLimitedLogger(log.Named("plugin"))
	if spec.Reattach != nil {
		return p.reattach(pluginLog)
	}
	tlsConf, hostCert, err := hostTLS()
	if err != nil {
		return fmt.Errorf("%w: plugin %s: %v", ErrStart, spec.Name, err)
	}
	env = append(env, envClientCert+"="+hostCert)
	p.client = plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  protocol.Handshake,
		VersionedPlugins: protocol.PluginSets(nil, spec.Versions),
		SkipHostEnv:      true,
		TLSConfig:        tlsConf,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		// The last transport credentials given win over go-plugin's own.
		GRPCDialOptions:  append(protocol.GRPCDialOptions(), grpc.WithTransportCredentials(quietio.Creds(lateTLS{tlsConf}))),
		StartTimeout:     spec.StartTimeout,
		UnixSocketConfig: &plugin.UnixSocketConfig{TempDir: TempDir()},
		Logger:           pluginLog,
		Stderr:           &p.stderr,
		SyncStdout:       pluginLog.Named(spec.Name).StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Info}),
		SyncStderr:       pluginLog.Named(spec.Name).StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn}),
		// go-plugin hands RunnerFunc a placeholder command carrying only
		// its own variables (cookie, certificate, socket directory); the
		// real command is built here.
		RunnerFunc: func(_ hclog.Logger, placeholder *exec.Cmd, socketDir string) (runner.Runner, error) {
			cmd, err := p.command(append(env, placeholder.Env...))
			if err != nil {
				return nil, err
			}
			var conf Confinement
			if spec.Sandbox != nil {
				if conf, err = spec.Sandbox.Wrap(cmd, socketDir); err != nil {
					closeExtra(cmd)
					return nil, fmt.Errorf("%w: plugin %s: %v", ErrStart, spec.Name, err)
				}
			}
			if p.runner, err = newGroupRunner(spec.Name, spec.Path, cmd, spec.KillGrace, conf, socketDir); err != nil {
				closeExtra(cmd)
				if conf != nil {
					conf.Stopped()
				}
			}
			return p.runner, err
		},
	})
	rpc, err := p.client.Client()
	if err != nil {
		return p.startError(err, spec.Versions)
	}
	p.version = p.client.NegotiatedVersion()
	return p.dispense(rpc)
}

// reattach connects to a plugin started by hand (Spec.Reattach).
func (p *Plugin) reattach(log hclog.Logger) error {
	spec := p.spec
	rc, err := spec.Reattach.Config()
	if err != nil {
		return fmt.Errorf("%w: plugin %s: %v", ErrStart, spec.Name, err)
	}
	if !slices.Contains(spec.Versions, rc.ProtocolVersion) {
		return &ProtocolMismatchError{Plugin: spec.Name, Path: "pid " + strconv.Itoa(rc.Pid), PluginVersions: []int{rc.ProtocolVersion}, HostVersions: spec.Versions}
	}
	p.client = plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  protocol.Handshake,
		Plugins:          protocol.PluginSets(nil, []int{rc.ProtocolVersion})[rc.ProtocolVersion],
		Reattach:         rc,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		GRPCDialOptions:  protocol.GRPCDialOptions(),
		Logger:           log,
	})
	rpc, err := p.client.Client()
	if err != nil {
		return fmt.Errorf("%w: plugin %s: reattaching to pid %d at %s: %v (is it still running in debug mode?)", ErrStart, spec.Name, rc.Pid, rc.Addr, err)
	}
	p.version, p.reattached = rc.ProtocolVersion, rc.Pid
	p.reattachedDone = make(chan struct{})
	p.unwatch = make(chan struct{})
	go func() {
		// Not our child: watch for its end (until the host lets go).
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for alive(rc.Pid) {
			select {
			case <-t.C:
			case <-p.unwatch:
				return
			}
		}
		close(p.reattachedDone)
	}()
	return p.dispense(rpc)
}

// dispense takes the protocol client from go-plugin's connection.
func (p *Plugin) dispense(rpc plugin.ClientProtocol) error {
	spec := p.spec
	raw, err := rpc.Dispense(protocol.PluginName)
	if err != nil {
		return fmt.Errorf("%w: plugin %s: %v", ErrStart, spec.Name, err)
	}
	pc, ok := raw.(*protocol.Client)
	if !ok {
		return fmt.Errorf("%w: plugin %s: unexpected client type %T", ErrStart, spec.Name, raw)
	}
	// The log events of its calls are limited as its stderr is (red team,
	// 2026-12-07: 100 MiB messages in a loop wrote 2.7 GB to the host's
	// stderr in 10 s, and held the host once nothing read its stderr).
	pc.Log = newLimited(p.log, "plugin log events")
	p.proto = pc
	return nil
}

// command builds the plugin's command. A pinned binary is opened once,
// hashed through that descriptor and executed through it
// (/proc/self/fd/N), so the bytes that run are the bytes that were checked.
func (p *Plugin) command(env []string) (*exec.Cmd, error) {
	spec := p.spec
	if spec.SHA256 == "" {
		cmd := exec.Command(spec.Path, spec.Args...)
		cmd.Env = env
		return cmd, nil
	}
	f, err := os.Open(spec.Path)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot read %s: %v", ErrChecksum, spec.Path, err)
	}
	hash := spec.Hasher
	if hash == nil {
		hash = func(f *os.File) (string, error) { return readerSHA256(f) }
	}
	actual, err := hash(f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%w: cannot read %s: %v", ErrChecksum, spec.Path, err)
	}
	if actual != spec.SHA256 && spec.PinnedBy != "" {
		_ = f.Close()
		return nil, fmt.Errorf("%w: plugin %s: %s has sha256 %s, but %s locks sha256:%s; if you upgraded it on purpose, run `switchboard plugin lock`, otherwise reinstall it with `switchboard plugin install`",
			ErrChecksum, spec.Name, spec.Path, actual, spec.PinnedBy, spec.SHA256)
	}
	if actual != spec.SHA256 {
		_ = f.Close()
		return nil, fmt.Errorf("%w: plugin %s (%s) has sha256 %s, but the config pins %s; if you rebuilt or upgraded it on purpose, update sha256 in its plugin block",
			ErrChecksum, spec.Name, spec.Path, actual, spec.SHA256)
	}
	// The child gets the descriptor as fd 3 and execs it.
	cmd := exec.Command(PinnedExecPath, spec.Args...)
	cmd.Args[0] = spec.Path
	cmd.Env = env
	cmd.ExtraFiles = []*os.File{f}
	return cmd, nil
}

// PinnedExecPath is what a pinned plugin's command runs: the descriptor the
// launcher hashed, passed as the child's fd 3. A Sandbox that re-executes
// the command elsewhere must keep ExtraFiles[0] as fd 3.
const PinnedExecPath = "/proc/self/fd/3"

func closeExtra(cmd *exec.Cmd) {
	for _, f := range cmd.ExtraFiles {
		if f != nil {
			_ = f.Close()
		}
	}
}

// configure sends the plugin its settings.
func (p *Plugin) configure(ctx context.Context) error {
	spec := p.spec
	hostID, err := p.serveHost()
	if err != nil {
		return err
	}
	p.hostID = hostID
	if err := p.proto.Configure(ctx, &pluginv1.ConfigureRequest{
		ServerName:     spec.Name,
		ProjectDir:     spec.ProjectDir,
		DataDir:        spec.DataDir,
		SettingsJson:   spec.Settings,
		HostVersion:    HostVersion,
		HostDataDir:    spec.HostDataDir,
		ProtectedPaths: spec.ProtectedPaths,
		HostService:    hostID,
	}); err != nil {
		if p.exitedSoon() {
			// Not a refusal: the process died (a crash loop, a kill).
			return fmt.Errorf("%w: plugin %s exited while being configured: %v", ErrStart, spec.Name, err)
		}
		return fmt.Errorf("launcher: plugin %s refused its configuration: %w", spec.Name, err)
	}
	return nil
}

// exitedSoon reports whether the plugin process has ended, giving
// go-plugin a moment to notice an exit that just broke a call.
func (p *Plugin) exitedSoon() bool {
	for i := 0; i < 25 && !p.client.Exited(); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	return p.client.Exited()
}

// describe asks the plugin for its tools and checks them.
func (p *Plugin) describe(ctx context.Context) error {
	info, err := p.proto.Describe(ctx)
	if err != nil {
		if p.exitedSoon() {
			return fmt.Errorf("%w: plugin %s exited while describing itself: %v", ErrStart, p.spec.Name, err)
		}
		return fmt.Errorf("launcher: plugin %s: Describe failed: %w", p.spec.Name, err)
	}
	if err := protocol.ValidateDescribe(info); err != nil {
		return fmt.Errorf("launcher: plugin %s (%s): %w", p.spec.Name, p.spec.Path, err)
	}
	d := protocol.DescriptionFromWire(info)
	p.info.Store(d)
	if nc, ok := p.spec.Sandbox.(NeedsChecker); ok && d.Sandbox != nil {
		if unmet := nc.Unmet(d.Sandbox); len(unmet) > 0 {
			p.unmet = unmet
			p.log.Warn("the plugin declares sandbox needs its block does not grant; it may fail until they are added", "missing", strings.Join(unmet, "; "))
		}
	}
	return nil
}

// Unmet lists what the plugin declared it needs and its sandbox does not
// grant, as config lines to add.
func (p *Plugin) Unmet() []string { return p.unmet }

// kill stops a plugin whose launch failed, and sweeps its process group.
func (p *Plugin) kill() {
	if p.proto != nil {
		_ = p.proto.Close()
	}
	if p.client != nil {
		p.client.Kill()
	}
	if p.runner != nil {
		p.runner.sweep()
	}
}

func (p *Plugin) startError(err error, versions []int) error {
	msg := err.Error()
	if m := incompatibleRE.FindStringSubmatch(msg); m != nil {
		// go-plugin names only the version the plugin chose; an SDK
		// plugin says all of them on stderr, read in full once the
		// process is gone.
		p.client.Kill()
		offered := p.stderr.versions()
		if offered == nil {
			v, _ := strconv.Atoi(m[1])
			offered = []int{v}
		}
		return &ProtocolMismatchError{Plugin: p.spec.Name, Path: p.spec.Path, PluginVersions: offered, HostVersions: versions}
	}
	if errors.Is(err, ErrChecksum) {
		return err
	}
	said := ""
	if p.client != nil {
		p.client.Kill() // its stderr is then read to the end
	}
	if tail := p.stderr.last(); tail != "" {
		said = "; its stderr ended with: " + tail
	}
	if strings.Contains(msg, "timeout while waiting for plugin to start") {
		return fmt.Errorf("%w: plugin %s (%s) did not complete the handshake within %s; raise start_timeout if it is just slow%s", ErrStart, p.spec.Name, p.spec.Path, p.spec.StartTimeout, said)
	}
	return fmt.Errorf("%w: plugin %s (%s): %v%s", ErrStart, p.spec.Name, p.spec.Path, err, said)
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
	env = append(env, pluginserve.EnvLogLevel+"="+level)
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
	return readerSHA256(f)
}

func readerSHA256(r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Name returns the server name.
func (p *Plugin) Name() string { return p.spec.Name }

// Describe returns what the plugin reported at start.
func (p *Plugin) Describe() *toolcall.Description { return p.info.Load() }

// ProtocolVersion returns the negotiated protocol version.
func (p *Plugin) ProtocolVersion() int { return p.version }

// PID returns the plugin's process id.
func (p *Plugin) PID() int {
	if p.reattached != 0 {
		return p.reattached
	}
	if p.runner == nil {
		return 0
	}
	return p.runner.pid
}

// Confinement describes what confines the plugin ("not confined" without
// a sandbox).
func (p *Plugin) Confinement() string {
	if s, ok := p.spec.Sandbox.(fmt.Stringer); ok && s != nil {
		if len(p.unmet) > 0 {
			return s.String() + "; declared needs not granted: " + strings.Join(p.unmet, "; ")
		}
		return s.String()
	}
	return "not confined (no sandbox)"
}

// StopReason says why the sandbox ended the plugin process ("" while it
// runs, or when the sandbox did not end it).
func (p *Plugin) StopReason() string {
	if p.runner == nil {
		return ""
	}
	select {
	case <-p.runner.exited:
		return p.runner.stopReason
	default:
		return ""
	}
}

// Exited reports whether the plugin process has ended.
func (p *Plugin) Exited() bool { return p.client.Exited() }

// Call runs one tool call (see toolcall.Server). onProgress, if not nil,
// asks for progress and receives it; the plugin's log events are logged
// under the plugin's name. The caller's identity (package caller) goes
// with the call as its owner.
func (p *Plugin) Call(ctx context.Context, tool string, args []byte, onProgress toolcall.ProgressFunc) (*toolcall.Result, error) {
	defer p.enter(caller.From(ctx), tool)()
	res, err := p.proto.Call(ctx, tool, args, onProgress)
	return res, p.callError(tool, err)
}

// CallEvents runs one call exactly as given, at the level of the wire, and
// hands every event (progress and log) to onEvent (sdktest shows them to
// plugin authors).
func (p *Plugin) CallEvents(ctx context.Context, call *pluginv1.Call, onEvent protocol.ProgressFunc) (*pluginv1.Result, error) {
	defer p.enter(call.GetOwner(), call.GetTool())()
	res, err := p.proto.CallEvents(ctx, call, onEvent)
	return res, p.callError(call.GetTool(), err)
}

// callError explains a lost connection: the plugin exited, or its sandbox
// stopped it.
func (p *Plugin) callError(tool string, err error) error {
	if err != nil && errors.Is(err, protocol.ErrUnavailable) {
		// Give go-plugin a moment to notice the exit, for a clearer message.
		if p.exitedSoon() {
			if why := p.StopReason(); why != "" {
				return protocol.Errorf(protocol.CodeUnavailable, "plugin %s was stopped by its sandbox during the call to %s: %s", p.spec.Name, tool, why)
			}
			return protocol.Errorf(protocol.CodeUnavailable, "plugin %s exited during the call to %s", p.spec.Name, tool)
		}
	}
	return err
}

// PermissionPatterns asks the plugin for a call's permission patterns. An
// error is a *protocol.Error with the code the plugin gave it.
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
		if p.reattached != 0 {
			// Started by hand: it stays for the next host (go-plugin's
			// Kill would ask it to shut down).
			close(p.unwatch)
			return
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
	if p.proto != nil {
		p.proto.Log = p.log
	}
}

// Done is closed when the plugin process exits.
func (p *Plugin) Done() <-chan struct{} {
	if p.reattachedDone != nil {
		return p.reattachedDone
	}
	if p.runner == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return p.runner.exited
}

// Busy asks the plugin whether it has background work that stopping it
// would lose (Describe's busy field; plugins that do not set it never
// are), before the host stops it for being idle.
func (p *Plugin) Busy(ctx context.Context) (bool, error) {
	if p.proto == nil {
		return false, nil
	}
	d, err := p.proto.Describe(ctx)
	if err != nil {
		return false, err
	}
	return d.GetBusy(), nil
}

// Ping checks the plugin's gRPC health service, bounded by ctx.
func (p *Plugin) Ping(ctx context.Context) error {
	rpc, err := p.client.Client()
	if err != nil {
		return err
	}
	g, ok := rpc.(*plugin.GRPCClient)
	if !ok {
		return fmt.Errorf("plugin %s: not a gRPC plugin", p.spec.Name)
	}
	// go-plugin's own Ping (the same health check), with the caller's
	// deadline: its Ping takes no context, so it needed a goroutine of
	// its own to be given up on.
	_, err = grpc_health_v1.NewHealthClient(g.Conn).Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: plugin.GRPCServiceName})
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("plugin %s did not answer its health check: %w", p.spec.Name, ctx.Err())
	}
	return err
}

var _ toolcall.Server = (*Plugin)(nil)

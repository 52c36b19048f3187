// Package loader turns a config into a running host: it starts every
// built-in, configured plugin and discovered plugin in parallel, then
// registers them in a fixed order (built-ins, plugin blocks in config
// order, discovered plugins by path), so the first claimant of a name
// always keeps it. One plugin failing never stops the others. Every
// server is supervised (restarted when lost).
//
// A Host can reload its config: the new file is validated first (an
// invalid one changes nothing), then diffed against the running one.
// Removed servers stop, added ones start, changed ones restart, unchanged
// ones keep their live connection, and permission changes apply at once.
package loader

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/host/internal/approvals"
	"github.com/switchboard-mcp/switchboard/host/internal/builtins"
	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/external"
	"github.com/switchboard-mcp/switchboard/host/internal/pluginstore"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/host/internal/sandbox"
	"github.com/switchboard-mcp/switchboard/host/internal/sharedstore"
	"github.com/switchboard-mcp/switchboard/host/internal/strictmode"
	"github.com/switchboard-mcp/switchboard/host/internal/supervisor"
	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/tuning"
)

// PluginPrefix is the file name prefix of plugin binaries.
const PluginPrefix = pluginstore.Prefix

// Files in the data directory.
const (
	// PermissionsFile holds the "always allow / always deny" decisions.
	PermissionsFile = "permissions.json"
	// AuditFile is the audit log, one JSON line per call.
	AuditFile = "audit.jsonl"
)

// Options adjusts Start.
type Options struct {
	// Self is the binary that serves built-ins ("Self plugin-serve NAME");
	// default: the running executable.
	Self string
	// Logger is the host's root logger.
	Logger hclog.Logger
	// WaitAll waits for every server's first start (one-shot commands:
	// tools, call, inspect). Otherwise servers not up within StartWait
	// join later (serve).
	WaitAll bool
	// HostService, if set, makes the back-channel of the built-in
	// `switchboard` server for the started host (package hostapi); it is
	// given to that built-in alone. Without it the built-in's tools answer
	// that the host offers none.
	HostService func(*Host) launcher.HostService
}

type job struct {
	spec    launcher.Spec
	ext     *external.Spec // set for external MCP servers
	kind    registry.Kind
	source  string
	restart config.Restart
	// discovered plugins are named by what they report.
	discovered bool
	// refused, if set, is why the job must not start (a discovered plugin
	// the lock file does not list, an unreadable lock file).
	refused error
	// gate, if set, holds the server's tool surface to the locked or
	// approved one (plugins and external servers; built-ins are the host's
	// own binary).
	gate *pluginstore.Gate
	// life is when the server runs (start, idle_timeout).
	life config.Lifecycle
	// manifests, if set, is the data_dir its manifest is cached in
	// (manifest.go).
	manifests string
	// builtins, if set, is the binary that serves built-ins, run in place
	// of `switchboard plugin-serve NAME` when it is the pinned one
	// (hashcache.go).
	builtins *builtinBinary
	// hashes caches the hashes of pinned binaries (hashcache.go).
	hashes *hashCache
	// placed, if set, is closed once the host's control-plane
	// placeholders are made (Start): no server of the job starts before.
	placed <-chan struct{}
}

// Host is a running set of servers built from a config.
type Host struct {
	log  hclog.Logger
	self string
	reg  *registry.Registry
	sup  *supervisor.Supervisor

	mu   sync.Mutex // serialises reloads
	cfg  *config.Config
	jobs map[string]job // by configured name (discovered: by path)
	// gate holds servers' tools to the locked or approved ones.
	gate pluginstore.Gate
	// hidden is the identity of each hidden control-plane file as the
	// running sandboxes' mounts cover it (see Rehide).
	hidden map[string]fileID
	// hostSvc is the switchboard built-in's back-channel (nil: none).
	hostSvc launcher.HostService
	// shared is the shared store (nil: state in data_dir's files).
	shared        *sharedstore.Store
	manifestDirOK atomic.Bool // data_dir/manifests passed strictmode.Check
	// placed is closed once Start's control-plane placeholders are made.
	placed chan struct{}
}

// Load starts everything the config names and returns the registry. See
// Start.
func Load(ctx context.Context, cfg *config.Config, opts Options) (*registry.Registry, error) {
	h, err := Start(ctx, cfg, opts)
	if h == nil {
		return nil, err
	}
	return h.reg, err
}

// Start starts everything the config names. The error, if any, is the
// first failure in registration order; the host is usable either way and
// its registry lists every failure.
func Start(ctx context.Context, cfg *config.Config, opts Options) (*Host, error) {
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	self := opts.Self
	if self == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("loader: cannot find the switchboard binary to serve built-ins: %w", err)
		}
		self = exe
	}
	// Before any server starts: the sandboxes hide them (ControlPlane), and
	// a folder that does not exist cannot be hidden.
	config.MakeStateRoots()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("loader: cannot create data_dir %s: %w", cfg.DataDir, err)
	}
	perms := permsOf(cfg.Permissions)
	def, access, err := levelsOf(perms)
	if err != nil {
		return nil, err
	}
	policy := &registry.Policy{Allow: perms.Allow, Deny: perms.Deny, Default: def, Access: access, Source: filepath.Base(cfg.File), AskFirst: builtins.AskFirst()}
	audit, shared, err := openState(ctx, cfg, policy, log)
	if err != nil {
		return nil, err
	}
	reg := registry.New(policy,
		registry.WithAuditLog(audit),
		registry.WithDuplicateLimit(cfg.DuplicateCallLimit),
		registry.WithWarnings(log.Warn))
	reg.SetCallTimeouts(CallTimeouts(cfg))
	h := &Host{log: log, self: self, reg: reg, cfg: cfg, jobs: map[string]job{}, hidden: hiddenIDs(cfg), shared: shared}
	if opts.HostService != nil {
		h.hostSvc = opts.HostService(h)
	}
	h.sup = supervisor.New(log, reg.Refresh)
	h.gate = pluginstore.Gate{LockFile: cfg.LockFile(), DataDir: cfg.DataDir}
	h.sup.SetVet(h.vetListChange)
	reg.SetPrefixes(cfg.Prefixes)
	reg.AtShutdown(h.sup.Stop)
	reg.AtShutdown(h.waitPlaced) // then its record is not published after ForgetHost

	run, pending := gateMCPJSON(cfg)
	reg.SetDisabled(append(disabledOf(cfg), pending...))
	jobs := h.withHostService(Jobs(run, self))
	for _, j := range jobs {
		h.jobs[jobKey(j)] = j
	}
	// What the kernel offers the sandbox is probed (a namespaced start of
	// a small program, some 20 ms, that slows everything else the host does
	// meanwhile) as soon as a server will start now (or startJobs finds
	// one), otherwise once the host serves.
	if slices.ContainsFunc(jobs, startsNow) {
		h.prewarm()
	}
	// The placeholders may wait for the sandbox's probe of this machine
	// (what a sandbox that is not required covers): they are made while
	// the host lists its lazy servers and goes on to serve, and every
	// start waits for them (job.placed), as do reloads and servers
	// connected later.
	placed := make(chan struct{})
	h.placed = placed
	for i := range jobs {
		jobs[i].placed = placed
	}
	go func() {
		defer close(placed)
		made := []string{h.placeholdLock(cfg, jobs), h.placeholdMCPJSON(cfg, jobs)}
		h.mu.Lock()
		h.hide(made...)
		h.mu.Unlock()
		h.publish()
	}()
	err = h.startJobs(ctx, jobs, opts.WaitAll)
	// A host whose servers all wait for their first call probes the kernel
	// once it serves (SettleDelay later), before that call needs it.
	t := time.AfterFunc(tuning.SettleDelay, h.prewarm)
	reg.AtShutdown(func() { t.Stop() })
	return h, err
}

// prewarm probes what the kernel offers the sandbox in the background
// (sandbox.Prewarm; the probe runs once, and the helper's pin is checked
// once).
func (h *Host) prewarm() {
	go func() { sandbox.Prewarm(HelperFor(h.self)) }()
}

// startsNow reports whether a job's server starts with the host: it is not
// one a manifest may list until its first call (lazyManifest says which
// are, reading the manifests).
func startsNow(j job) bool {
	if j.refused != nil {
		return false
	}
	return j.discovered || j.spec.Reattach != nil || j.manifests == "" || j.life.Start == config.StartEager ||
		(j.life.Start == config.StartAuto && j.kind == registry.KindExternal)
}

// waitPlaced waits for the placeholders of the host's start (Start) to be
// made. The caller does not hold h.mu.
func (h *Host) waitPlaced() {
	if h.placed != nil {
		<-h.placed
	}
}

// vetListChange holds a running server's changed tools to the locked or
// approved ones (a server may change its tools without restarting: an
// external server's tools/list_changed, a plugin's list change). The
// supervisor asks it before the server adopts its new description (see
// supervisor.SetVet), so a changed surface is never listed: a server whose
// tools now differ keeps its approved description until it is taken out of
// the registry and shown as quarantined until `switchboard approve` (which
// reloads, starting it again). A lock or approvals file that cannot be read
// lets nothing through either: the server is failed with that error.
func (h *Host) vetListChange(name string, d *toolcall.Description) error {
	e := h.reg.Entry(name)
	if e == nil || e.Kind == registry.KindBuiltin {
		return nil
	}
	err := h.gate.Check(name, pluginstore.SurfaceOfServer(d))
	if err == nil {
		return nil
	}
	if errors.Is(err, pluginstore.ErrQuarantined) {
		h.log.Warn("server quarantined: its tools changed while it ran", "server", name, "error", err)
	} else {
		h.log.Error("server stopped: its changed tools could not be checked against the lock or approvals", "server", name, "error", err)
	}
	// Not on this goroutine: closing the server ends the watch that
	// called us.
	go h.reg.Retire(context.Background(), name, err)
	return err
}

// OnHealthChecked makes fn run after each health check of a server (see
// supervisor.Supervisor.OnHealthChecked).
func (h *Host) OnHealthChecked(fn func()) { h.sup.OnHealthChecked(fn) }

// Registry returns the host's registry.
func (h *Host) Registry() *registry.Registry { return h.reg }

// Config returns the config the host runs on.
func (h *Host) Config() *config.Config {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cfg
}

func jobKey(j job) string {
	if j.discovered {
		return "path:" + j.spec.Path
	}
	return j.spec.Name
}

// StartWait is how long the host waits for its servers' first starts
// before it serves, unless the config's start_wait says otherwise: a
// server still starting then (a slow handshake, up to its start_timeout)
// joins later, and clients get tools/list_changed.
var StartWait = 3 * time.Second

// startJobs launches jobs in parallel and registers them in order. Those
// not started within StartWait are registered as starting and join when
// they are up (a plugin found in plugin_dirs is always waited for: its
// name comes from its answer).
func (h *Host) startJobs(ctx context.Context, jobs []job, waitAll bool) error {
	lazy := h.lazyManifests(jobs)
	for i, j := range jobs {
		if lazy[i] == nil && j.refused == nil {
			h.prewarm() // a server starts now (its manifest was stale, say)
			break
		}
	}
	results := make([]chan supervisor.StartResult, len(jobs))
	for i, j := range jobs {
		if lazy[i] != nil {
			continue // listed from its manifest; its first call starts it
		}
		results[i] = make(chan supervisor.StartResult, 1)
		go func() {
			inst, err := start(ctx, j, h.log)
			results[i] <- supervisor.StartResult{Inst: inst, Err: err}
		}()
	}
	timeUp := make(chan struct{}) // closed once StartWait has passed
	if !waitAll {
		wait := StartWait
		if h.cfg.StartWait > 0 {
			wait = h.cfg.StartWait
		}
		t := time.AfterFunc(wait, func() { close(timeUp) })
		defer t.Stop()
	}

	var first error
	for i, j := range jobs {
		if lazy[i] != nil {
			first = h.registerLazy(ctx, j, lazy[i], first)
			continue
		}
		var r supervisor.StartResult
		select {
		case r = <-results[i]:
		case <-timeUp:
			r, first = h.lateOrNow(ctx, j, results[i], first)
			if r.Inst == nil && r.Err == nil {
				continue // registered as starting
			}
		}
		first = h.register(ctx, j, r, first)
	}
	return first
}

// lazyManifests reads the manifests of jobs (lazyManifest; nil for a job
// that starts now) on as many goroutines as the host has scheduler slots:
// a host listing many lazy servers reads one file each before it serves.
func (h *Host) lazyManifests(jobs []job) []*cached {
	lazy := make([]*cached, len(jobs))
	var sn *pluginstore.Snapshot
	if slices.ContainsFunc(jobs, func(j job) bool { return j.gate != nil }) {
		var err error
		if sn, err = h.gate.Snapshot(); err != nil {
			h.log.Info("manifests not used: the lock or approvals could not be read; their servers start now", "reason", err)
			sn = nil
			jobs = slices.Clone(jobs)
			for i := range jobs {
				if jobs[i].gate != nil {
					jobs[i].manifests = "" // no manifest: start it (the start reports the error)
				}
			}
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(jobs))
	if workers <= 1 {
		for i, j := range jobs {
			lazy[i] = h.lazyManifestHeldTo(j, sn)
		}
		return lazy
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(jobs); i = int(next.Add(1)) - 1 {
				lazy[i] = h.lazyManifestHeldTo(jobs[i], sn)
			}
		})
	}
	wg.Wait()
	return lazy
}

// lateOrNow takes a job's result if it is there; otherwise (and unless the
// job must be waited for) it registers the server as starting and returns
// the zero result.
func (h *Host) lateOrNow(ctx context.Context, j job, res chan supervisor.StartResult, first error) (supervisor.StartResult, error) {
	select {
	case r := <-res:
		return r, first
	default:
	}
	if j.discovered {
		return <-res, first
	}
	name := j.spec.Name
	srv := h.sup.AddStarting(name, starter(j, name, h.log), backoffOf(j), res, func(err error) bool { return !transient(j, err) })
	h.policies(srv, j)
	if err := h.reg.Register(srv, j.kind, j.source); err != nil {
		_ = srv.Close(ctx)
		h.log.Error("server not loaded", "server", name, "source", j.source, "error", err)
		if first == nil {
			first = err
		}
		return supervisor.StartResult{}, first
	}
	h.log.Warn("server still starting; serving without it until it is up (start_wait)", "server", name)
	return supervisor.StartResult{}, first
}

// register registers a job's started server, or records why it did not
// start. It returns the first error so far.
func (h *Host) register(ctx context.Context, j job, r supervisor.StartResult, first error) error {
	inst, err := r.Inst, r.Err
	name := j.spec.Name
	if err == nil && j.discovered {
		p := inst.(*launcher.Plugin)
		if reported := p.Describe().Name; reported == builtins.Reserved {
			_ = p.Close(ctx)
			err = &ReservedNameError{Path: j.spec.Path}
		} else if registry.NameRE.MatchString(reported) {
			p.Rename(reported)
			name = reported
		} else {
			_ = p.Close(ctx)
			err = fmt.Errorf("loader: plugin %s reports the name %q, which is not a valid server name ([a-z0-9_-]); give it a plugin block with a label", j.spec.Path, reported)
		}
	}
	switch {
	case err == nil:
		srv := h.sup.Add(name, inst, starter(j, name, h.log), backoffOf(j))
		h.policies(srv, j)
		err = h.reg.Register(srv, j.kind, j.source)
		if err != nil {
			_ = srv.Close(ctx)
		}
	case transient(j, err):
		// Keep trying in the background, like a server that was lost.
		srv := h.sup.AddPending(name, starter(j, name, h.log), backoffOf(j), err.Error())
		h.policies(srv, j)
		if rerr := h.reg.Register(srv, j.kind, j.source); rerr != nil {
			_ = srv.Close(ctx)
			err = rerr
		} else {
			h.log.Warn("server did not start; retrying in the background", "server", name, "error", err)
			if first == nil {
				first = err
			}
			return first
		}
	default:
		h.reg.Fail(registry.Failure{Name: name, Kind: j.kind, Source: j.source, Err: err})
	}
	if err != nil {
		h.log.Error("server not loaded", "server", name, "source", j.source, "error", err)
		if first == nil {
			first = err
		}
	}
	return first
}

// transient reports whether a failed first start may succeed later: the
// process did not start or complete its handshake, or an external server
// could not be reached. A protocol mismatch, a checksum mismatch, refused
// settings or an invalid description are permanent until the config or
// the binary changes.
func transient(j job, err error) bool {
	if j.discovered || j.refused != nil || errors.Is(err, pluginstore.ErrQuarantined) {
		return false
	}
	return j.ext != nil || errors.Is(err, launcher.ErrStart)
}

// start starts one instance of a job and, once its surface passed the
// gate, caches its manifest.
func start(ctx context.Context, j job, log hclog.Logger) (supervisor.Instance, error) {
	if j.refused != nil {
		return nil, j.refused
	}
	// The identity is taken before the start: a binary replaced meanwhile
	// leaves a manifest that no longer matches, not one that lies.
	var key string
	var file *FileIdentity
	if j.manifests != "" && j.spec.Reattach == nil && !j.discovered {
		var err error
		if key, file, err = manifestKey(j); err != nil {
			key = ""
		}
	}
	inst, err := launch(ctx, j, log)
	if err != nil {
		// Not the typed nil *launcher.Plugin: whoever drains a start
		// result closes a non-nil Inst.
		return nil, err
	}
	// One description for the gate and the manifest: the manifest keeps
	// the surface hash the gate checked, of the description it keeps.
	d, surface := inst.Describe(), ""
	if j.gate != nil {
		s := pluginstore.SurfaceOfServer(d)
		surface = s.Hash()
		if err := j.gate.Check(j.spec.Name, s); err != nil {
			_ = inst.Close(ctx)
			if key != "" {
				// Its cached surface is not what it serves now: the
				// next start (after an approval) is eager.
				_ = os.Remove(manifestPath(j.manifests, j.spec.Name))
			}
			return nil, err
		}
	}
	if key != "" {
		recordManifest(j, key, file, inst, d, surface, log)
	}
	return inst, nil
}

// registerLazy registers a server listed from its manifest, not started.
func (h *Host) registerLazy(ctx context.Context, j job, m *cached, first error) error {
	name := j.spec.Name
	srv := h.sup.AddLazy(name, starter(j, name, h.log), backoffOf(j), supervisor.Lazy{
		Manifest: m.desc, Protocol: m.protocol, StartTimeout: startTimeout(j), Permanent: h.permanent(j),
	})
	srv.SetPlannedConfinement(plannedConfinement(j))
	srv.SetSandboxMode(sandboxMode(j))
	if err := h.reg.Register(srv, j.kind, j.source); err != nil {
		_ = srv.Close(ctx)
		h.log.Error("server not loaded", "server", name, "source", j.source, "error", err)
		if first == nil {
			first = err
		}
		return first
	}
	h.log.Debug("server configured from its manifest; its first call starts it", "server", name)
	return first
}

// policies sets what a supervised server's starts follow: how long a call
// waits for one, which failures are permanent, and the confinement shown
// while no process runs.
func (h *Host) policies(srv *supervisor.Server, j job) {
	srv.SetStartPolicy(startTimeout(j), h.permanent(j))
	srv.SetPlannedConfinement(plannedConfinement(j))
	srv.SetSandboxMode(sandboxMode(j))
}

// sandboxMode says how a job's sandbox is configured (registry.Sandboxed).
func sandboxMode(j job) string {
	if j.ext != nil && j.ext.URL != "" {
		return "remote (runs elsewhere)"
	}
	sb := sandboxOf(j)
	if sb == nil || sb.Policy.Mode == sandbox.ModeOff || sb.Policy.Mode == "" {
		return "not sandboxed"
	}
	return "sandbox " + string(sb.Policy.Mode)
}

// plannedConfinement describes what confines a job's next process (its
// sandbox, as inspect shows it for a running one).
func plannedConfinement(j job) func() string {
	if j.ext != nil && j.ext.URL != "" {
		return func() string { return "remote (runs elsewhere)" }
	}
	sb := sandboxOf(j)
	if sb == nil {
		return func() string { return "not confined (no sandbox)" }
	}
	return sb.String
}

// permanent reports which failed starts on demand of a job will not pass
// by themselves. A quarantined server is taken out of the registry and
// shown as quarantined until `switchboard approve` (which reloads,
// starting it again), as a running server whose tools change is.
func (h *Host) permanent(j job) func(error) bool {
	return func(err error) bool {
		if !errors.Is(err, pluginstore.ErrQuarantined) {
			return !transient(j, err)
		}
		name := j.spec.Name
		h.log.Warn("server quarantined: its tools differ from the locked or approved ones", "server", name, "error", err)
		go h.reg.Retire(context.Background(), name, err) // not under the supervisor's lock
		return true
	}
}

// startTimeout bounds a call's wait for a job's start on demand (0: the
// supervisor's default).
func startTimeout(j job) time.Duration {
	if j.ext != nil {
		return j.ext.Timeout
	}
	return j.spec.StartTimeout
}

// backoffOf is a job's restart policy and idle timeout.
func backoffOf(j job) supervisor.Backoff {
	b := Backoff(j.restart)
	b.IdleTimeout = j.life.IdleTimeout
	return b
}

// launch starts one instance of a job, unchecked.
func launch(ctx context.Context, j job, log hclog.Logger) (supervisor.Instance, error) {
	if j.placed != nil {
		select {
		case <-j.placed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if j.ext != nil {
		return external.Connect(ctx, *j.ext, log.Named("external"))
	}
	if j.spec.Reattach != nil {
		log.Warn("using a plugin started by hand in debug mode: not sandboxed, not health-checked", "server", j.spec.Name, "pid", j.spec.Reattach.Pid, "variable", protocol.EnvReattach)
		return launcher.Launch(ctx, j.spec, log)
	}
	if _, err := os.Stat(j.spec.Path); err == nil && j.kind == registry.KindPlugin {
		// A binary (or folder) another user can change would run whatever
		// they put there (OpenSSH's StrictModes).
		if err := strictmode.Check(j.spec.Path); err != nil {
			return nil, fmt.Errorf("plugin %s: %w", j.spec.Name, err)
		}
	}
	spec := j.spec
	if spec.SHA256 != "" && j.hashes != nil {
		spec.Hasher = j.hashes.sum
	}
	if j.builtins != nil {
		spec = j.builtins.apply(spec, log)
	}
	return launcher.Launch(ctx, spec, log)
}

// starter starts a fresh instance of a job for the supervisor, under the
// name the server was registered with.
func starter(j job, name string, log hclog.Logger) supervisor.Starter {
	return func(ctx context.Context) (supervisor.Instance, error) {
		inst, err := start(ctx, j, log)
		if err != nil {
			return nil, err
		}
		if p, ok := inst.(*launcher.Plugin); ok {
			p.Rename(name)
		}
		return inst, nil
	}
}

// ConnectExternal connects an external MCP server at runtime (it is gone
// again when the host stops, or on DisconnectExternal).
func (h *Host) ConnectExternal(ctx context.Context, x config.External) error {
	if !registry.NameRE.MatchString(x.Name) {
		return fmt.Errorf("%q is not a valid server name", x.Name)
	}
	if (x.Command == "") == (x.URL == "") {
		return fmt.Errorf("external %s needs exactly one of command and url", x.Name)
	}
	h.waitPlaced()
	h.mu.Lock()
	defer h.mu.Unlock()
	if x.Timeout == 0 {
		x.Timeout = 30 * time.Second
	}
	x.Restart = h.cfg.Restart
	j := externalJob(h.cfg, hostFilesOf(h.cfg), &x, "runtime", h.self)
	if err := h.startJobs(ctx, []job{j}, true); err != nil {
		h.reg.ClearFailures(x.Name)
		return err
	}
	h.jobs[jobKey(j)] = j
	h.reg.Refresh("")
	return nil
}

// DisconnectExternal stops an external server.
func (h *Host) DisconnectExternal(ctx context.Context, name string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	j, ok := h.jobs[name]
	if !ok || j.ext == nil {
		return fmt.Errorf("no external server named %q", name)
	}
	delete(h.jobs, name)
	return h.reg.Remove(ctx, name)
}

func externalJob(cfg *config.Config, files hostFiles, x *config.External, source, self string) job {
	j := job{
		spec: launcher.Spec{Name: x.Name},
		ext: &external.Spec{
			Name: x.Name, Command: x.Command, Args: x.Args, Env: x.Env, Dir: cfg.ProjectDir,
			URL: x.URL, Headers: x.Headers, Timeout: x.Timeout,
			Sandbox:   externalSandbox(cfg, files, x, self),
			Untrusted: WritableFolders(cfg),
			Redact:    x.Redactions(),
		},
		kind:    registry.KindExternal,
		source:  source,
		restart: x.Restart,
	}
	j.life, j.manifests = x.Lifecycle, cfg.DataDir
	return j
}

// Backoff converts a config restart block.
func Backoff(r config.Restart) supervisor.Backoff {
	return supervisor.Backoff{
		Base: r.BaseDelay, Max: r.MaxDelay, Jitter: r.Jitter, MaxAttempts: r.MaxAttempts,
		StableAfter: r.StableAfter, HealthInterval: r.HealthInterval, HealthTimeout: r.HealthTimeout,
	}
}

// Restart gives a server a fresh start now (no backoff wait); it also
// revives a failed one, including one that failed its first start. A
// server a call starts that has no process stays so (its next call starts
// it). The message says which happened.
func (h *Host) Restart(name string) (string, error) {
	e := h.reg.Entry(name)
	if e == nil {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, j := range h.jobs {
			if j.spec.Name == name && !j.discovered {
				h.reg.ClearFailures(name)
				err := h.startJobs(context.Background(), []job{j}, true)
				h.reg.Refresh("")
				return "starting " + name, err
			}
		}
		return "", fmt.Errorf("no server named %q", name)
	}
	srv, ok := e.Server.(*supervisor.Server)
	if !ok {
		return "", fmt.Errorf("server %q cannot be restarted", name)
	}
	if !srv.Restart() {
		return fmt.Sprintf("%s has no process (%s): its next call starts it", name, srv.State()), nil
	}
	return "restarting " + name, nil
}

// ReloadResult says what a reload did.
type ReloadResult struct {
	Added, Removed, Restarted, Unchanged []string
	PermissionsChanged                   bool
	// Warnings are settings that only take effect on a restart of the host.
	Warnings []string
}

// Reload re-reads the config file. An invalid file changes nothing: the
// diagnostics come back as *config.Result in the error. Otherwise the
// differences are applied.
func (h *Host) Reload(ctx context.Context) (*ReloadResult, error) {
	h.waitPlaced()
	h.mu.Lock()
	defer h.mu.Unlock()
	res := config.Load(h.cfg.File)
	if !res.Diags.HasErrors() {
		// The same check as validate: settings a built-in refuses are
		// refused here, before anything changes.
		res.Diags = append(res.Diags, CheckSettings(res.Config)...)
	}
	if res.Diags.HasErrors() {
		return nil, &InvalidConfigError{Result: res}
	}
	next := res.Config
	out := &ReloadResult{Warnings: slices.Clone(next.Warnings)}
	if next.DataDir != h.cfg.DataDir {
		out.Warnings = append(out.Warnings, "data_dir changed: the host keeps using "+h.cfg.DataDir+" until it restarts")
	}
	if next.AuditMaxBytes != h.cfg.AuditMaxBytes {
		out.Warnings = append(out.Warnings, "audit_max_bytes changes on the next restart of the host")
	}
	if next.AuditDurable != h.cfg.AuditDurable {
		out.Warnings = append(out.Warnings, "audit_durable changes on the next restart of the host")
	}
	if next.Store != h.cfg.Store {
		out.Warnings = append(out.Warnings, "the store block changes on the next restart of the host")
	}
	next.DataDir, next.Store = h.cfg.DataDir, h.cfg.Store

	// Permissions apply without restarting anything.
	oldP, newP := h.cfg.Permissions, next.Permissions
	if !reflect.DeepEqual(permsOf(oldP), permsOf(newP)) {
		p := permsOf(newP)
		def, access, err := levelsOf(p)
		if err != nil {
			return nil, err
		}
		h.reg.Policy().Update(p.Allow, p.Deny, def, access)
		out.PermissionsChanged = true
		h.reg.Refresh("")
	}
	h.reg.SetDuplicateLimit(next.DuplicateCallLimit)
	h.reg.SetCallTimeouts(CallTimeouts(next))
	if !reflect.DeepEqual(next.Prefixes, h.cfg.Prefixes) {
		h.reg.SetPrefixes(next.Prefixes)
	}
	run, pending := gateMCPJSON(next)
	h.reg.SetDisabled(append(disabledOf(next), pending...))

	newJobs := h.withHostService(Jobs(run, h.self))
	byKey := map[string]job{}
	for _, j := range newJobs {
		byKey[jobKey(j)] = j
	}
	// Removed.
	for key, old := range h.jobs {
		if _, ok := byKey[key]; ok {
			continue
		}
		name := old.spec.Name
		if e := h.reg.Entry(name); e != nil {
			_ = h.reg.Remove(ctx, name)
		}
		h.reg.ClearFailures(name)
		out.Removed = append(out.Removed, name)
	}
	// Added and changed.
	var toStart []job
	for _, j := range newJobs {
		key := jobKey(j)
		old, existed := h.jobs[key]
		name := j.spec.Name
		e := h.reg.Entry(name)
		switch {
		case !existed || e == nil:
			h.reg.ClearFailures(name)
			toStart = append(toStart, j)
			out.Added = append(out.Added, name)
		case !sameJob(old, j):
			if srv, ok := e.Server.(*supervisor.Server); ok && !j.discovered {
				srv.SetStarter(starter(j, name, h.log), backoffOf(j))
				h.policies(srv, j)
				// One with no process that a call starts stays so while
				// its manifest holds for the new config; otherwise it
				// starts now, to learn what it serves.
				if !srv.Restart() && h.lazyManifest(j) == nil {
					srv.StartNow()
				}
			}
			out.Restarted = append(out.Restarted, name)
		default:
			out.Unchanged = append(out.Unchanged, name)
		}
	}
	h.jobs = byKey
	h.cfg = next
	h.hide(h.placeholdLock(next, toStart), h.placeholdMCPJSON(next, toStart))
	if len(toStart) > 0 {
		if err := h.startJobs(ctx, toStart, false); err != nil {
			h.log.Warn("reload: a new server did not start", "error", err)
		}
		h.reg.Refresh("")
	}
	for _, l := range [][]string{out.Added, out.Removed, out.Restarted, out.Unchanged} {
		slices.Sort(l)
	}
	h.log.Info("config reloaded", "added", strings.Join(out.Added, ","), "removed", strings.Join(out.Removed, ","),
		"restarted", strings.Join(out.Restarted, ","), "permissions_changed", out.PermissionsChanged)
	go h.publish() // h.mu is held here
	return out, nil
}

func disabledOf(cfg *config.Config) []registry.Failure {
	var out []registry.Failure
	for _, d := range cfg.Disabled {
		out = append(out, registry.Failure{
			Name: d.Name, Kind: registry.Kind(d.Kind),
			Source: fmt.Sprintf("%s %q (%s)", d.Kind, d.Name, rangeText(cfg, d.Range.Filename, d.Range.Start.Line)),
		})
	}
	return out
}

// gateMCPJSON returns a copy of cfg without the .mcp.json servers a
// person has not approved in their current form (anything that can write
// the project can write .mcp.json), and those servers as entries for
// status: "awaiting approval: run `switchboard approve NAME`".
func gateMCPJSON(cfg *config.Config) (*config.Config, []registry.Failure) {
	store := approvals.Open(cfg.DataDir)
	var keep []*config.External
	var pending []registry.Failure
	for _, x := range cfg.Externals {
		if !x.FromMCPJSON {
			keep = append(keep, x)
			continue
		}
		err := store.Check(approvals.KindMCPJSON, x.Name, x.ApprovalEntry().Hash())
		if err == nil {
			keep = append(keep, x)
			continue
		}
		if !errors.Is(err, approvals.ErrPending) {
			// An unreadable or unsafe approvals file approves nothing.
			err = fmt.Errorf("%w (%v)", &approvals.PendingError{Name: x.Name}, err)
		}
		pending = append(pending, registry.Failure{
			Name: x.Name, Kind: registry.KindExternal,
			Source: fmt.Sprintf("external %q (.mcp.json)", x.Name), Err: err,
		})
	}
	if len(pending) == 0 {
		return cfg, nil
	}
	c := *cfg
	c.Externals = keep
	return &c, pending
}

// sameJob compares what a server runs as, not where its block sits in the
// file (inserting a line above it changes nothing).
//
// Sandboxes compare by policy, less the host-wide lists (the control plane
// to hide, the binaries to bind read-only, the protected paths): adding a
// plugin block does not restart every other server; they get the new
// lists at their next start.
func sameJob(a, b job) bool {
	a.source, b.source = "", ""
	a.placed, b.placed = nil, nil
	a.spec.ProtectedPaths, b.spec.ProtectedPaths = nil, nil
	a.spec.Sandbox, b.spec.Sandbox = comparable(a.spec.Sandbox), comparable(b.spec.Sandbox)
	if a.ext != nil && b.ext != nil {
		ea, eb := *a.ext, *b.ext
		ea.Sandbox, eb.Sandbox = comparable(ea.Sandbox), comparable(eb.Sandbox)
		ea.Redact, eb.Redact = nil, nil // how errors are shown, not what runs
		a.ext, b.ext = &ea, &eb
	}
	return reflect.DeepEqual(a, b)
}

// comparable returns a copy of a sandbox without its host-wide lists.
func comparable(s launcher.Sandbox) launcher.Sandbox {
	sb, ok := s.(*sandbox.Sandbox)
	if !ok || sb == nil {
		return s
	}
	c := *sb
	c.Policy.Hide, c.Policy.ReadOnly = nil, nil
	c.Preparer = nil // what each start holds and covers, not what it runs as
	return &c
}

func permsOf(p *config.Permissions) config.Permissions {
	if p == nil {
		return config.Permissions{Default: "allow", Access: "write"}
	}
	c := *p
	c.Range = config.Permissions{}.Range
	return c
}

// levelsOf reads a permissions block's default and access in the
// registry's types (config.Load has checked them).
func levelsOf(p config.Permissions) (registry.Verdict, registry.Access, error) {
	def, err := registry.ParseVerdict(p.Default)
	if err != nil {
		return 0, 0, fmt.Errorf("loader: permissions default: %w", err)
	}
	access, err := registry.ParseAccess(p.Access)
	if err != nil {
		return 0, 0, fmt.Errorf("loader: permissions access: %w", err)
	}
	return def, access, nil
}

// InvalidConfigError is a reload refused because the file is invalid; the
// host keeps running on the old config.
type InvalidConfigError struct {
	Result *config.Result
}

func (e *InvalidConfigError) Error() string {
	var b strings.Builder
	_ = e.Result.WriteDiagnostics(&b)
	return "the config is invalid, so the host keeps running on the previous one:\n" + b.String()
}

// CallTimeouts are the config's call limits, as the registry takes them.
func CallTimeouts(cfg *config.Config) (time.Duration, map[string]registry.Timeouts) {
	per := map[string]registry.Timeouts{}
	for _, b := range cfg.Builtins {
		per[b.Name] = b.Timeouts
	}
	for _, p := range cfg.Plugins {
		per[p.Name] = p.Timeouts
	}
	for _, x := range cfg.Externals {
		per[x.Name] = x.Timeouts
	}
	return cfg.CallTimeout, per
}

// withReattach points the jobs named in SWITCHBOARD_REATTACH at the
// plugins started by hand in debug mode: nothing is started, sandboxed or
// health-checked for them (a plugin at a breakpoint does not answer pings).
func withReattach(jobs []job) []job {
	v := os.Getenv(protocol.EnvReattach)
	if v == "" {
		return jobs
	}
	m, err := protocol.ParseReattach(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "switchboard: ignoring %v\n", err)
		return jobs
	}
	for i := range jobs {
		if r, ok := m[jobs[i].spec.Name]; ok && jobs[i].ext == nil {
			jobs[i].spec.Reattach = &r
			jobs[i].spec.Sandbox = nil
			jobs[i].restart.HealthInterval = 0
		}
	}
	return jobs
}

// Jobs lists what Start starts, in registration order.
func Jobs(cfg *config.Config, self string) []job {
	var jobs []job
	files := hostFilesOf(cfg)
	protected := files.control
	lock, lockErr := readLock(cfg)
	gate := &pluginstore.Gate{LockFile: cfg.LockFile(), DataDir: cfg.DataDir}
	for _, b := range cfg.Builtins {
		state := filepath.Join(cfg.DataDir, b.Name)
		j := job{
			spec: launcher.Spec{
				Name: b.Name, Path: self, Args: []string{builtins.ServeCommand, b.Name},
				Settings: b.Settings, ProjectDir: cfg.ProjectDir, DataDir: state, HostDataDir: cfg.DataDir,
				ProtectedPaths: protected,
				Sandbox:        confinement(cfg, files, registry.KindBuiltin, b.Name, b.Sandbox, b.Settings, state, self),
			},
			kind:    registry.KindBuiltin,
			source:  builtinSource(cfg, b),
			restart: b.Restart,
		}
		j.life, j.manifests = b.Lifecycle, cfg.DataDir
		j.builtins = builtinBinaryOf(self, cfg.DataDir)
		jobs = append(jobs, j)
	}
	named := map[string]bool{}
	for _, p := range cfg.Plugins {
		named[p.Path] = true
		named["name:"+p.Name] = true
		state := filepath.Join(cfg.DataDir, "plugins", p.Name)
		j := job{
			spec: launcher.Spec{
				Name: p.Name, Path: p.Path, Args: p.Args, Env: p.Env, SHA256: p.SHA256,
				Settings: p.Settings, ProjectDir: cfg.ProjectDir, DataDir: state,
				StartTimeout: p.StartTimeout, HostDataDir: cfg.DataDir, ProtectedPaths: protected,
				Sandbox: confinement(cfg, files, registry.KindPlugin, p.Name, p.Sandbox, nil, state, self),
			},
			kind:    registry.KindPlugin,
			source:  fmt.Sprintf("plugin %q (%s, %s)", p.Name, p.Path, rangeText(cfg, p.Range.Filename, p.Range.Start.Line)),
			restart: p.Restart,
			refused: lockErr,
			gate:    gate,
		}
		j.life, j.manifests = p.Lifecycle, cfg.DataDir
		// A configured plugin the lock lists runs only as locked; one it
		// does not list runs as configured (its block is the operator's
		// choice). A sha256 in the block is checked instead.
		if pin := lock.Pin(p.Name); pin != "" && j.spec.SHA256 == "" {
			j.spec.SHA256, j.spec.PinnedBy = pin, lock.Path
		} else if e := lock.Plugins[p.Name]; e != nil && j.spec.SHA256 == "" {
			j.refused = fmt.Errorf("loader: plugin %s: %s has no hash for %s; run `switchboard plugin lock -platform=%s`", p.Name, lock.Path, pluginstore.Platform(), pluginstore.Platform())
		}
		jobs = append(jobs, j)
	}
	for _, x := range cfg.Externals {
		source := fmt.Sprintf("external %q (%s)", x.Name, rangeText(cfg, x.Range.Filename, x.Range.Start.Line))
		if x.FromMCPJSON {
			source = fmt.Sprintf("external %q (.mcp.json)", x.Name)
		}
		j := externalJob(cfg, files, x, source, self)
		j.gate = gate
		jobs = append(jobs, j)
	}
	for _, bin := range pluginstore.Newest(pluginstore.List(cfg.SearchDirs())) {
		path, name := bin.Path, bin.Name
		if named[path] || named["name:"+name] {
			continue
		}
		state := filepath.Join(cfg.DataDir, "plugins", name)
		j := job{
			spec: launcher.Spec{
				Name: name, Path: path, ProjectDir: cfg.ProjectDir, DataDir: state, HostDataDir: cfg.DataDir,
				ProtectedPaths: protected,
				Sandbox:        confinement(cfg, files, registry.KindPlugin, name, config.Sandbox{}, nil, state, self),
			},
			kind:       registry.KindPlugin,
			source:     fmt.Sprintf("discovered plugin %s", path),
			discovered: true,
			restart:    cfg.Restart,
			refused:    lockErr,
			gate:       gate,
		}
		switch pin := lock.Pin(name); {
		case name == builtins.Reserved:
			j.refused = &ReservedNameError{Path: path}
		case lockErr != nil:
		case pin != "":
			j.spec.SHA256, j.spec.PinnedBy = pin, lock.Path
		case lock.Plugins[name] != nil:
			j.refused = fmt.Errorf("loader: discovered plugin %s: %s has no hash for %s; run `switchboard plugin lock -platform=%s`", path, lock.Path, pluginstore.Platform(), pluginstore.Platform())
		case !cfg.AllowUnlocked:
			j.refused = &UnlockedError{Path: path, Name: name, LockFile: lock.Path}
		}
		jobs = append(jobs, j)
	}
	jobs = withReattach(jobs)
	refusePlantable(cfg, jobs)
	for i := range jobs {
		if jobs[i].ext == nil {
			jobs[i].hashes = hashesIn(cfg.DataDir) // pinned binaries are read once, not at every start
		}
	}
	return jobs
}

// sandboxOf is the kernel sandbox a job's process runs in (nil: none).
func sandboxOf(j job) *sandbox.Sandbox {
	if j.ext != nil {
		sb, _ := j.ext.Sandbox.(*sandbox.Sandbox)
		return sb
	}
	sb, _ := j.spec.Sandbox.(*sandbox.Sandbox)
	return sb
}

// boundReadOnly reports whether job w's sandbox binds the control plane
// read-only over itself (namespaces on this machine, sandbox not off).
func boundReadOnly(w job) bool {
	sb := sandboxOf(w)
	if sb == nil || sb.Policy.Mode == sandbox.ModeOff {
		return false
	}
	r := sb.Report()
	return r.Namespaces && r.Confined()
}

// PlantableError refuses a plugin whose binary is not there and not pinned,
// at a path a server may write: whatever a tool put there would run as
// that plugin, with its grants (found from outside: a missing binary in
// the project was retried until bash had written one). A binary that is
// there when the host starts is bound read-only in every sandbox.
type PlantableError struct {
	Name, Path, Why string
	Missing         bool   // the binary is not there
	Link            string // else: the symbolic link on its path a server may replace
}

func (e *PlantableError) Error() string {
	what := e.Path + " does not exist"
	if !e.Missing {
		what = fmt.Sprintf("%s is reached through the symbolic link %s", e.Path, e.Link)
	}
	return fmt.Sprintf("loader: plugin %s: %s, and %s, so a tool could put a program there that would run as this plugin; install the plugin outside the folders servers may write (`switchboard plugin install`) and name the file itself, or pin it (sha256 = \"…\" in its block, or `switchboard plugin lock`), then reload", e.Name, what, e.Why)
}

// refusePlantable refuses the configured, unpinned plugins whose binary a
// server could replace (PlantableError): one that is missing where a
// server may write, and one reached through a symbolic link that lies
// where a server may write (the sandbox binds the file the link names
// read-only, not the link: found from outside, bash pointed the link at
// its own program, which the next start ran).
func refusePlantable(cfg *config.Config, jobs []job) {
	writable := func(file string, confinedOnly bool) string {
		for _, w := range jobs {
			if confinedOnly && !boundReadOnly(w) {
				continue
			}
			if why := reaches(w, file, cfg.ProjectDir); why != "" {
				return why
			}
		}
		return ""
	}
	for i := range jobs {
		j := &jobs[i]
		if j.kind != registry.KindPlugin || j.discovered || j.refused != nil || j.spec.SHA256 != "" || j.spec.Reattach != nil {
			continue
		}
		path := j.spec.Path
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			if why := writable(filepath.Join(resolved(filepath.Dir(path)), filepath.Base(path)), false); why != "" {
				j.refused = &PlantableError{Name: j.spec.Name, Path: path, Why: why, Missing: true}
			}
			continue
		}
		for p := path; p != filepath.Dir(p); p = filepath.Dir(p) {
			if st, err := os.Lstat(p); err != nil || st.Mode()&fs.ModeSymlink == 0 {
				continue
			}
			// Only servers whose sandbox binds the binary read-only: one
			// that is not confined could replace the binary itself.
			if why := writable(filepath.Join(resolved(filepath.Dir(p)), filepath.Base(p)), true); why != "" {
				j.refused = &PlantableError{Name: j.spec.Name, Path: path, Why: why, Link: p}
				break
			}
		}
	}
}

// ReservedNameError is a discovered plugin named like the built-in
// `switchboard` server, a name no other server may take.
type ReservedNameError struct {
	Path string
}

func (e *ReservedNameError) Error() string {
	return fmt.Sprintf("loader: discovered plugin %s is named %q, which is reserved for the built-in introspection server; rename the binary (and the name it reports)", e.Path, builtins.Reserved)
}

// withHostService gives the built-in switchboard server its back-channel.
func (h *Host) withHostService(jobs []job) []job {
	if h.hostSvc == nil {
		return jobs
	}
	for i := range jobs {
		if jobs[i].kind == registry.KindBuiltin && jobs[i].spec.Name == builtins.Reserved {
			jobs[i].spec.HostService = h.hostSvc
		}
	}
	return jobs
}

// builtinSource names where a built-in comes from: its block, or "on by
// default" for one that runs without a block.
func builtinSource(cfg *config.Config, b *config.Builtin) string {
	if b.Range.Filename == "" {
		return fmt.Sprintf("builtin %q (on by default)", b.Name)
	}
	return fmt.Sprintf("builtin %q (%s)", b.Name, rangeText(cfg, b.Range.Filename, b.Range.Start.Line))
}

// UnlockedError is a discovered plugin the lock file does not list: every
// binary dropped into a plugin directory would otherwise run unchecked.
type UnlockedError struct {
	Path, Name, LockFile string
}

func (e *UnlockedError) Error() string {
	return fmt.Sprintf("loader: discovered plugin %s is not in %s, so it does not run: if you trust it, run `switchboard plugin lock` (or set allow_unlocked_plugins = true in the config)", e.Path, e.LockFile)
}

// readLock reads the config's lock file (empty when there is none). An
// unreadable one runs no plugin, so the error is every plugin's.
func readLock(cfg *config.Config) (*pluginstore.Lock, error) {
	lock, _, err := pluginstore.ReadLock(cfg.LockFile())
	if err != nil {
		return lock, fmt.Errorf("loader: %w", err)
	}
	return lock, nil
}

func rangeText(cfg *config.Config, file string, line int) string {
	rel, err := filepath.Rel(filepath.Dir(cfg.File), file)
	if err != nil {
		rel = file
	}
	return fmt.Sprintf("%s:%d", rel, line)
}

// externalSandbox confines a stdio external server (one reached over HTTP
// runs elsewhere). self is the host's binary (Options.Self), beside which
// the sandbox helper is found, as for every other server.
func externalSandbox(cfg *config.Config, files hostFiles, x *config.External, self string) *sandbox.Sandbox {
	if x.Command == "" {
		return nil
	}
	sb := confinement(cfg, files, registry.KindExternal, x.Name, x.Sandbox, nil, ExternalState(cfg, x.Name), self)
	// What the server's own env block sets, it keeps (a cache it names
	// is granted with sandbox { write = [...] }).
	for k := range x.Env {
		delete(sb.Policy.Env, k)
	}
	return sb
}

// ExternalState is an external stdio server's own folder under data_dir
// (its home folder, with its package caches, is in it).
func ExternalState(cfg *config.Config, name string) string {
	return filepath.Join(cfg.DataDir, "externals", name)
}

// The instances the loader hands the supervisor, with the optional
// capabilities the supervisor passes on (PID, protocol version and
// confinement for inspect and status): a type assertion that stopped
// matching would fail silently, so it fails the build instead.
var (
	_ supervisor.Instance       = (*launcher.Plugin)(nil)
	_ supervisor.Instance       = (*external.Server)(nil)
	_ registry.Process          = (*launcher.Plugin)(nil)
	_ registry.Process          = (*external.Server)(nil)
	_ registry.Confined         = (*launcher.Plugin)(nil)
	_ registry.Confined         = (*external.Server)(nil)
	_ supervisor.Busy           = (*launcher.Plugin)(nil)
	_ supervisor.SandboxStopped = (*launcher.Plugin)(nil)
)

// PluginTarget is a plugin the config loads: a plugin block, or a binary
// discovered in plugin_dirs or the install directory.
type PluginTarget struct {
	// Name is the block's label, or the NAME of a discovered binary.
	Name string
	Path string
	// Discovered is set for binaries found without a block.
	Discovered bool
	// Spec is how the host would launch it (pinned by the lock or the
	// block when they pin it).
	Spec launcher.Spec
	// Refused is why the host would not start it, if it would not.
	Refused error
}

// ExternalTarget is an external MCP server the config loads: an external
// block, or a server of the project's .mcp.json that a person approved
// (one waiting for approval is left out: nothing may start it).
type ExternalTarget struct {
	Name string
	// Where is its command line or URL, for people.
	Where string
	spec  external.Spec
}

// Connect starts (or connects to) the server once, as the host would,
// sandbox included. The caller closes it.
func (t ExternalTarget) Connect(ctx context.Context, log hclog.Logger) (*external.Server, error) {
	return external.Connect(ctx, t.spec, log.Named("external"))
}

// ExternalTargets lists the external servers the config loads, in
// registration order (for `switchboard plugin lock|verify|list`).
func ExternalTargets(cfg *config.Config, self string) []ExternalTarget {
	run, _ := gateMCPJSON(cfg)
	var out []ExternalTarget
	for _, j := range Jobs(run, self) {
		if j.ext == nil {
			continue
		}
		where := j.ext.URL
		if j.ext.Command != "" {
			where = strings.Join(append([]string{j.ext.Command}, j.ext.Args...), " ")
		}
		out = append(out, ExternalTarget{Name: j.ext.Name, Where: where, spec: *j.ext})
	}
	return out
}

// PluginTargets lists the plugins the config loads, in registration
// order (for `switchboard plugin lock|verify|list`).
func PluginTargets(cfg *config.Config, self string) []PluginTarget {
	var out []PluginTarget
	for _, j := range Jobs(cfg, self) {
		if j.kind != registry.KindPlugin {
			continue
		}
		out = append(out, PluginTarget{Name: j.spec.Name, Path: j.spec.Path, Discovered: j.discovered, Spec: j.spec, Refused: j.refused})
	}
	return out
}

// Package loader turns a config into a running registry: it starts every
// built-in, configured plugin and discovered plugin in parallel, then
// registers them in a fixed order (built-ins, plugin blocks in config
// order, discovered plugins by path), so the first claimant of a name
// always keeps it. One plugin failing never stops the others.
package loader

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/launcher"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/host/internal/supervisor"
)

// Files in the data directory.
const (
	// PermissionsFile holds the "always allow / always deny" decisions.
	PermissionsFile = "permissions.json"
	// AuditFile is the audit log, one JSON line per call.
	AuditFile = "audit.jsonl"
)

// PluginPrefix is the file name prefix of plugin binaries.
const PluginPrefix = "switchboard-plugin-"

// Options adjusts Load.
type Options struct {
	// Self is the binary that serves built-ins ("Self plugin-serve NAME");
	// default: the running executable.
	Self string
	// Logger is the host's root logger.
	Logger hclog.Logger
}

type job struct {
	spec    launcher.Spec
	kind    registry.Kind
	source  string
	restart config.Restart
	// discovered plugins are named by what they report.
	discovered bool
}

// Load starts everything the config names and returns the registry. The
// error, if any, is the first failure in registration order; the registry
// is usable either way and lists every failure.
func Load(ctx context.Context, cfg *config.Config, opts Options) (*registry.Registry, error) {
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
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("loader: cannot create data_dir %s: %w", cfg.DataDir, err)
	}

	policy := &registry.Policy{Default: "allow", Access: "write", Source: filepath.Base(cfg.File)}
	if p := cfg.Permissions; p != nil {
		policy.Allow, policy.Deny, policy.Default, policy.Access = p.Allow, p.Deny, p.Default, p.Access
	}
	if err := policy.Load(filepath.Join(cfg.DataDir, PermissionsFile)); err != nil {
		return nil, err
	}
	audit, err := registry.OpenAudit(filepath.Join(cfg.DataDir, AuditFile), cfg.AuditMaxBytes, 3)
	if err != nil {
		return nil, err
	}
	reg := registry.New(policy,
		registry.WithAudit(audit),
		registry.WithDuplicateLimit(cfg.DuplicateCallLimit),
		registry.WithWarnings(log.Warn))

	sup := supervisor.New(log, reg.Refresh)
	reg.AtShutdown(sup.Stop)

	jobs := Jobs(cfg, self)
	results := make([]*launcher.Plugin, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = launcher.Launch(ctx, j.spec, log)
		}()
	}
	wg.Wait()

	var first error
	for i, j := range jobs {
		p, err := results[i], errs[i]
		if err == nil && j.discovered {
			if name := p.Describe().GetName(); registry.NameRE.MatchString(name) {
				p.Rename(name)
			} else {
				_ = p.Close(ctx)
				err = fmt.Errorf("loader: plugin %s reports the name %q, which is not a valid server name ([a-z0-9_-]); give it a plugin block with a label", j.spec.Path, name)
			}
		}
		if err == nil {
			srv := sup.Add(p.Name(), p, starter(j, p.Name(), log), Backoff(j.restart))
			err = reg.Register(srv, j.kind, j.source)
			if err != nil {
				_ = srv.Close(ctx)
			}
		} else {
			reg.Fail(registry.Failure{Name: j.spec.Name, Kind: j.kind, Source: j.source, Err: err})
		}
		if err != nil {
			log.Error("server not loaded", "server", j.spec.Name, "source", j.source, "error", err)
			if first == nil {
				first = err
			}
		}
	}
	return reg, first
}

// starter starts a fresh instance of a job's plugin for the supervisor,
// under the name the server was registered with.
func starter(j job, name string, log hclog.Logger) supervisor.Starter {
	spec := j.spec
	return func(ctx context.Context) (supervisor.Instance, error) {
		p, err := launcher.Launch(ctx, spec, log)
		if err != nil {
			return nil, err
		}
		p.Rename(name)
		return p, nil
	}
}

// Backoff converts a config restart block.
func Backoff(r config.Restart) supervisor.Backoff {
	return supervisor.Backoff{
		Base: r.BaseDelay, Max: r.MaxDelay, Jitter: r.Jitter, MaxAttempts: r.MaxAttempts,
		StableAfter: r.StableAfter, HealthInterval: r.HealthInterval, HealthTimeout: r.HealthTimeout,
	}
}

// Jobs lists what Load starts, in registration order.
func Jobs(cfg *config.Config, self string) []job {
	var jobs []job
	for _, b := range cfg.Builtins {
		jobs = append(jobs, job{
			spec: launcher.Spec{
				Name: b.Name, Path: self, Args: []string{"plugin-serve", b.Name},
				Settings: b.Settings, ProjectDir: cfg.ProjectDir, DataDir: filepath.Join(cfg.DataDir, b.Name), HostDataDir: cfg.DataDir,
			},
			kind:    registry.KindBuiltin,
			source:  fmt.Sprintf("builtin %q (%s)", b.Name, rangeText(cfg, b.Range.Filename, b.Range.Start.Line)),
			restart: b.Restart,
		})
	}
	named := map[string]bool{}
	for _, p := range cfg.Plugins {
		named[p.Path] = true
		jobs = append(jobs, job{
			spec: launcher.Spec{
				Name: p.Name, Path: p.Path, Args: p.Args, Env: p.Env, SHA256: p.SHA256,
				Settings: p.Settings, ProjectDir: cfg.ProjectDir, DataDir: filepath.Join(cfg.DataDir, "plugins", p.Name),
				StartTimeout: p.StartTimeout, HostDataDir: cfg.DataDir,
			},
			kind:    registry.KindPlugin,
			source:  fmt.Sprintf("plugin %q (%s, %s)", p.Name, p.Path, rangeText(cfg, p.Range.Filename, p.Range.Start.Line)),
			restart: p.Restart,
		})
	}
	for _, path := range Discover(cfg.PluginDirs) {
		if named[path] {
			continue
		}
		name := strings.TrimPrefix(filepath.Base(path), PluginPrefix)
		jobs = append(jobs, job{
			spec: launcher.Spec{
				Name: name, Path: path, ProjectDir: cfg.ProjectDir, DataDir: filepath.Join(cfg.DataDir, "plugins", name), HostDataDir: cfg.DataDir,
			},
			kind:       registry.KindPlugin,
			source:     fmt.Sprintf("discovered plugin %s", path),
			discovered: true,
			restart:    cfg.Restart,
		})
	}
	return jobs
}

// Discover lists the executable switchboard-plugin-* files in dirs, sorted.
func Discover(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.IsDir() || !strings.HasPrefix(e.Name(), PluginPrefix) {
				continue
			}
			if info, err := e.Info(); err != nil || info.Mode()&0o111 == 0 {
				continue
			}
			out = append(out, filepath.Join(d, e.Name()))
		}
	}
	slices.Sort(out)
	return out
}

func rangeText(cfg *config.Config, file string, line int) string {
	rel, err := filepath.Rel(filepath.Dir(cfg.File), file)
	if err != nil {
		rel = file
	}
	return fmt.Sprintf("%s:%d", rel, line)
}

// Package pluginserve runs a plugin process: the go-plugin server around a
// protocol.Handler, the stdout guard, the plugin's log output, and the
// watch on the host that ends the process when the host goes. Package sdk's
// Serve is its public face; test fixtures that speak the protocol
// themselves call it directly.
//
// Host plumbing, not a plugin author's API: this package belongs to the
// wire protocol and launch core that the SDK and the host share (see
// package [github.com/switchboard-mcp/switchboard/sdk/protocol]). It is
// exported only because the host is another module; its Go API may change
// in any release, and the only compatibility promise is the protocol
// version. Plugins use package sdk and sdktest.
package pluginserve

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/quietio"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/tuning"
)

// EnvLogLevel is the environment variable the host sets to the plugin's log
// level (trace, debug, info, warn, error).
const EnvLogLevel = "SWITCHBOARD_PLUGIN_LOG_LEVEL"

// SDK is the bridge from package sdk: it returns the protocol handler of
// an *sdk.Server (set by package sdk's init), so that sdktest and fixtures
// can serve a Server whose handler methods are not part of its public API.
var SDK func(server any) protocol.Handler

var (
	loggerOnce sync.Once
	logger     hclog.Logger
)

// Logger returns the plugin process's logger. It writes hclog JSON lines to
// stderr, which the host parses and re-logs under "plugin.<name>" at the
// same level. Never log to stdout: it carries the handshake.
func Logger() hclog.Logger {
	loggerOnce.Do(func() {
		level := hclog.LevelFromString(os.Getenv(EnvLogLevel))
		if level == hclog.NoLevel {
			level = hclog.Info
		}
		logger = hclog.New(&hclog.LoggerOptions{
			Level:      level,
			Output:     os.Stderr,
			JSONFormat: true,
		})
	})
	return logger
}

// Option adjusts Serve.
type Option func(*serveConfig)

type serveConfig struct {
	versions []int
	test     *plugin.ServeTestConfig
}

// WithProtocolVersions overrides the protocol versions the plugin offers.
// Only useful to test a host's version negotiation.
func WithProtocolVersions(versions ...int) Option {
	return func(c *serveConfig) { c.versions = versions }
}

// WithTestConfig serves in go-plugin's in-process test mode (see sdktest).
func WithTestConfig(tc *plugin.ServeTestConfig) Option {
	return func(c *serveConfig) { c.test = tc }
}

// Serve serves a protocol-level handler as a plugin. It:
//   - moves anything written to file descriptor 1 to stderr, so that only
//     the go-plugin handshake reaches the host on stdout;
//   - logs hclog JSON to stderr (see Logger);
//   - raises gRPC's message limits to protocol.MaxMessageSize;
//   - runs with one scheduler slot (runtime.GOMAXPROCS(1)) unless GOMAXPROCS
//     is set in its environment; a plugin whose tools do parallel CPU work
//     should have its config block set it (env = { GOMAXPROCS = "4" });
//   - reads and writes its connection to the host with raw system calls
//     (package quietio, Linux), so that a call after an idle spell does not
//     wake the Go runtime's monitor thread;
//   - exits when the host dies (the parent process changes) or sends
//     SIGTERM, cancelling running calls and stopping its own process group.
func Serve(h protocol.Handler, opts ...Option) {
	cfg := serveConfig{versions: protocol.SupportedVersions}
	for _, o := range opts {
		o(&cfg)
	}
	log := Logger()
	if cfg.test == nil && debugMode() {
		serveDebug(h, cfg, log)
		return
	}
	sets := protocol.PluginSets(h, cfg.versions)
	if cfg.test != nil {
		// go-plugin's test mode has no host to negotiate with and would
		// pick the lowest version; serve the highest, as a host of this
		// build would negotiate.
		top := slices.Max(cfg.versions)
		sets = map[int]plugin.PluginSet{top: sets[top]}
	}
	// The connection's credentials, read and written quietly: go-plugin's
	// are TLS with conf when the host sent its certificate, none in test
	// mode (sdktest in the same process), and its own when pluginTLS
	// failed (left alone).
	var quiet credentials.TransportCredentials
	var conf *tls.Config
	var cert string
	var tlsErr error
	if cfg.test == nil {
		conf, cert, tlsErr = pluginTLS()
	}
	switch {
	case cfg.test != nil:
		quiet = quietio.Creds(insecure.NewCredentials())
	case tlsErr == nil && conf != nil:
		quiet = quietio.Creds(credentials.NewTLS(conf))
	}
	sc := &plugin.ServeConfig{
		HandshakeConfig:  protocol.Handshake,
		VersionedPlugins: sets,
		GRPCServer: func(o []grpc.ServerOption) *grpc.Server {
			if quiet != nil {
				o = append(o, grpc.Creds(quiet)) // the last given wins
			}
			return grpc.NewServer(append(o, protocol.GRPCServerOptions()...)...)
		},
		Logger: log,
		Test:   cfg.test,
	}
	if !protocol.SharesVersion(os.Getenv("PLUGIN_PROTOCOL_VERSIONS"), cfg.versions) {
		// go-plugin's refusal names one of our versions; say them all.
		fmt.Fprintln(os.Stderr, protocol.VersionsLine(cfg.versions))
	}
	stopProfile := tuning.Plugin(log, cfg.test != nil)
	if cfg.test == nil {
		if err := hideMemory(); err != nil {
			log.Warn("the plugin's memory stays readable by its own user's processes", "error", err)
		}
	}
	// Shutdown runs once; a caller arriving while it runs (SIGTERM during
	// a graceful stop) waits for it to finish.
	var once sync.Once
	shutdown := func() {
		once.Do(func() {
			if sd, ok := h.(Shutdowner); ok {
				sd.Shutdown()
			}
			stopProfile()
		})
	}
	if cfg.test != nil {
		plugin.Serve(sc)
		shutdown()
		return
	}

	guardStdout()
	switch {
	case tlsErr != nil:
		log.Warn("go-plugin's own mutual TLS instead", "error", tlsErr)
	case conf != nil:
		sc.TLSProvider = func() (*tls.Config, error) { return conf, nil }
		certOnHandshake(cert)
	}
	stop := watchHost(log, shutdown)
	defer stop()
	plugin.Serve(sc)
	shutdown()
}

// Shutdowner is implemented by handlers that hold resources beyond single
// calls. Serve calls Shutdown once the plugin stops serving, and
// before it exits on SIGTERM or when the host dies.
type Shutdowner interface {
	Shutdown()
}

// watchHost ends the process when the host goes away or asks it to stop.
// The host also sets a parent-death signal; this is the portable backstop.
func watchHost(log hclog.Logger, shutdown func()) (stop func()) {
	ppid := os.Getppid()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case s := <-sig:
				orphaned := os.Getppid() != ppid
				log.Debug("stopping on signal", "signal", s.String(), "orphaned", orphaned)
				shutdown()
				exitNow(0, orphaned)
			case <-t.C:
				if os.Getppid() != ppid {
					log.Warn("host process is gone; exiting")
					shutdown()
					exitNow(1, true)
				}
			}
		}
	}()
	return func() {
		signal.Stop(sig)
		cancel()
	}
}

// debugMode reports whether the plugin was started by hand to be debugged:
// --debug among its arguments, or SWITCHBOARD_PLUGIN_DEBUG=1.
func debugMode() bool {
	return os.Getenv(protocol.EnvPluginDebug) == "1" || slices.Contains(os.Args[1:], "--debug")
}

// serveDebug serves h without a host to start it (go-plugin's reattach
// mode), prints how to point a host at it, and runs until interrupted: so
// that it can sit at a breakpoint under a debugger while a host calls it.
func serveDebug(h protocol.Handler, cfg serveConfig, log hclog.Logger) {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	reattach := make(chan *plugin.ReattachConfig, 1)
	closed := make(chan struct{})
	cfg.test = &plugin.ServeTestConfig{Context: ctx, ReattachConfigCh: reattach, CloseCh: closed}
	protocol.KeepFirstConfigure = true
	go func() {
		select {
		case rc := <-reattach:
			name := strings.TrimPrefix(filepath.Base(os.Args[0]), "switchboard-plugin-")
			name, _, _ = strings.Cut(name, "_v")
			b, _ := json.Marshal(map[string]protocol.Reattach{name: protocol.ReattachOf(rc)})
			fmt.Fprintf(os.Stdout, "Serving in debug mode (pid %d). Point a host at this plugin with (the key is the plugin's name in your config):\n\n  export %s='%s'\n\nthen start switchboard in that shell. Interrupt to stop.\n", os.Getpid(), protocol.EnvReattach, b)
		case <-ctx.Done():
		}
	}()
	log.Info("serving in debug mode")
	Serve(h, WithProtocolVersions(cfg.versions...), WithTestConfig(cfg.test))
	<-closed
}

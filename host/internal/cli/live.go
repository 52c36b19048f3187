package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/control"
	"github.com/switchboard-mcp/switchboard/host/internal/loader"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
)

// hostControl serves a running host over its control socket.
type hostControl struct{ h *loader.Host }

func (c hostControl) Status() any               { return ServerInfos(c.h.Registry()) }
func (c hostControl) Restart(name string) error { return c.h.Restart(name) }
func (c hostControl) Reload(ctx context.Context) (any, error) {
	return c.h.Reload(ctx)
}

func (c hostControl) Connect(ctx context.Context, s control.ExternalSpec) error {
	return c.h.ConnectExternal(ctx, config.External{Name: s.Name, Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL, Headers: s.Headers})
}

func (c hostControl) Disconnect(ctx context.Context, name string) error {
	return c.h.DisconnectExternal(ctx, name)
}

// listenControl opens the host's control socket: it serves only this
// user's processes in the host's own PID namespace that do not descend from
// a plugin, and every action goes to the audit log.
func listenControl(cfg *config.Config, h *loader.Host, log hclog.Logger) (*control.Server, error) {
	guard, err := control.NewGuard()
	if err != nil {
		return nil, err
	}
	reg := h.Registry()
	guard.PluginPIDs(func() []int {
		var pids []int
		for _, e := range reg.Entries() {
			if p, ok := e.Server.(registry.Process); ok && p.PID() > 0 {
				pids = append(pids, p.PID())
			}
		}
		return pids
	})
	return control.Listen(cfg.DataDir, hostControl{h}, control.Options{Guard: guard, Audit: func(ev control.Event) {
		if ev.Outcome == "refused" {
			log.Warn("control request refused", "action", ev.Action, "peer_pid", ev.Peer.PID, "peer_uid", ev.Peer.UID, "reason", ev.Error)
		}
		decision := "allow"
		if ev.Outcome == "refused" {
			decision = "deny"
		}
		reg.Audit(registry.AuditRecord{
			Client: "control", Action: ev.Action, Target: ev.Target, Detail: ev.Detail,
			Peer: &registry.AuditPeer{PID: ev.Peer.PID, UID: ev.Peer.UID}, Decision: decision,
			Outcome: ev.Outcome, Error: ev.Error,
		})
	}})
}

func (a *app) connectCmd() *cobra.Command {
	var url string
	var headers, env []string
	cmd := &cobra.Command{
		Use:   "connect NAME [--url URL | -- COMMAND ARGS...]",
		Short: "Connect an external MCP server to every running host (until it stops)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec := control.ExternalSpec{Name: args[0], URL: url, Headers: kvs(headers), Env: kvs(env)}
			if len(args) > 1 {
				spec.Command, spec.Args = args[1], args[2:]
			}
			if (spec.Command == "") == (spec.URL == "") {
				return fail(2, "give either --url URL or -- COMMAND ARGS...")
			}
			replies, err := a.controlCall(cmd, "POST", "/v1/external", spec)
			if err != nil {
				return err
			}
			for _, r := range replies {
				if r.Code != 200 {
					return fail(2, "%s", errorOf(r.Body))
				}
			}
			fmt.Fprintf(a.stdout, "connected %s on %d host(s)\n", args[0], len(replies))
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "url", "", "streamable HTTP endpoint")
	cmd.Flags().StringArrayVar(&headers, "header", nil, "HTTP header NAME=VALUE (repeatable)")
	cmd.Flags().StringArrayVar(&env, "env", nil, "environment variable NAME=VALUE for a stdio server (repeatable)")
	return cmd
}

func kvs(list []string) map[string]string {
	if len(list) == 0 {
		return nil
	}
	m := map[string]string{}
	for _, kv := range list {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

func (a *app) disconnectCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "disconnect NAME",
		Short: "Disconnect an external MCP server from every running host",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			replies, err := a.controlCall(cmd, "DELETE", "/v1/external?name="+args[0])
			if err != nil {
				return err
			}
			for _, r := range replies {
				if r.Code != 200 {
					return fail(2, "%s", errorOf(r.Body))
				}
			}
			fmt.Fprintf(a.stdout, "disconnected %s on %d host(s)\n", args[0], len(replies))
			return nil
		},
	}
}

// watchReload reloads the config on SIGHUP and when the file changes
// (debounced). It returns a function that stops watching.
func watchReload(ctx context.Context, h *loader.Host, log hclog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	trigger := make(chan string, 1)
	kick := func(why string) {
		select {
		case trigger <- why:
		default:
		}
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)

	file := h.Config().File
	var w *fsnotify.Watcher
	var err error
	if h.Config().WatchConfig {
		w, err = fsnotify.NewWatcher()
	}
	if w != nil {
		// Watch the folder: editors replace files rather than write them.
		if err := w.Add(filepath.Dir(file)); err != nil {
			log.Warn("not watching the config file for changes", "error", err)
		}
	} else if err != nil {
		log.Warn("not watching the config file for changes", "error", err)
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		var events <-chan fsnotify.Event
		var errs <-chan error
		if w != nil {
			events, errs = w.Events, w.Errors
		}
		var debounce <-chan time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				kick("SIGHUP")
			case ev := <-events:
				if filepath.Clean(ev.Name) == file && ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename) != 0 {
					debounce = time.After(300 * time.Millisecond)
				}
			case err := <-errs:
				log.Debug("config watcher", "error", err)
			case <-debounce:
				debounce = nil
				kick("the config file changed")
			}
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case why := <-trigger:
				log.Info("reloading the config", "because", why)
				if _, err := h.Reload(ctx); err != nil {
					log.Error("reload refused", "error", err)
				}
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		cancel()
		if w != nil {
			_ = w.Close()
		}
		wg.Wait()
	}
}

// dataDir finds the data directory of the config without starting
// anything; an unreadable config falls back to the default location.
func (a *app) dataDir() (string, error) {
	return config.PeekDataDir(config.ResolvePath(a.configFlag))
}

func (a *app) controlCall(cmd *cobra.Command, method, path string, body ...any) ([]control.Reply, error) {
	dir, err := a.dataDir()
	if err != nil {
		return nil, fail(2, "%v", err)
	}
	replies, err := control.Call(cmd.Context(), dir, method, path, body...)
	if err != nil {
		if errors.Is(err, control.ErrNoHost) {
			return nil, fail(2, "%v", err)
		}
		return nil, fail(2, "%v", err)
	}
	return replies, nil
}

func (a *app) statusCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the servers of every running host on this config (live inspect)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			replies, err := a.controlCall(cmd, "GET", "/v1/status")
			if err != nil {
				return err
			}
			type hostStatus struct {
				PID     int          `json:"pid"`
				Servers []ServerInfo `json:"servers"`
			}
			var all []hostStatus
			for _, r := range replies {
				var hs hostStatus
				if err := json.Unmarshal(r.Body, &hs); err != nil {
					return fail(2, "bad answer from %s: %v", r.Socket, err)
				}
				all = append(all, hs)
			}
			if a.jsonOut {
				return a.printJSON(all)
			}
			for i, hs := range all {
				if i > 0 {
					fmt.Fprintln(a.stdout)
				}
				fmt.Fprintf(a.stdout, "host pid %d\n", hs.PID)
				PrintServers(a.stdout, hs.Servers)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&a.jsonOut, "json", false, "print JSON")
	return cmd
}

func (a *app) restartCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "restart NAME",
		Short: "Restart one server of every running host now (no backoff wait)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			replies, err := a.controlCall(cmd, "POST", "/v1/restart?name="+args[0])
			if err != nil {
				return err
			}
			for _, r := range replies {
				if r.Code != 200 {
					return fail(2, "%s", errorOf(r.Body))
				}
			}
			fmt.Fprintf(a.stdout, "restarting %s on %d host(s)\n", args[0], len(replies))
			return nil
		},
	}
}

func (a *app) reloadCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "reload",
		Short: "Make every running host re-read its config and apply the changes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			replies, err := a.controlCall(cmd, "POST", "/v1/reload")
			if err != nil {
				return err
			}
			for _, r := range replies {
				if r.Code != 200 {
					fmt.Fprintln(a.stderr, errorOf(r.Body))
					return fail(1, "reload refused; the host keeps running on its previous config")
				}
				var res struct {
					PID    int                 `json:"pid"`
					Result loader.ReloadResult `json:"result"`
				}
				_ = json.Unmarshal(r.Body, &res)
				fmt.Fprintf(a.stdout, "host pid %d: added %v, removed %v, restarted %v, permissions changed %v\n",
					res.PID, res.Result.Added, res.Result.Removed, res.Result.Restarted, res.Result.PermissionsChanged)
				for _, w := range res.Result.Warnings {
					fmt.Fprintf(a.stdout, "  note: %s\n", w)
				}
			}
			return nil
		},
	}
}

func errorOf(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return e.Error
	}
	return string(body)
}

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/switchboard-mcp/switchboard/host/internal/approvals"
	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/control"
	"github.com/switchboard-mcp/switchboard/host/internal/frontend"
	"github.com/switchboard-mcp/switchboard/host/internal/loader"
	"github.com/switchboard-mcp/switchboard/host/internal/logbook"
	"github.com/switchboard-mcp/switchboard/host/internal/pluginstore"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/host/internal/statuspage"
	"github.com/switchboard-mcp/switchboard/host/internal/strictmode"
)

// hostControl serves a running host over its control socket.
type hostControl struct {
	h        *loader.Host
	watch    *configWatch
	book     *logbook.Book
	activity func() (statuspage.Snapshot, error)
}

// Activity implements control.Activity: the status page's snapshot.
func (c hostControl) Activity() (any, error) {
	if c.activity == nil {
		return nil, errors.New("this host keeps no activity")
	}
	return c.activity()
}

func (c hostControl) Status() any                         { return ServerInfos(c.h.Registry()) }
func (c hostControl) Restart(name string) (string, error) { return c.h.Restart(name) }
func (c hostControl) Reload(ctx context.Context) (any, error) {
	return c.watch.reload(ctx, c.h)
}

// Notices implements control.Noticer: a changed config file that waits for
// a person.
func (c hostControl) Notices() []string { return c.watch.notices() }

// configWatch is what the config watcher knows that status shows: a
// changed file it did not apply because a tool could have written it.
type configWatch struct {
	mu      sync.Mutex
	waiting string // the notice, "" when nothing waits
	// suspect is why the file may have been written by a server since it
	// was last applied ("" when no server could have): set whenever the
	// watcher finds the file in some server's reach, even without an
	// event (a write through mmap makes none, and a later event would
	// apply it once the writer was gone: red team round 7); cleared by a
	// reload.
	suspect string
	// applied, when set, gets each config a reload applied (the front
	// end's own settings).
	applied func(*config.Config)
	// background, when set, is told when the watcher's periodic checks
	// have run (tuning.Quiet.Background: an idle host gives back the
	// pages of its binary that they mapped).
	background func()
}

// onBackground sets the function told after each round of periodic checks.
func (w *configWatch) onBackground(fn func()) {
	w.mu.Lock()
	w.background = fn
	w.mu.Unlock()
}

// checked tells the background function that periodic checks ran.
func (w *configWatch) checked() {
	w.mu.Lock()
	fn := w.background
	w.mu.Unlock()
	if fn != nil {
		fn()
	}
}

// onApplied sets the function that gets each config a reload applied.
func (w *configWatch) onApplied(fn func(*config.Config)) {
	w.mu.Lock()
	w.applied = fn
	w.mu.Unlock()
}

func newConfigWatch() *configWatch { return &configWatch{} }

func (w *configWatch) notices() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.waiting == "" {
		return nil
	}
	return []string{w.waiting}
}

func (w *configWatch) hold(reason string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waiting = "config changed on disk; run `switchboard reload` to apply (auto-reload is off because " + reason + ")"
}

// suspected records why the file may have been written by a server.
func (w *configWatch) suspected(why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.suspect == "" {
		w.suspect = why
	}
}

// suspicion is why the file may have been written by a server since it
// was last applied, or "".
func (w *configWatch) suspicion() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.suspect
}

// reload reloads the host; once the file applies, nothing waits.
func (w *configWatch) reload(ctx context.Context, h *loader.Host) (*loader.ReloadResult, error) {
	res, err := h.Reload(ctx)
	if err == nil {
		w.mu.Lock()
		w.waiting, w.suspect = "", ""
		applied := w.applied
		w.mu.Unlock()
		if applied != nil {
			applied(h.Config())
		}
	}
	// A config replaced on disk is not covered by the mounts of sandboxes
	// that started before; restart those.
	h.Rehide()
	return res, err
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
func listenControl(cfg *config.Config, h *loader.Host, watch *configWatch, book *logbook.Book, activity func() (statuspage.Snapshot, error), log hclog.Logger) (*control.Server, error) {
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
	return control.Listen(cfg.DataDir, hostControl{h, watch, book, activity}, control.Options{Guard: guard, Audit: func(ev control.Event) {
		if ev.Action == "activity" && ev.Outcome == "ok" {
			return // the status page's polling: read-only, and frequent
		}
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

// A changed config file is applied once it has been quiet for
// reloadSettle (editors write in steps), and at most reloadMaxWait after
// the first change of a burst.
const (
	reloadSettle  = 300 * time.Millisecond
	reloadMaxWait = 2 * time.Second
	// reachCheck is how often the watcher checks whether a server could
	// write the config file (configWatch.suspect).
	reachCheck = 2 * time.Second
	// placeholderCheck is how often the watcher checks the .git
	// placeholders (loader.Host.RestorePlaceholders) and other hosts' files
	// (loader.Host.CoverOtherHosts), and placeholderSettle
	// how long a moved one waits, so that a person's `rm .git && git init`
	// has made the repository the restarted servers then see read-only.
	placeholderCheck  = 2 * time.Second
	placeholderSettle = 300 * time.Millisecond
	// gitSettle is how long a change in a watched git folder waits
	// before the servers' git protection is checked (a git command
	// writes several files).
	gitSettle = 100 * time.Millisecond
)

// watchReload reloads the config on SIGHUP, and when the file changes
// (debounced) while no tool can have written it (loader.Host.
// ConfigOutOfReach); otherwise the change waits for `switchboard reload`
// and status says so (watch). It returns a function that stops watching.
func watchReload(ctx context.Context, h *loader.Host, watch *configWatch, log hclog.Logger) (stop func()) {
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

	file, lockFile := h.Config().File, h.Config().LockFile()
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
	if w != nil {
		if ok, why := h.ConfigOutOfReach(); !ok {
			log.Info("changes to the config file wait for `switchboard reload`", "because", why)
		}
	}
	// This host's sandboxes cannot have covered the config before it
	// started (red team round 11: one host's bash wrote an external
	// server into another's config, which ran at that host's next start).
	// A warning: read while the host goes on to serve (the other hosts'
	// records, a file each).
	go func() {
		if why := loader.OtherHostReaches(file); why != "" {
			log.Warn("the config file is within reach of another running host's servers: a tool of theirs could have changed it before this host started; review it, and keep it out of their folders", "because", why)
		}
	}()
	wg.Add(2)
	go func() {
		defer wg.Done()
		var events <-chan fsnotify.Event
		var errs <-chan error
		if w != nil {
			events, errs = w.Events, w.Errors
		}
		// Who could write the file is checked now and then, not only at
		// its events.
		var reach <-chan time.Time
		if w != nil {
			tick := time.NewTicker(reachCheck)
			defer tick.Stop()
			reach = tick.C
		}
		// The .git placeholders are checked whether or not the config is
		// watched: they guard the person's git, not the config. Their
		// folders are watched too, so that the servers that bound one
		// that is removed stop at once (loader.Host.StopForPlaceholder).
		placeTick := time.NewTicker(placeholderCheck)
		defer placeTick.Stop()
		var placeEvents <-chan fsnotify.Event
		var placeErrs <-chan error
		placed := map[string]bool{}
		pw, perr := fsnotify.NewWatcher()
		if perr == nil {
			defer func() { _ = pw.Close() }()
			placeEvents, placeErrs = pw.Events, pw.Errors
		}
		watchPlaceholders := func() {
			if pw == nil {
				return
			}
			for _, p := range loader.Placeholders() {
				if !placed[p] && pw.Add(filepath.Dir(p)) == nil {
					placed[p] = true
				}
			}
		}
		watchPlaceholders()
		// The git folders of the work trees servers may write: a
		// submodule, linked work tree, hooks path or include the person
		// adds while the host runs is bound read-only once the servers
		// that may write it restart (loader.Host.ReprotectGit).
		gitWatched := map[string]bool{}
		watchGit := func() {
			if pw == nil {
				return
			}
			for _, d := range h.GitFolders() {
				if !gitWatched[d] && pw.Add(d) == nil {
					gitWatched[d] = true
				}
			}
		}
		watchGit()
		var debounce, rehide, restore, reprotect <-chan time.Time
		var due time.Time // the latest a burst of changes waits until
		// taint is why a change of this burst may not be a person's, as
		// seen when it was made: by the end of the wait the server that
		// made it may be gone (another host's, stopping: red team round 6).
		var taint string
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				kick("SIGHUP")
			case ev := <-events:
				switch filepath.Clean(ev.Name) {
				case file:
					if ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename) != 0 {
						// Quiet for a moment, or at most reloadMaxWait
						// after the first change: a file written again
						// and again is still applied.
						if debounce == nil {
							due = time.Now().Add(reloadMaxWait)
						}
						if ok, why := h.ConfigOutOfReach(); !ok && taint == "" {
							taint = why
						}
						debounce = time.After(max(0, min(reloadSettle, time.Until(due))))
					}
				case lockFile:
					// `switchboard plugin lock` replaces the lock file:
					// sandboxes that covered the old one must start
					// afresh to cover the new one.
					if ev.Op&(fsnotify.Create|fsnotify.Rename) != 0 {
						rehide = time.After(300 * time.Millisecond)
					}
				}
			case <-reach:
				if ok, why := h.ConfigOutOfReach(); !ok {
					watch.suspected(why)
				}
			case ev := <-placeEvents:
				if gitWatched[filepath.Dir(filepath.Clean(ev.Name))] && reprotect == nil {
					reprotect = time.After(gitSettle)
				}
				if placed[filepath.Clean(ev.Name)] && ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0 {
					if names := h.StopForPlaceholder(filepath.Clean(ev.Name)); len(names) > 0 {
						log.Warn("a .git placeholder was removed; stopped at once the servers whose sandboxes bound it", "placeholder", ev.Name, "servers", strings.Join(names, ", "))
					}
					if restore == nil {
						restore = time.After(placeholderSettle)
					}
				}
			case err := <-placeErrs:
				log.Debug("placeholder watcher", "error", err)
			case <-placeTick.C:
				watchPlaceholders()
				watchGit()
				if reprotect == nil {
					reprotect = time.After(0)
				}
				if restore == nil && loader.PlaceholdersMoved() {
					restore = time.After(placeholderSettle)
				}
				if names := h.CoverOtherHosts(); len(names) > 0 {
					log.Info("another host started on a project these servers may write; restarted them so that its config and .git placeholders are out of their reach", "servers", strings.Join(names, ", "))
				}
				watch.checked()
			case <-reprotect:
				reprotect = nil
				watchGit() // a modules or worktrees folder made meanwhile
				if names := h.ReprotectGit(); len(names) > 0 {
					log.Warn("what your git runs programs from changed in a repository servers may write (a submodule, linked work tree, hooks path or include added): restarted them so that it is read-only to them; a server may have written it before the restart (look at the new submodule's or work tree's .git file, config and hooks before you run git there)", "servers", strings.Join(names, ", "))
				}
			case <-restore:
				restore = nil
				for _, m := range h.RestorePlaceholders() {
					log.Warn("a .git placeholder was moved while servers that may write its folder ran: restarted them so that what is there is read-only to them; a repository made there meanwhile may hold what a server wrote before the restart (look at its .git/config and hooks before you run git there; stop the host before making a repository)", "placeholder", m.Path, "servers", strings.Join(m.Servers, ", "), "other_host", m.OtherHost)
				}
			case <-rehide:
				rehide = nil
				if names := h.Rehide(); len(names) > 0 {
					log.Info("the lock file was replaced on disk; restarted the confined servers so that it stays read-only to them", "servers", strings.Join(names, ", "))
				}
			case err := <-errs:
				log.Debug("config watcher", "error", err)
			case <-debounce:
				debounce = nil
				// A replaced file is not covered by the sandboxes that
				// hid the old one: start them afresh first.
				if names := h.Rehide(); len(names) > 0 {
					log.Info("the config file was replaced on disk; restarted the confined servers so that it stays hidden from them", "servers", strings.Join(names, ", "))
				}
				// A change a tool could have made is not a person's.
				why := taint
				taint = ""
				if ok, now := h.ConfigOutOfReach(); !ok {
					why = now
				}
				if why == "" {
					why = watch.suspicion()
				}
				if why != "" {
					watch.hold(why)
					log.Warn("the config file changed; not applying it until `switchboard reload`", "because", why)
					continue
				}
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
				res, err := watch.reload(ctx, h)
				if err != nil {
					log.Error("reload refused", "error", err)
					continue
				}
				for _, w := range res.Warnings {
					log.Warn("config: " + w)
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
			// An invalid config may hide where the host is (its data_dir
			// cannot be read): say what is wrong with it instead.
			cfgPath := config.ResolvePath(a.configFlag)
			if res := config.Load(cfgPath); res.Diags.HasErrors() {
				_ = res.WriteDiagnostics(a.stderr)
				return nil, fail(1, "%s is invalid, so the host it names cannot be found; fix it (a running host keeps its previous config)", cfgPath)
			}
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
				PID int `json:"pid"`
				// Host is the host process's own figures (goroutines,
				// Go heap).
				Host    *control.HostStats `json:"host,omitempty"`
				Servers []ServerInfo       `json:"servers"`
				// Notices are for a person: a changed config waiting
				// for `switchboard reload`.
				Notices []string `json:"notices,omitempty"`
			}
			var all []hostStatus
			for _, r := range replies {
				var hs hostStatus
				if err := json.Unmarshal(r.Body, &hs); err != nil {
					return fail(2, "bad answer from %s: %v", r.Socket, err)
				}
				all = append(all, hs)
			}
			var rows []ServerInfo
			for _, hs := range all {
				rows = append(rows, hs.Servers...)
			}
			if a.jsonOut {
				if err := a.printJSON(all); err != nil {
					return err
				}
				return failedExit(rows)
			}
			for i, hs := range all {
				if i > 0 {
					fmt.Fprintln(a.stdout)
				}
				fmt.Fprintf(a.stdout, "host pid %d", hs.PID)
				if hs.Host != nil {
					fmt.Fprintf(a.stdout, ": %d goroutines, Go heap %.1f MB", hs.Host.Goroutines, float64(hs.Host.HeapBytes)/1e6)
				}
				fmt.Fprintln(a.stdout)
				for _, n := range hs.Notices {
					fmt.Fprintf(a.stdout, "note: %s\n", n)
				}
				PrintServers(a.stdout, hs.Servers)
			}
			return failedExit(rows)
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
			// Each host says what it did: a server a call starts that
			// has no process is left for its next call.
			said := map[string]int{}
			var order []string
			for _, r := range replies {
				var body struct {
					Message string `json:"message"`
				}
				msg := "restarting " + args[0]
				if json.Unmarshal(r.Body, &body) == nil && body.Message != "" {
					msg = body.Message
				}
				if said[msg] == 0 {
					order = append(order, msg)
				}
				said[msg]++
			}
			for _, msg := range order {
				fmt.Fprintf(a.stdout, "%s on %d host(s)\n", msg, said[msg])
			}
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
			return a.printReloads(replies)
		},
	}
}

// printReloads prints what each host's reload did.
func (a *app) printReloads(replies []control.Reply) error {
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

func (a *app) approveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "approve NAME",
		Short: "Approve what waits on a person: a quarantined server's new tools, or a server from .mcp.json",
		Long: "Release a server quarantined because its surface changed (tools or instructions)\n" +
			"after showing the difference (updating " + pluginstore.LockFileName + " when it pins them, else the approval\n" +
			"in data_dir), or approve a server from .mcp.json as it is now (its command, args, env, url and\n" +
			"headers). Every running host on the config then reloads. A changed entry needs approving again.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			name := args[0]
			if done, err := a.approveSurface(cmd.Context(), cfg, name); done || err != nil {
				return err
			}
			var x *config.External
			for _, e := range cfg.Externals {
				if e.Name == name && e.FromMCPJSON {
					x = e
				}
			}
			if x == nil {
				if cfg.MCPJSON == "" {
					return fail(2, "nothing named %q awaits approval (import_mcp_json is off in %s)", name, cfg.File)
				}
				return fail(2, "nothing named %q awaits approval: %s has no server of that name", name, cfg.MCPJSON)
			}
			if err := strictmode.PrivateDir(cfg.DataDir); err != nil {
				return fail(2, "data_dir: %v", err)
			}
			entry := x.ApprovalEntry()
			changed, err := approvals.Open(cfg.DataDir).Approve(approvals.KindMCPJSON, name, entry.Hash())
			if err != nil {
				return fail(2, "%v", err)
			}
			verb := "approved"
			if !changed {
				verb = "already approved"
			}
			fmt.Fprintf(a.stdout, "%s %s from %s:\n%s", verb, name, cfg.MCPJSON, describeEntry(entry))
			if len(x.ProjectFiles) > 0 {
				fmt.Fprintf(a.stdout, "note: %s, in the project, is approved by its content and read-only to every server; what it loads from the project (a module beside it, a file it reads) is not: a tool that may write the project can change what %s runs. Keep an approved server's code outside the project, or check what it loads.\n",
					strings.Join(x.ProjectFiles, ", "), name)
			}
			// A reload applies the whole file: not a config change that
			// waits for a person, on this person's yes to one server.
			if st, err := control.Call(cmd.Context(), cfg.DataDir, "GET", "/v1/status"); err == nil {
				for _, r := range st {
					var hs struct {
						Notices []string `json:"notices"`
					}
					if json.Unmarshal(r.Body, &hs) == nil && len(hs.Notices) > 0 {
						fmt.Fprintf(a.stdout, "not reloading the running hosts: %s\ncheck %s, then run `switchboard reload`; it starts %s too\n", hs.Notices[0], cfg.File, name)
						return nil
					}
				}
			}
			replies, err := control.Call(cmd.Context(), cfg.DataDir, "POST", "/v1/reload")
			if errors.Is(err, control.ErrNoHost) {
				fmt.Fprintln(a.stdout, "no running host on this config; it starts with the next `switchboard serve`")
				return nil
			}
			if err != nil {
				return fail(2, "approved, but the running hosts did not reload: %v", err)
			}
			return a.printReloads(replies)
		},
	}
}

// describeEntry shows what an approval covers, one item a line, every
// value quoted where it holds more than plain characters (so escape
// sequences in a hostile entry show as text).
func describeEntry(e approvals.Entry) string {
	var b strings.Builder
	if e.URL != "" {
		fmt.Fprintf(&b, "  url:     %s\n", quoteArg(e.URL))
		for _, k := range sortedKeys(e.Headers) {
			fmt.Fprintf(&b, "  header:  %s (value not shown)\n", quoteArg(k))
		}
		return b.String()
	}
	line := []string{quoteArg(e.Command)}
	for _, arg := range e.Args {
		line = append(line, quoteArg(arg))
	}
	fmt.Fprintf(&b, "  command: %s\n", strings.Join(line, " "))
	for _, k := range sortedKeys(e.Env) {
		fmt.Fprintf(&b, "  env:     %s=%s\n", quoteArg(k), quoteArg(e.Env[k]))
	}
	return b.String()
}

var plainArg = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

func quoteArg(s string) string {
	if plainArg.MatchString(s) {
		return s
	}
	return strconv.Quote(s)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// serverApprover puts the .mcp.json servers that wait for approval to a
// client that can elicit (frontend.ServerApprover); a yes is recorded as
// `switchboard approve NAME` records it.
type serverApprover struct {
	h     *loader.Host
	watch *configWatch
}

// pending is the .mcp.json servers that wait for approval.
func (s serverApprover) pending() map[string]*config.External {
	cfg := s.h.Config()
	store := approvals.Open(cfg.DataDir)
	out := map[string]*config.External{}
	for _, x := range cfg.Externals {
		if !x.FromMCPJSON {
			continue
		}
		if store.Check(approvals.KindMCPJSON, x.Name, x.ApprovalEntry().Hash()) != nil {
			out[x.Name] = x
		}
	}
	return out
}

// PendingServers shows each entry as .mcp.json writes it: the client is
// asked, and the values ${VAR} takes from the host's environment are not
// the client's to read (the approval covers them all the same: its hash
// is of what runs).
func (s serverApprover) PendingServers() []frontend.PendingServer {
	var out []frontend.PendingServer
	for name, x := range s.pending() {
		e := x.ApprovalEntry()
		what := describeEntry(x.AsWritten)
		if what != describeEntry(e) {
			what += "  (${…} filled in from the host's environment when it runs; the values are not shown)\n"
		}
		out = append(out, frontend.PendingServer{Name: name, What: what, Hash: e.Hash()})
	}
	slices.SortFunc(out, func(a, b frontend.PendingServer) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (s serverApprover) ApproveServer(ctx context.Context, name, hash string) error {
	x, ok := s.pending()[name]
	if !ok || x.ApprovalEntry().Hash() != hash {
		return fmt.Errorf("%s changed while the person was asked; it waits for a new approval", name)
	}
	if _, err := approvals.Open(s.h.Config().DataDir).Approve(approvals.KindMCPJSON, name, hash); err != nil {
		return err
	}
	// As `switchboard approve`: a reload applies the whole file, so not
	// while a config change a tool could have made is held.
	if notes := s.watch.notices(); len(notes) > 0 {
		return fmt.Errorf("approved %s, but not reloading: %s", name, notes[0])
	}
	_, err := s.watch.reload(ctx, s.h)
	return err
}

// approveSurface releases a quarantined server, if name is one: it shows
// the difference, records the new surface and reloads the running hosts.
func (a *app) approveSurface(ctx context.Context, cfg *config.Config, name string) (bool, error) {
	gate := pluginstore.Gate{LockFile: cfg.LockFile(), DataDir: cfg.DataDir}
	if _, err := gate.Saved(name, true); err != nil {
		return false, nil
	}
	if err := strictmode.PrivateDir(cfg.DataDir); err != nil {
		return true, fail(2, "data_dir: %v", err)
	}
	ap, err := gate.Approve(name)
	if err != nil {
		return true, fail(2, "%v", err)
	}
	if ap.Diff != "" {
		fmt.Fprintf(a.stdout, "%s's tools changed:\n%s", name, ap.Diff)
	} else {
		fmt.Fprintf(a.stdout, "%s's tools differ from the locked ones (the earlier tools are not kept in %s, so no difference can be shown)\n", name, cfg.DataDir)
	}
	where := "the approvals in " + cfg.DataDir
	if ap.Locked {
		where = cfg.LockFile()
	}
	fmt.Fprintf(a.stdout, "approved %s's tools as they are now (%s), recorded in %s\n", name, ap.Hash, where)
	replies, err := control.Call(ctx, cfg.DataDir, "POST", "/v1/reload")
	if errors.Is(err, control.ErrNoHost) {
		fmt.Fprintln(a.stdout, "no running host on this config; it serves them with the next `switchboard serve`")
		return true, nil
	}
	if err != nil {
		return true, fail(2, "approved, but the running hosts did not reload: %v", err)
	}
	if err := a.printReloads(replies); err != nil {
		return true, err
	}
	// A host that held the server back while restarting it (it was
	// running when its tools changed) did not see it change in the config:
	// restart it there now instead of waiting for its next retry.
	for _, r := range replies {
		var res struct {
			Result loader.ReloadResult `json:"result"`
		}
		if json.Unmarshal(r.Body, &res) == nil && slices.Contains(res.Result.Unchanged, name) {
			_, _ = control.Call(ctx, cfg.DataDir, "POST", "/v1/restart?name="+name)
			break
		}
	}
	return true, nil
}

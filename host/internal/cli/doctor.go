package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/switchboard-mcp/switchboard/host/internal/auth"
	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/loader"
	"github.com/switchboard-mcp/switchboard/host/internal/pathguard"
	"github.com/switchboard-mcp/switchboard/host/internal/pluginstore"
	"github.com/switchboard-mcp/switchboard/host/internal/sandbox"
	"github.com/switchboard-mcp/switchboard/host/internal/strictmode"
)

// Verdicts of a doctor check.
const (
	verdictOK   = "ok"
	verdictWarn = "warn"
	verdictFail = "FAIL"
)

// finding is one line of `switchboard doctor`.
type finding struct {
	Check   string `json:"check"`
	Verdict string `json:"verdict"`
	Detail  string `json:"detail"`
}

func (a *app) doctorCmd() *cobra.Command {
	var httpAddr string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the environment and the config: sandbox, git, bash, data_dir, plugins, servers",
		Long: "Check what Switchboard needs on this machine and in this config, one verdict per line\n" +
			"(ok, warn, FAIL): the kernel's sandbox features, git and bash for their built-ins, the\n" +
			"config (the host's own validation), data_dir and plugin_dirs permissions, pinned and locked\n" +
			"plugin hashes, and a start of every server (as inspect does). Exits 1 when a check fails.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out []finding
			add := func(check, verdict, format string, args ...any) {
				out = append(out, finding{check, verdict, fmt.Sprintf(format, args...)})
			}

			path := config.ResolvePath(a.configFlag)
			res := config.Load(path)
			if res.Config != nil {
				res.Diags = append(res.Diags, loader.Check(res.Config)...)
				res.Diags = append(res.Diags, loader.CheckSettings(res.Config)...)
			}
			cfg := res.Config
			if res.Diags.HasErrors() {
				var b strings.Builder
				_ = res.WriteDiagnostics(&b)
				add("config", verdictFail, "%s: %d error(s); run `switchboard validate`:\n%s", path, len(res.Diags.Errs()), strings.TrimSpace(b.String()))
				cfg = nil
			} else {
				add("config", verdictOK, "%s is valid: %d built-ins, %d plugins, %d external servers", cfg.File, len(cfg.Builtins), len(cfg.Plugins), len(cfg.Externals))
			}

			doctorSandbox(add, cfg)
			doctorTool(add, cfg, "git", "--version")
			doctorGitSafety(add, cfg)
			doctorTool(add, cfg, "bash", "--version")
			if cfg != nil {
				doctorDirs(add, cfg)
				doctorPins(add, cfg)
				doctorLock(add, cfg, a.selfPath())
			}
			if httpAddr != "" {
				doctorListen(add, httpAddr, cfg)
			}
			if cfg != nil && !hasFail(out) {
				_, reg, _, err := a.start(cmd.Context(), true)
				if err != nil {
					add("servers", verdictFail, "the host did not start: %v", err)
				} else {
					for _, si := range ServerInfos(reg) {
						if si.Status == "failed" {
							add("server "+si.Name, verdictFail, "%s", si.Error)
							continue
						}
						add("server "+si.Name, verdictOK, "%s, %d tools, sandbox: %s", si.Status, si.Tools, dashIfEmpty(si.Sandbox))
					}
					a.stop(reg, cfg)
				}
			} else if cfg != nil {
				add("servers", verdictWarn, "not started: fix the failures above first")
			}

			if a.jsonOut {
				if err := a.printJSON(out); err != nil {
					return err
				}
			} else {
				printFindings(a.stdout, out)
			}
			if hasFail(out) {
				return fail(1, "doctor: %d check(s) failed", countFail(out))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&httpAddr, "http", "", "also check that serve --http could listen on ADDR")
	cmd.Flags().BoolVar(&a.jsonOut, "json", false, "print JSON")
	return cmd
}

type addFunc func(check, verdict, format string, args ...any)

// doctorSandbox says what the kernel offers the sandbox, and fails when a
// server whose sandbox is required could not be confined.
func doctorSandbox(add addFunc, cfg *config.Config) {
	self, _ := os.Executable()
	probe := &sandbox.Sandbox{Helper: loader.HelperFor(self), Policy: sandbox.Policy{Mode: sandbox.ModeRequired, Memory: 1}}
	r := probe.Report()
	for i, e := range r.Enforced {
		if v, ok := strings.CutPrefix(e, "cgroup "); ok { // the probe's limit is no one's
			version, _, _ := strings.Cut(v, " ")
			r.Enforced[i] = "memory and process limits (cgroup " + version + ")"
		}
	}
	enforced := strings.Join(r.Enforced, "; ")
	switch {
	case !r.Namespaces || r.Landlock < 1:
		verdict := verdictWarn
		if cfg != nil && requiresSandbox(cfg) {
			verdict = verdictFail
		}
		add("sandbox", verdict, "cannot confine as required: %s (servers with sandbox { mode = \"required\" }, the default for built-ins and plugins, will not start)", strings.Join(r.Missing, "; "))
	case len(r.Missing) > 0:
		add("sandbox", verdictWarn, "%s; missing: %s", enforced, strings.Join(r.Missing, "; "))
	default:
		add("sandbox", verdictOK, "%s", enforced)
	}
}

// requiresSandbox reports whether any configured server needs a sandbox
// that must be built (required mode, the default for built-ins and
// plugins).
func requiresSandbox(cfg *config.Config) bool {
	for _, b := range cfg.Builtins {
		if b.Sandbox.Mode == "" || b.Sandbox.Mode == string(sandbox.ModeRequired) {
			return true
		}
	}
	for _, p := range cfg.Plugins {
		if p.Sandbox.Mode == "" || p.Sandbox.Mode == string(sandbox.ModeRequired) {
			return true
		}
	}
	return false
}

// doctorTool checks a program a built-in of the same name runs.
func doctorTool(add addFunc, cfg *config.Config, name string, args ...string) {
	enabled := false
	if cfg != nil {
		for _, b := range cfg.Builtins {
			enabled = enabled || b.Name == name
		}
	}
	// Not from a folder a server may write (a project's .venv/bin on
	// PATH): doctor runs it, unconfined.
	var untrusted []string
	if cfg != nil {
		untrusted = loader.WritableFolders(cfg)
	}
	path, err := pathguard.LookPath(name, untrusted)
	if err != nil && !errors.Is(err, exec.ErrNotFound) {
		add(name, verdictWarn, "%v", err)
		return
	}
	if err != nil {
		if enabled {
			add(name, verdictFail, "%s is not on PATH and the %s built-in needs it; install it or turn the built-in off", name, name)
		} else {
			add(name, verdictOK, "not installed (the %s built-in is off)", name)
		}
		return
	}
	v, err := exec.Command(path, args...).Output()
	first, _, _ := strings.Cut(strings.TrimSpace(string(v)), "\n")
	if err != nil {
		verdict := verdictWarn
		if enabled {
			verdict = verdictFail
		}
		add(name, verdict, "%s does not run: %v", path, err)
		return
	}
	add(name, verdictOK, "%s (%s)", first, path)
}

// doctorGitSafety checks the person's git for safe.bareRepository=explicit
// (git 2.38 or later): without it, a server that writes the project can
// make a subfolder a bare repository (HEAD, objects/, refs/, a config
// naming core.worktree and core.fsmonitor), and the person's git, or a
// shell prompt showing git's status, runs that config's programs in the
// folder. The host's .git placeholder covers a writable folder's top only;
// nothing in the kernel refuses a folder by its name (README, "Not
// covered").
func doctorGitSafety(add addFunc, cfg *config.Config) {
	const check = "git safety"
	var untrusted []string
	if cfg != nil {
		untrusted = loader.WritableFolders(cfg)
	}
	path, err := pathguard.LookPath("git", untrusted)
	if err != nil {
		return // doctorTool says why
	}
	fix := "run `git config --global safe.bareRepository explicit`"
	// From / : the setting counts only in the person's own (global or
	// system) config, never a repository's.
	cmd := exec.Command(path, "config", "--get", "safe.bareRepository")
	cmd.Dir = "/"
	v, _ := cmd.Output() // exit 1: not set
	switch got := strings.ToLower(strings.TrimSpace(string(v))); {
	case got == "explicit":
		add(check, verdictOK, "safe.bareRepository = explicit: git takes no folder a server wrote for a bare repository it was not pointed at")
	case !gitAtLeast(path, 2, 38):
		add(check, verdictWarn, "git before 2.38 takes any folder holding HEAD, objects/ and refs/ for a repository and runs what its config names: a server that writes the project could make a subfolder one; upgrade git, then %s", fix)
	default:
		if got == "" {
			got = "all (the default)"
		}
		add(check, verdictWarn, "safe.bareRepository = %s: a server that writes the project could make a subfolder a bare repository whose config your git (or a prompt showing git's status) runs when you enter it; %s", got, fix)
	}
}

// gitAtLeast reports whether the git at path is version major.minor or
// later ("git version 2.39.5").
func gitAtLeast(path string, major, minor int) bool {
	v, err := exec.Command(path, "--version").Output()
	if err != nil {
		return false
	}
	var maj, mnr int
	if _, err := fmt.Sscanf(strings.TrimPrefix(strings.TrimSpace(string(v)), "git version "), "%d.%d", &maj, &mnr); err != nil {
		return false
	}
	return maj > major || (maj == major && mnr >= minor)
}

// doctorDirs checks the folders whose permissions matter: data_dir (the
// host's state, private) and plugin_dirs (every binary there runs).
func doctorDirs(add addFunc, cfg *config.Config) {
	switch err := strictmode.Check(cfg.DataDir); {
	case errors.Is(err, fs.ErrNotExist):
		add("data_dir", verdictOK, "%s does not exist yet; the host creates it private (0700)", cfg.DataDir)
	case err != nil:
		add("data_dir", verdictFail, "%v", err)
	default:
		add("data_dir", verdictOK, "%s is private to this user", cfg.DataDir)
	}
	for _, d := range cfg.PluginDirs {
		switch err := strictmode.Check(d); {
		case errors.Is(err, fs.ErrNotExist):
			add("plugin_dir", verdictWarn, "%s does not exist (no plugins are found there)", d)
		case err != nil:
			add("plugin_dir", verdictFail, "%v (another user could put a binary there that the host would run)", err)
		default:
			add("plugin_dir", verdictOK, "%s: %d plugin binaries", d, len(pluginstore.List([]string{d})))
		}
	}
}

// doctorPins checks each pinned plugin binary against its sha256.
func doctorPins(add addFunc, cfg *config.Config) {
	for _, p := range cfg.Plugins {
		if p.SHA256 == "" {
			continue
		}
		f, err := os.Open(p.Path)
		if err != nil {
			add("pin "+p.Name, verdictFail, "%v", err)
			continue
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			add("pin "+p.Name, verdictFail, "%v", err)
			continue
		}
		got := hex.EncodeToString(h.Sum(nil))
		if got != strings.ToLower(p.SHA256) {
			add("pin "+p.Name, verdictFail, "%s has sha256 %s, the config pins %s; the binary changed: check it, then update sha256", p.Path, got, p.SHA256)
			continue
		}
		add("pin "+p.Name, verdictOK, "%s matches its sha256", p.Path)
	}
}

// doctorLock checks each plugin's binary against the lock file.
func doctorLock(add addFunc, cfg *config.Config, self string) {
	targets := loader.PluginTargets(cfg, self)
	lock, exists, err := pluginstore.ReadLock(cfg.LockFile())
	switch {
	case err != nil:
		add("lock", verdictFail, "%v (the host runs no plugin while it cannot read it)", err)
		return
	case !exists:
		if len(targets) > 0 {
			add("lock", verdictWarn, "%s does not exist: plugin binaries are checked only against sha256 pins; `switchboard plugin lock` writes it", lock.Path)
		}
		return
	}
	for _, t := range targets {
		switch {
		case t.Refused != nil:
			add("lock "+t.Name, verdictFail, "%v", t.Refused)
		case lock.Plugins[t.Name] == nil:
			add("lock "+t.Name, verdictWarn, "%s is not in %s: run `switchboard plugin lock`", t.Path, lock.Path)
		default:
			if err := lock.CheckBinary(t.Name, t.Path); err != nil {
				add("lock "+t.Name, verdictFail, "%v", err)
			} else {
				add("lock "+t.Name, verdictOK, "%s matches %s", t.Path, lock.Path)
			}
		}
	}
}

// doctorListen checks that serve --http could listen on addr.
func doctorListen(add addFunc, addr string, cfg *config.Config) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		add("http", verdictFail, "cannot listen on %s: %v", addr, err)
		return
	}
	ln.Close()
	host, _, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); (ip == nil && host != "localhost") || (ip != nil && !ip.IsLoopback()) {
		if cfg != nil {
			if v, err := auth.New(cfg); err == nil && v.Enabled() {
				add("http", verdictOK, "%s is free; beyond loopback, every request needs a token (tokens or issuers are configured)", addr)
				return
			}
		}
		add("http", verdictWarn, "%s is not a loopback address: serve refuses it without --allow-remote, and serves it without authentication; create a token (`switchboard token new NAME`) or configure an issuer", addr)
		return
	}
	add("http", verdictOK, "%s is free", addr)
}

func printFindings(w io.Writer, out []finding) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range out {
		detail := strings.ReplaceAll(f.Detail, "\n", "\n\t\t")
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Verdict, f.Check, detail)
	}
	_ = tw.Flush()
}

func hasFail(out []finding) bool { return countFail(out) > 0 }

func countFail(out []finding) int {
	n := 0
	for _, f := range out {
		if f.Verdict == verdictFail {
			n++
		}
	}
	return n
}

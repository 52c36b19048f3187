// Package config loads and validates the host's HCL configuration.
//
// Load parses one file, evaluates expressions (with env("NAME") available),
// decodes it strictly (an unknown attribute or block is an error), resolves
// relative paths against the file's folder, and validates what it can
// without starting anything. Every problem is an hcl.Diagnostic carrying
// file:line:col, so `switchboard validate` can print each with a snippet.
package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"

	"github.com/switchboard-mcp/switchboard/host/internal/approvals"
	"github.com/switchboard-mcp/switchboard/host/internal/pluginstore"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
)

// EnvConfig is the environment variable naming the config file when
// --config is not given.
const EnvConfig = "SWITCHBOARD_CONFIG"

// DefaultFile is the config file used when neither --config nor
// $SWITCHBOARD_CONFIG names one.
const DefaultFile = "config.hcl"

// Config is a loaded, validated configuration. Paths are absolute.
type Config struct {
	// File is the absolute path of the config file.
	File string
	// MCPJSON is the imported .mcp.json ("" when import_mcp_json is off).
	MCPJSON string
	// Warnings are what Load found wrong but not fatal (a .mcp.json it
	// could not import), for the host to log at start and on reload.
	Warnings []string
	// ProjectDir is the directory every built-in is confined to.
	ProjectDir string
	// DataDir holds host state (audit log, permission decisions, saved
	// outputs). It is never inside ProjectDir.
	DataDir string
	// PluginDirs are searched for switchboard-plugin-* binaries that no
	// plugin block names; each is loaded under the name it reports.
	PluginDirs []string
	// InstallDir is the plugin directory root `switchboard plugin install`
	// fills (plugin_install_dir; default $XDG_DATA_HOME/switchboard/plugins).
	// Its "<os>_<arch>" folder for this machine is searched like
	// PluginDirs.
	InstallDir string
	// AllowUnlocked lets the host run discovered plugins that the lock
	// file does not list (allow_unlocked_plugins; default false).
	AllowUnlocked bool
	// TrustedKeys are minisign public keys; when set, `plugin install`
	// requires a signature by one of them over SHA256SUMS.
	TrustedKeys []string
	// LogLevel is the host's log level.
	LogLevel string
	// LogFormat is "text" (the default) or "json" (hclog's JSON lines, for
	// log collectors).
	LogFormat string
	// StartWait is how long serve waits for its servers' first starts
	// before it answers clients (0: the host's default, 3 s); a server
	// still starting then joins later.
	StartWait time.Duration
	// MetricsListen is where `serve` serves Prometheus metrics at
	// /metrics ("" = only on the HTTP front end, when it runs).
	MetricsListen string
	// ShutdownGrace is how long in-flight calls may finish at shutdown
	// before they are cancelled.
	ShutdownGrace time.Duration

	// Builtins are the enabled built-in plugins, in config order.
	Builtins []*Builtin
	// Plugins are the third-party plugin blocks, in config order.
	Plugins []*Plugin
	// Externals are the external MCP servers: external blocks in config
	// order, then .mcp.json entries by name.
	Externals []*External
	// Permissions are the call rules; nil when there is no block.
	Permissions *Permissions
	// DuplicateCallLimit is the loop breaker: the n-th identical result in
	// a row for one client's identical calls is an error result (calls still
	// run; identical results before it are shortened to a note); 0 = off.
	DuplicateCallLimit int
	// AuditMaxBytes rotates audit.jsonl past this size.
	AuditMaxBytes int64
	// CallTimeout bounds every call (default DefaultCallTimeout); a
	// server's block and its tool blocks may set their own.
	CallTimeout time.Duration
	// AuditDurable writes a call's audit record to the file before the
	// call is answered (default); false writes records in the background.
	AuditDurable bool
	// Restart is the default restart policy (the top-level restart block).
	Restart Restart
	// Lifecycle is the default start and idle_timeout of every server
	// (the top-level attributes; lifecycle.go).
	Lifecycle Lifecycle
	// WatchConfig reloads the config when the file changes.
	WatchConfig bool
	// Disabled are the blocks turned off with enabled = false.
	Disabled []Disabled
	// Prefixes are the `prefix` attributes of the server blocks that set
	// one: the server's names (tools, prompts) are shown to MCP clients as
	// "<prefix>__<name>", or bare for "". A server not here uses its name.
	Prefixes map[string]string
	// Results bounds what a tool result may put into a client's context
	// (max_result_chars, max_image_bytes; results.go).
	Results Results
	// Expose is how tools are listed to MCP clients (expose,
	// tool_budget_tokens, always_list; results.go).
	Expose Expose
	// Auth is who may call the HTTP front end (auth.go); never nil.
	Auth *Auth
	// Callers are the caller blocks: authenticated callers' own rules.
	Callers []*CallerRules
	// TLS, when set, makes the HTTP front end serve HTTPS (and mTLS).
	TLS *TLS
	// Store is where the state replicas share lives (the store block;
	// store.go); the zero Store keeps it in files in DataDir.
	Store Store
}

// Disabled is a server block turned off with enabled = false.
type Disabled struct {
	Name, Kind string
	Range      hcl.Range
}

// Restart is a `restart {}` block: how a lost server is brought back.
// Unset fields keep the defaults (or the top-level block's values).
type Restart struct {
	BaseDelay      time.Duration
	MaxDelay       time.Duration
	Jitter         float64
	MaxAttempts    int
	StableAfter    time.Duration
	HealthInterval time.Duration
	HealthTimeout  time.Duration
}

// DefaultRestart is 1 s doubling to 30 s, 10 % jitter, 10 attempts, stable
// after a minute, a health check every 15 s (5 s timeout).
var DefaultRestart = Restart{
	BaseDelay: time.Second, MaxDelay: 30 * time.Second, Jitter: 0.1, MaxAttempts: 10,
	StableAfter: time.Minute, HealthInterval: 15 * time.Second, HealthTimeout: 5 * time.Second,
}

type restartSchema struct {
	BaseDelay      *string   `hcl:"base_delay,optional"`
	MaxDelay       *string   `hcl:"max_delay,optional"`
	Jitter         *float64  `hcl:"jitter,optional"`
	MaxAttempts    *int      `hcl:"max_attempts,optional"`
	StableAfter    *string   `hcl:"stable_after,optional"`
	HealthInterval *string   `hcl:"health_interval,optional"`
	HealthTimeout  *string   `hcl:"health_timeout,optional"`
	Range          hcl.Range `hcl:",def_range"`
}

// apply overlays a restart block on base.
func (rs *restartSchema) apply(base Restart, errAt func(hcl.Range, string, string)) Restart {
	r := base
	dur := func(name string, v *string, dst *time.Duration, allowZero bool) {
		if v == nil {
			return
		}
		d, err := time.ParseDuration(*v)
		if err != nil || d < 0 || (d == 0 && !allowZero) {
			errAt(rs.Range, "Invalid restart setting", fmt.Sprintf("%s = %q is not a duration such as \"1s\".", name, *v))
			return
		}
		*dst = d
	}
	dur("base_delay", rs.BaseDelay, &r.BaseDelay, false)
	dur("max_delay", rs.MaxDelay, &r.MaxDelay, false)
	dur("stable_after", rs.StableAfter, &r.StableAfter, true)
	dur("health_interval", rs.HealthInterval, &r.HealthInterval, true)
	dur("health_timeout", rs.HealthTimeout, &r.HealthTimeout, false)
	if rs.Jitter != nil {
		if *rs.Jitter < 0 || *rs.Jitter > 1 {
			errAt(rs.Range, "Invalid restart setting", "jitter must be between 0 and 1 (0.1 = up to 10 %).")
		}
		r.Jitter = *rs.Jitter
	}
	if rs.MaxAttempts != nil {
		if *rs.MaxAttempts < 0 {
			errAt(rs.Range, "Invalid restart setting", "max_attempts must be 0 (no limit) or more.")
		}
		r.MaxAttempts = *rs.MaxAttempts
	}
	if r.MaxDelay < r.BaseDelay {
		r.MaxDelay = r.BaseDelay
	}
	return r
}

// Sandbox is a `sandbox {}` block inside a server's block: how the
// server's processes are confined. Unset fields keep the server kind's
// defaults (README, Security).
type Sandbox struct {
	// Mode is "required", "best-effort" or "off" ("" = the kind's default).
	Mode string
	// Read and Write add paths (absolute, relative to the config's folder,
	// or "~/…") the server may read, or read and write.
	Read, Write []string
	// Network, when set, overrides the kind's default.
	Network *bool
	// Memory (bytes) and Processes bound the server's processes (0: none).
	Memory    int64
	Processes int64
	Range     hcl.Range
}

type sandboxSchema struct {
	Mode      *string   `hcl:"mode,optional"`
	Read      []string  `hcl:"read,optional"`
	Write     []string  `hcl:"write,optional"`
	Network   *bool     `hcl:"network,optional"`
	Memory    *string   `hcl:"memory,optional"`
	Processes *int64    `hcl:"processes,optional"`
	Range     hcl.Range `hcl:",def_range"`
}

// Builtin is one enabled `builtin "NAME" {}` block.
type Builtin struct {
	Name     string
	Restart  Restart
	Sandbox  Sandbox
	Timeouts registry.Timeouts
	// Settings are the block's attributes as a JSON object for the plugin.
	Settings []byte
	Range    hcl.Range
	// Lifecycle is the block's start and idle_timeout.
	Lifecycle Lifecycle
}

// Plugin is one `plugin "NAME" {}` block.
type Plugin struct {
	Name     string
	Restart  Restart
	Sandbox  Sandbox
	Timeouts registry.Timeouts
	Path     string
	Args     []string
	Env      map[string]string
	SHA256   string
	// Version is the block's version constraint ("~> 1.2"; "" for none).
	Version string
	// Resolved is the version of the binary Path names, when its file
	// name carries one.
	// VersionsDir is the folder path named when the binary was chosen
	// from the versions in it; control plane like the binary (a tool that
	// could write there could add a newer version).
	VersionsDir  string
	Resolved     string
	Settings     []byte
	StartTimeout time.Duration
	Range        hcl.Range
	// Lifecycle is the block's start and idle_timeout.
	Lifecycle Lifecycle
}

// External is one `external "NAME" {}` block (or an entry of .mcp.json):
// an MCP server reached over stdio (Command) or streamable HTTP (URL).
type External struct {
	Name     string
	Timeouts registry.Timeouts
	// ProjectFiles are the files in the project a .mcp.json entry's
	// command line names (see projectFiles): approved with it, and bound
	// read-only in every sandbox.
	ProjectFiles []string
	Command      string
	Args         []string
	Env          map[string]string
	URL          string
	Headers      map[string]string
	Timeout      time.Duration
	Restart      Restart
	Sandbox      Sandbox
	// FromMCPJSON is set for servers read from .mcp.json.
	FromMCPJSON bool
	// AsWritten is a .mcp.json entry as the file writes it, before ${VAR}
	// expansion: what a question to a client shows (ApprovalEntry, what
	// runs, has the host's environment in it, which is not the client's
	// to read; found from outside: a cloned repository's entry named
	// ${SECRET} and the question put to the client showed its value).
	AsWritten approvals.Entry
	Range     hcl.Range
	// Lifecycle is the block's start and idle_timeout.
	Lifecycle Lifecycle
}

// Permissions is the `permissions {}` block.
type Permissions struct {
	Allow   []string
	Deny    []string
	Default string
	Access  string
	Range   hcl.Range
}

// Result is what Load returns: the config (nil when there are errors), the
// diagnostics, and the parsed files for printing snippets.
type Result struct {
	Config *Config
	Diags  hcl.Diagnostics
	files  map[string]*hcl.File
}

// WriteDiagnostics prints each diagnostic as "file:line:col: severity:
// summary", then the source line with a caret under the column, then the
// detail, as `switchboard validate` shows them.
func (r *Result) WriteDiagnostics(w io.Writer) error {
	for _, d := range r.Diags {
		sev := "error"
		if d.Severity == hcl.DiagWarning {
			sev = "warning"
		}
		var err error
		if d.Subject == nil {
			_, err = fmt.Fprintf(w, "%s: %s\n", sev, d.Summary)
		} else {
			s := d.Subject
			_, err = fmt.Fprintf(w, "%s:%d:%d: %s: %s\n", displayPath(s.Filename), s.Start.Line, s.Start.Column, sev, d.Summary)
			if f := r.files[s.Filename]; f != nil && err == nil {
				lines := strings.Split(string(f.Bytes), "\n")
				if s.Start.Line >= 1 && s.Start.Line <= len(lines) {
					src := strings.TrimRight(lines[s.Start.Line-1], "\r")
					width := 1
					if s.End.Line == s.Start.Line && s.End.Column > s.Start.Column {
						width = s.End.Column - s.Start.Column
					}
					pad := strings.Map(func(r rune) rune {
						if r == '\t' {
							return '\t'
						}
						return ' '
					}, src[:min(max(s.Start.Column-1, 0), len(src))])
					_, err = fmt.Fprintf(w, "  %4d | %s\n       | %s%s\n", s.Start.Line, src, pad, strings.Repeat("^", width))
				}
			}
		}
		if err == nil && d.Detail != "" {
			_, err = fmt.Fprintf(w, "  %s\n", d.Detail)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// displayPath shows a path relative to the working directory when it is
// below it, as users typed it.
func displayPath(p string) string {
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(rel, "..") {
			return rel
		}
	}
	return p
}

// Error returns the diagnostics as one error, or nil when there are none.
func (r *Result) Error() error {
	if !r.Diags.HasErrors() {
		return nil
	}
	return r.Diags
}

// ResolvePath returns the config file to use: flag, else $SWITCHBOARD_CONFIG,
// else ./config.hcl.
func ResolvePath(flag string) string {
	if flag != "" {
		return flag
	}
	if env := os.Getenv(EnvConfig); env != "" {
		return env
	}
	return DefaultFile
}

type fileSchema struct {
	ProjectDir         *string          `hcl:"project_dir,optional"`
	DataDir            *string          `hcl:"data_dir,optional"`
	PluginDirs         []string         `hcl:"plugin_dirs,optional"`
	PluginInstallDir   *string          `hcl:"plugin_install_dir,optional"`
	AllowUnlocked      *bool            `hcl:"allow_unlocked_plugins,optional"`
	TrustedKeys        []string         `hcl:"trusted_keys,optional"`
	LogLevel           *string          `hcl:"log_level,optional"`
	LogFormat          *string          `hcl:"log_format,optional"`
	ShutdownGrace      *string          `hcl:"shutdown_grace,optional"`
	DuplicateCallLimit *int             `hcl:"duplicate_call_limit,optional"`
	AuditMaxBytes      *int64           `hcl:"audit_max_bytes,optional"`
	CallTimeout        *string          `hcl:"call_timeout,optional"`
	StartWait          *string          `hcl:"start_wait,optional"`
	AuditDurable       *bool            `hcl:"audit_durable,optional"`
	WatchConfig        *bool            `hcl:"watch_config,optional"`
	Start              *string          `hcl:"start,optional"`
	IdleTimeout        *string          `hcl:"idle_timeout,optional"`
	Restart            []restartSchema  `hcl:"restart,block"`
	Builtins           []builtinSchema  `hcl:"builtin,block"`
	Plugins            []pluginSchema   `hcl:"plugin,block"`
	Externals          []externalSchema `hcl:"external,block"`
	ImportMCPJSON      *bool            `hcl:"import_mcp_json,optional"`
	Permissions        []permSchema     `hcl:"permissions,block"`
	Metrics            []metricsSchema  `hcl:"metrics,block"`
	Store              []storeSchema    `hcl:"store,block"`
	MaxResultChars     *int             `hcl:"max_result_chars,optional"`
	MaxImageBytes      *int64           `hcl:"max_image_bytes,optional"`
	Expose             *string          `hcl:"expose,optional"`
	ToolBudgetTokens   *int             `hcl:"tool_budget_tokens,optional"`
	AlwaysList         []string         `hcl:"always_list,optional"`
	Auth               []authSchema     `hcl:"auth,block"`
	Callers            []callerSchema   `hcl:"caller,block"`
	TLS                []tlsSchema      `hcl:"tls,block"`
}

// metricsSchema is the `metrics {}` block.
type metricsSchema struct {
	Listen string    `hcl:"listen"`
	Range  hcl.Range `hcl:",def_range"`
}

type builtinSchema struct {
	Name           string          `hcl:"name,label"`
	Enabled        *bool           `hcl:"enabled,optional"`
	Prefix         *string         `hcl:"prefix,optional"`
	Start          *string         `hcl:"start,optional"`
	IdleTimeout    *string         `hcl:"idle_timeout,optional"`
	CallTimeout    *string         `hcl:"call_timeout,optional"`
	MaxResultChars *int            `hcl:"max_result_chars,optional"`
	MaxImageBytes  *int64          `hcl:"max_image_bytes,optional"`
	Tools          []toolSchema    `hcl:"tool,block"`
	Restart        []restartSchema `hcl:"restart,block"`
	Sandbox        []sandboxSchema `hcl:"sandbox,block"`
	Rest           hcl.Body        `hcl:",remain"`
	Range          hcl.Range       `hcl:",def_range"`
}

// toolSchema is a `tool "NAME" {}` block inside a server's block:
// settings for one of its tools.
type toolSchema struct {
	Name           string    `hcl:"name,label"`
	CallTimeout    *string   `hcl:"call_timeout,optional"`
	MaxResultChars *int      `hcl:"max_result_chars,optional"`
	Range          hcl.Range `hcl:",def_range"`
}

type pluginSchema struct {
	Name           string            `hcl:"name,label"`
	Enabled        *bool             `hcl:"enabled,optional"`
	Prefix         *string           `hcl:"prefix,optional"`
	Start          *string           `hcl:"start,optional"`
	IdleTimeout    *string           `hcl:"idle_timeout,optional"`
	Path           *string           `hcl:"path,optional"`
	Version        *string           `hcl:"version,optional"`
	Args           []string          `hcl:"args,optional"`
	Env            map[string]string `hcl:"env,optional"`
	SHA256         *string           `hcl:"sha256,optional"`
	Settings       *cty.Value        `hcl:"config,optional"`
	StartTimeout   *string           `hcl:"start_timeout,optional"`
	CallTimeout    *string           `hcl:"call_timeout,optional"`
	MaxResultChars *int              `hcl:"max_result_chars,optional"`
	MaxImageBytes  *int64            `hcl:"max_image_bytes,optional"`
	Tools          []toolSchema      `hcl:"tool,block"`
	Restart        []restartSchema   `hcl:"restart,block"`
	Sandbox        []sandboxSchema   `hcl:"sandbox,block"`
	Range          hcl.Range         `hcl:",def_range"`
}

type externalSchema struct {
	Name           string            `hcl:"name,label"`
	Enabled        *bool             `hcl:"enabled,optional"`
	Prefix         *string           `hcl:"prefix,optional"`
	Start          *string           `hcl:"start,optional"`
	IdleTimeout    *string           `hcl:"idle_timeout,optional"`
	Command        *string           `hcl:"command,optional"`
	Args           []string          `hcl:"args,optional"`
	Env            map[string]string `hcl:"env,optional"`
	URL            *string           `hcl:"url,optional"`
	Headers        map[string]string `hcl:"headers,optional"`
	Timeout        *string           `hcl:"timeout,optional"`
	CallTimeout    *string           `hcl:"call_timeout,optional"`
	MaxResultChars *int              `hcl:"max_result_chars,optional"`
	MaxImageBytes  *int64            `hcl:"max_image_bytes,optional"`
	Tools          []toolSchema      `hcl:"tool,block"`
	Restart        []restartSchema   `hcl:"restart,block"`
	Sandbox        []sandboxSchema   `hcl:"sandbox,block"`
	Range          hcl.Range         `hcl:",def_range"`
}

type permSchema struct {
	Allow   []string  `hcl:"allow,optional"`
	Deny    []string  `hcl:"deny,optional"`
	Default *string   `hcl:"default,optional"`
	Access  *string   `hcl:"access,optional"`
	Range   hcl.Range `hcl:",def_range"`
}

// Load reads and validates the config file at path.
func Load(path string) *Result {
	parser := hclparse.NewParser()
	res := &Result{}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	src, err := os.ReadFile(abs)
	if err != nil {
		res.Diags = hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot read config file",
			Detail:   fmt.Sprintf("%v. Pass --config FILE or set %s.", err, EnvConfig),
		}}
		return res
	}
	return LoadBytes(abs, src, parser)
}

// LoadBytes validates src as if it were the file at abs (absolute path).
func LoadBytes(abs string, src []byte, parser *hclparse.Parser) *Result {
	if parser == nil {
		parser = hclparse.NewParser()
	}
	res := &Result{}
	f, diags := parser.ParseHCL(src, abs)
	res.files = parser.Files()
	res.Diags = diags
	if diags.HasErrors() {
		return res
	}
	var fs fileSchema
	res.Diags = append(res.Diags, gohcl.DecodeBody(f.Body, evalContext(), &fs)...)
	if res.Diags.HasErrors() {
		return res
	}
	cfg, d := build(abs, &fs, f.Body)
	res.Diags = append(res.Diags, d...)
	if !res.Diags.HasErrors() {
		res.Config = cfg
		for _, d := range res.Diags {
			if d.Severity == hcl.DiagWarning {
				cfg.Warnings = append(cfg.Warnings, d.Summary+": "+d.Detail)
			}
		}
	}
	return res
}

// envRead maps each value env("NAME") returned in this process to how
// the config writes it, for the errors of the servers that use it
// (External.Redactions): an external block's url built with env() showed
// its token in the error the switchboard server's tools show a client
// (red team round 20).
var envRead sync.Map

// minRedacted is the shortest value cut from errors: a shorter one is no
// secret, and would cut letters out of every message.
const minRedacted = 4

// evalContext offers env("NAME") to expressions. An unset variable is an
// empty string; use it with a default like `coalesce(env("X"), "d")` later.
func evalContext() *hcl.EvalContext {
	envFn := function.New(&function.Spec{
		Description: "Returns the value of an environment variable, or an empty string.",
		Params:      []function.Parameter{{Name: "name", Type: cty.String}},
		Type:        function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			name := args[0].AsString()
			v := os.Getenv(name)
			if len(v) >= minRedacted {
				envRead.Store(v, `${env("`+name+`")}`)
			}
			return cty.StringVal(v), nil
		},
	})
	return &hcl.EvalContext{Functions: map[string]function.Function{"env": envFn}}
}

// attrRange returns the range of a top-level attribute, or the file's
// start when it is absent.
func attrRange(body hcl.Body, abs, name string) hcl.Range {
	if sb, ok := body.(*hclsyntax.Body); ok {
		if a, ok := sb.Attributes[name]; ok {
			return a.SrcRange
		}
	}
	return hcl.Range{Filename: abs, Start: hcl.InitialPos, End: hcl.InitialPos}
}

// blockAttrRange returns the range of an attribute inside the block whose
// definition starts at def (at any depth, so a server's sandbox block is
// found too), or def itself.
func blockAttrRange(body hcl.Body, def hcl.Range, name string) hcl.Range {
	if sb, ok := body.(*hclsyntax.Body); ok {
		if r, ok := findBlockAttr(sb, def, name); ok {
			return r
		}
	}
	return def
}

func findBlockAttr(body *hclsyntax.Body, def hcl.Range, name string) (hcl.Range, bool) {
	for _, b := range body.Blocks {
		if b.DefRange() == def {
			a, ok := b.Body.Attributes[name]
			if !ok {
				return hcl.Range{}, false
			}
			return a.SrcRange, true
		}
		if r, ok := findBlockAttr(b.Body, def, name); ok {
			return r, true
		}
	}
	return hcl.Range{}, false
}

// resolve makes p absolute against dir, expanding a leading "~/".
func resolve(dir, p string) string {
	if strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			p = filepath.Join(home, p[2:])
		}
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	return filepath.Clean(p)
}

// within reports whether p is root or inside it, by whole path components.
func within(p, root string) bool {
	rel, err := filepath.Rel(root, p)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)))
}

// DefaultDataDir is $XDG_STATE_HOME/switchboard/<id>, where id is derived
// from the config file's absolute path so two projects never share state.
func DefaultDataDir(configFile string) string {
	sum := sha256.Sum256([]byte(configFile))
	return filepath.Join(StateRoot(), hex.EncodeToString(sum[:6]))
}

// StateRoot is $XDG_STATE_HOME/switchboard (~/.local/state/switchboard):
// the folder of every config's default data_dir on this machine, that is
// of every host's permissions, approvals, pins and control sockets.
func StateRoot() string {
	base := os.Getenv("XDG_STATE_HOME")
	// A relative value is to be ignored (the XDG base directory
	// specification): it put data_dir inside the folder the host was
	// started from, a project (red team round 5).
	if !filepath.IsAbs(base) {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "switchboard")
}

// StateRoots are the folders every host of this user keeps its default
// data_dir in: StateRoot, and ~/.local/state/switchboard too, where hosts
// started without $XDG_STATE_HOME keep theirs (a host with another
// XDG_STATE_HOME hid only its own, and a server of it rewrote the other
// hosts' permissions: red team round 4). MakeStateRoots makes them, so
// that they can be hidden before any host's data_dir exists there (a
// server pre-seeded the permissions of a host not started yet).
func StateRoots() []string {
	roots := []string{StateRoot()}
	homes := []string{}
	if home, err := os.UserHomeDir(); err == nil {
		homes = append(homes, home)
	}
	// And the user's home as the system knows it, whatever $HOME says: a
	// host run with another HOME did not see the others' records, and
	// applied a config their servers wrote (red team round 8).
	if u, err := user.Current(); err == nil && u.HomeDir != "" {
		homes = append(homes, u.HomeDir)
	}
	for _, home := range homes {
		if d := filepath.Join(home, ".local", "state", "switchboard"); !slices.Contains(roots, d) {
			roots = append(roots, d)
		}
	}
	return roots
}

// MakeStateRoots makes StateRoots (0700) where they are missing.
func MakeStateRoots() {
	for _, r := range StateRoots() {
		_ = os.MkdirAll(r, 0o700)
	}
}

// PeekDataDir finds the data directory of the config at path even when the
// file is otherwise invalid (so the CLI can still reach a host running on
// its previous version): a data_dir attribute that evaluates on its own is
// used, else the default.
func PeekDataDir(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if res := Load(abs); res.Config != nil {
		return res.Config.DataDir, nil
	}
	src, err := os.ReadFile(abs)
	if err == nil {
		if f, diags := hclsyntax.ParseConfig(src, abs, hcl.InitialPos); !diags.HasErrors() {
			if body, ok := f.Body.(*hclsyntax.Body); ok {
				if attr, ok := body.Attributes["data_dir"]; ok {
					if v, diags := attr.Expr.Value(evalContext()); !diags.HasErrors() && v.Type() == cty.String && v.AsString() != "" {
						return resolve(filepath.Dir(abs), v.AsString()), nil
					}
				}
			}
		}
	}
	return DefaultDataDir(abs), nil
}

// resolveSandboxPath resolves a sandbox path against the config's folder,
// leaving "~/…" for the sandbox to expand.
func resolveSandboxPath(dir, p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		return p
	}
	return resolve(dir, p)
}

// LockFileName is the lock file's name, beside the config.
const LockFileName = pluginstore.LockFileName

// LockFile is the config's lock file.
func (c *Config) LockFile() string { return filepath.Join(filepath.Dir(c.File), LockFileName) }

// SearchDirs are the folders searched for plugin binaries: plugin_dirs,
// then this machine's folder of the install directory.
func (c *Config) SearchDirs() []string {
	out := slices.Clone(c.PluginDirs)
	if c.InstallDir != "" {
		out = append(out, filepath.Join(c.InstallDir, pluginstore.Platform()))
	}
	return out
}

// Binaries lists the plugin binaries and plugin directories: the part of
// the control plane a sandbox binds read-only rather than hides.
// Each is listed once (plugins may share a binary).
func (c *Config) Binaries() []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string, resolve bool) {
		if p == "" || seen[p] {
			return
		}
		seen[p] = true
		if resolve {
			p = resolved(p)
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, p := range c.Plugins {
		add(p.Path, true)
		add(p.VersionsDir, true)
	}
	for _, x := range c.Externals {
		for _, f := range x.ProjectFiles {
			add(f, false)
		}
	}
	for _, d := range c.PluginDirs {
		add(d, true)
	}
	add(c.InstallDir, true)
	return out
}

// resolved is p with its symlinks resolved, or p when it does not exist.
func resolved(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// ControlPlane lists the host's own files, which no tool may read or
// write and which every sandbox hides or binds read-only: the config file,
// an imported .mcp.json, the lock file, data_dir, plugin binaries and
// plugin directories. Paths are absolute; symlinks are resolved where they
// exist, so a path that reaches into a root through a link is caught.
func (c *Config) ControlPlane() []string {
	// StateRoots too: the state of every other host of this user (another
	// project's data_dir by default) is as much a control plane as this
	// one's. A server that may write the XDG state folder (an external
	// server may) could otherwise rewrite another host's permissions or
	// approvals (red team).
	paths := append([]string{c.File, filepath.Join(filepath.Dir(c.File), LockFileName), c.DataDir}, StateRoots()...)
	if c.Auth != nil {
		paths = append(paths, c.Auth.TokensFile)
	}
	if c.TLS != nil {
		paths = append(paths, c.TLS.CertFile, c.TLS.KeyFile, c.TLS.ClientCAFile)
	}
	if c.MCPJSON != "" {
		paths = append(paths, c.MCPJSON)
	}
	for _, p := range c.Plugins {
		paths = append(paths, p.Path, p.VersionsDir)
	}
	for _, x := range c.Externals {
		paths = append(paths, x.ProjectFiles...)
	}
	paths = append(paths, c.PluginDirs...)
	paths = append(paths, c.InstallDir)
	var out []string
	seen := map[string]bool{}
	for _, p := range paths {
		if p == "" || seen[p] {
			continue // plugins may share a binary: resolved once
		}
		seen[p] = true
		p = resolved(filepath.Clean(p))
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/switchboard-mcp/switchboard/host/internal/builtins"
	"github.com/switchboard-mcp/switchboard/host/internal/pluginstore"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/host/internal/sandbox"
)

// builder turns a decoded file into a Config. Each step fills in one part
// of the Config and records what is wrong as diagnostics pointing at the
// attribute or block at fault; a step never stops the ones after it, so
// validate reports every problem at once.
type builder struct {
	abs  string   // the config file, absolute
	dir  string   // its folder, against which relative paths resolve
	body hcl.Body // its body, to find attribute ranges
	cfg  *Config
	// seen maps "kind name" to the block that first used it.
	seen  map[string]hcl.Range
	diags hcl.Diagnostics
}

// build validates fs, decoded from the file abs whose body is body, and
// returns the Config with every problem found.
func build(abs string, fs *fileSchema, body hcl.Body) (*Config, hcl.Diagnostics) {
	b := &builder{
		abs: abs, dir: filepath.Dir(abs), body: body, seen: map[string]hcl.Range{},
		cfg: &Config{File: abs, LogLevel: "info", LogFormat: "text", ShutdownGrace: 5 * time.Second, DuplicateCallLimit: 3, AuditMaxBytes: 10 << 20, CallTimeout: DefaultCallTimeout},
	}
	b.limits(fs)
	b.results(fs)
	b.folders(fs)
	b.logLevel(fs.LogLevel)
	b.logFormat(fs.LogFormat)
	b.metrics(fs.Metrics)
	b.store(fs.Store)
	b.shutdownGrace(fs.ShutdownGrace)
	b.defaultRestart(fs.Restart)
	b.cfg.Lifecycle = b.lifecycle(nil, fs.Start, fs.IdleTimeout, Lifecycle{})
	for _, bs := range fs.Builtins {
		b.builtin(bs)
	}
	b.defaultBuiltins()
	for _, ps := range fs.Plugins {
		b.plugin(ps)
	}
	for _, xs := range fs.Externals {
		b.external(xs)
	}
	b.importMCPJSON(fs.ImportMCPJSON)
	b.permissions(fs.Permissions)
	b.auth(fs)
	b.expose(fs)
	return b.cfg, b.diags
}

// errAt records an error at r.
func (b *builder) errAt(r hcl.Range, summary, detail string) {
	b.diags = append(b.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: &r})
}

// at is the range of a top-level attribute (the file's start when absent).
func (b *builder) at(name string) hcl.Range { return attrRange(b.body, b.abs, name) }

// in is the range of an attribute of the block defined at def (def itself
// when absent).
func (b *builder) in(def hcl.Range, name string) hcl.Range {
	return blockAttrRange(b.body, def, name)
}

// claim records that a block of kind uses name at r, or reports the block
// that used it first.
func (b *builder) claim(kind, name string, r hcl.Range) (prev hcl.Range, dup bool) {
	key := kind + " " + name
	if prev, dup := b.seen[key]; dup {
		return prev, true
	}
	b.seen[key] = r
	return hcl.Range{}, false
}

// limits reads duplicate_call_limit, watch_config, audit_max_bytes and
// audit_durable.
func (b *builder) limits(fs *fileSchema) {
	if fs.DuplicateCallLimit != nil {
		if *fs.DuplicateCallLimit < 0 || *fs.DuplicateCallLimit == 1 {
			b.errAt(b.at("duplicate_call_limit"), "Invalid duplicate_call_limit", "duplicate_call_limit must be 0 (off) or at least 2.")
		}
		b.cfg.DuplicateCallLimit = *fs.DuplicateCallLimit
	}
	b.cfg.WatchConfig = fs.WatchConfig == nil || *fs.WatchConfig
	if fs.AuditMaxBytes != nil {
		if *fs.AuditMaxBytes < 4096 {
			b.errAt(b.at("audit_max_bytes"), "Invalid audit_max_bytes", "audit_max_bytes must be at least 4096.")
		}
		b.cfg.AuditMaxBytes = *fs.AuditMaxBytes
	}
	b.cfg.AuditDurable = fs.AuditDurable == nil || *fs.AuditDurable
	if fs.CallTimeout != nil {
		if d, ok := b.duration(b.at("call_timeout"), "call_timeout", *fs.CallTimeout); ok {
			b.cfg.CallTimeout = d
		}
	}
	if fs.StartWait != nil {
		if d, ok := b.duration(b.at("start_wait"), "start_wait", *fs.StartWait); ok {
			b.cfg.StartWait = d
		}
	}
}

// DefaultCallTimeout bounds a call when the config sets no call_timeout:
// generous for real work, but a call to a hung plugin ends.
const DefaultCallTimeout = 10 * time.Minute

// duration parses a positive duration attribute, reporting it at r.
func (b *builder) duration(r hcl.Range, name, v string) (time.Duration, bool) {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		b.errAt(r, "Invalid "+name, fmt.Sprintf("%s = %q is not a positive duration such as \"90s\" or \"10m\".", name, v))
		return 0, false
	}
	return d, true
}

// serverTimeouts reads a server block's call_timeout and its tool blocks.
func (b *builder) serverTimeouts(def hcl.Range, callTimeout *string, tools []toolSchema) registry.Timeouts {
	var t registry.Timeouts
	if callTimeout != nil {
		t.Call, _ = b.duration(b.in(def, "call_timeout"), "call_timeout", *callTimeout)
	}
	seen := map[string]bool{}
	for _, tb := range tools {
		if seen[tb.Name] {
			b.errAt(tb.Range, "Duplicate tool block", fmt.Sprintf("tool %q has two blocks in this server; merge them.", tb.Name))
			continue
		}
		seen[tb.Name] = true
		if tb.CallTimeout != nil {
			if d, ok := b.duration(b.in(tb.Range, "call_timeout"), "call_timeout", *tb.CallTimeout); ok {
				if t.Tools == nil {
					t.Tools = map[string]time.Duration{}
				}
				t.Tools[tb.Name] = d
			}
		}
	}
	return t
}

// folders resolves project_dir (which must exist; symlinks resolved),
// data_dir (which must lie outside it) and plugin_dirs.
func (b *builder) folders(fs *fileSchema) {
	cfg := b.cfg
	cfg.ProjectDir = b.dir
	if fs.ProjectDir != nil {
		cfg.ProjectDir = resolve(b.dir, *fs.ProjectDir)
	}
	if st, err := os.Stat(cfg.ProjectDir); err != nil || !st.IsDir() {
		b.errAt(b.at("project_dir"), "project_dir is not a directory", fmt.Sprintf("%s does not exist or is not a directory; set project_dir to the folder the built-ins may work in.", cfg.ProjectDir))
	} else if real, err := filepath.EvalSymlinks(cfg.ProjectDir); err == nil {
		cfg.ProjectDir = real
	}
	if fs.DataDir != nil && *fs.DataDir != "" {
		cfg.DataDir = resolve(b.dir, *fs.DataDir)
	} else {
		cfg.DataDir = DefaultDataDir(b.abs)
	}
	if within(cfg.DataDir, cfg.ProjectDir) {
		b.errAt(b.at("data_dir"), "data_dir is inside project_dir", fmt.Sprintf("data_dir %s lies inside project_dir %s, where the built-ins could read or change host state. Put it elsewhere or leave it unset.", cfg.DataDir, cfg.ProjectDir))
	}
	for _, p := range fs.PluginDirs {
		cfg.PluginDirs = append(cfg.PluginDirs, resolve(b.dir, p))
	}
	cfg.InstallDir = pluginstore.DefaultDir()
	if fs.PluginInstallDir != nil && *fs.PluginInstallDir != "" {
		cfg.InstallDir = resolve(b.dir, *fs.PluginInstallDir)
	}
	cfg.AllowUnlocked = fs.AllowUnlocked != nil && *fs.AllowUnlocked
	for _, k := range fs.TrustedKeys {
		if _, err := pluginstore.ParseKey(k); err != nil {
			b.errAt(b.at("trusted_keys"), "Invalid trusted_keys", fmt.Sprintf("trusted_keys: %q is %v.", k, err))
		}
	}
	cfg.TrustedKeys = fs.TrustedKeys
}

// logLevel reads log_level.
func (b *builder) logLevel(v *string) {
	if v == nil {
		return
	}
	lv := strings.ToLower(*v)
	if !slices.Contains([]string{"trace", "debug", "info", "warn", "error", "off"}, lv) {
		b.errAt(b.at("log_level"), "Invalid log_level", fmt.Sprintf("log_level %q is not one of trace, debug, info, warn, error, off.", *v))
	}
	b.cfg.LogLevel = lv
}

// logFormat reads log_format.
func (b *builder) logFormat(v *string) {
	if v == nil {
		return
	}
	f := strings.ToLower(*v)
	if f != "text" && f != "json" {
		b.errAt(b.at("log_format"), "Invalid log_format", fmt.Sprintf("log_format %q is not one of text, json.", *v))
	}
	b.cfg.LogFormat = f
}

// metrics reads the metrics block: one, listening on loopback.
func (b *builder) metrics(blocks []metricsSchema) {
	for i, m := range blocks {
		if i > 0 {
			b.errAt(m.Range, "Duplicate metrics block", "Only one metrics block is allowed.")
			continue
		}
		host, port, err := net.SplitHostPort(m.Listen)
		if err != nil || port == "" {
			b.errAt(m.Range, "Invalid metrics listen", fmt.Sprintf("listen = %q is not HOST:PORT; use e.g. \"127.0.0.1:9464\".", m.Listen))
			continue
		}
		if ip := net.ParseIP(strings.Trim(host, "[]")); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			b.errAt(m.Range, "Metrics beyond loopback", fmt.Sprintf("listen = %q is not a loopback address: the metrics name every server and tool and have no authentication. Listen on 127.0.0.1 and let a proxy or the scraper's agent publish them.", m.Listen))
			continue
		}
		b.cfg.MetricsListen = m.Listen
	}
}

// shutdownGrace reads shutdown_grace.
func (b *builder) shutdownGrace(v *string) {
	if v == nil {
		return
	}
	d, err := time.ParseDuration(*v)
	if err != nil || d < 0 {
		b.errAt(b.at("shutdown_grace"), "Invalid shutdown_grace", fmt.Sprintf("shutdown_grace %q is not a duration such as \"5s\".", *v))
	}
	b.cfg.ShutdownGrace = d
}

// defaultRestart reads the top-level restart block over DefaultRestart.
func (b *builder) defaultRestart(blocks []restartSchema) {
	b.cfg.Restart = DefaultRestart
	if len(blocks) > 1 {
		b.errAt(blocks[1].Range, "Duplicate restart block", "Only one top-level restart block is allowed.")
	}
	if len(blocks) > 0 {
		b.cfg.Restart = blocks[0].apply(DefaultRestart, b.errAt)
	}
}

// serverRestart reads a server's restart block over the top-level one.
func (b *builder) serverRestart(blocks []restartSchema) Restart {
	if len(blocks) > 1 {
		b.errAt(blocks[1].Range, "Duplicate restart block", "Only one restart block per server is allowed.")
	}
	if len(blocks) == 0 {
		return b.cfg.Restart
	}
	return blocks[0].apply(b.cfg.Restart, b.errAt)
}

// serverSandbox reads a server's sandbox block; paths resolve against the
// config's folder, "~/…" is left for the sandbox to expand.
func (b *builder) serverSandbox(blocks []sandboxSchema) Sandbox {
	if len(blocks) > 1 {
		b.errAt(blocks[1].Range, "Duplicate sandbox block", "Only one sandbox block per server is allowed.")
	}
	if len(blocks) == 0 {
		return Sandbox{}
	}
	s := blocks[0]
	sb := Sandbox{Network: s.Network, Range: s.Range}
	if s.Mode != nil {
		switch *s.Mode {
		case "required", "best-effort", "off":
			sb.Mode = *s.Mode
		default:
			b.errAt(b.in(s.Range, "mode"), "Invalid sandbox mode", fmt.Sprintf("mode %q is not one of \"required\", \"best-effort\", \"off\".", *s.Mode))
		}
	}
	for _, p := range s.Read {
		sb.Read = append(sb.Read, resolveSandboxPath(b.dir, p))
	}
	for _, p := range s.Write {
		sb.Write = append(sb.Write, resolveSandboxPath(b.dir, p))
	}
	if s.Memory != nil {
		n, err := sandbox.ParseBytes(*s.Memory)
		if err != nil || n < 4<<20 {
			b.errAt(b.in(s.Range, "memory"), "Invalid sandbox memory", fmt.Sprintf("memory %q is not a size of at least 4MiB such as \"256MiB\" or \"1GiB\".", *s.Memory))
		}
		sb.Memory = n
	}
	if s.Processes != nil {
		if *s.Processes < 1 {
			b.errAt(b.in(s.Range, "processes"), "Invalid sandbox processes", "processes must be at least 1.")
		}
		sb.Processes = *s.Processes
	}
	return sb
}

// builtin reads one builtin block: its settings are decoded (and checked)
// even when the block is disabled.
func (b *builder) builtin(s builtinSchema) {
	if prev, dup := b.claim("builtin", s.Name, s.Range); dup {
		b.errAt(s.Range, "Duplicate builtin block", fmt.Sprintf("builtin %q is already configured at %s; merge the two blocks.", s.Name, prev))
		return
	}
	bi, ok := builtins.Lookup(s.Name)
	if !ok {
		names := slices.Sorted(slices.Values(builtins.Names()))
		b.errAt(s.Range, "Unknown built-in", fmt.Sprintf("There is no built-in %q; the built-ins are %s.", s.Name, strings.Join(names, ", ")))
		return
	}
	settings, d := decodeBuiltin(bi, s.Rest, b.dir)
	b.diags = append(b.diags, d...)
	if s.Enabled != nil && !*s.Enabled {
		b.cfg.Disabled = append(b.cfg.Disabled, Disabled{Name: s.Name, Kind: "builtin", Range: s.Range})
		return
	}
	b.prefix(s.Name, s.Prefix, s.Range)
	b.serverResults(s.Name, s.Range, s.MaxResultChars, s.MaxImageBytes, s.Tools)
	b.cfg.Builtins = append(b.cfg.Builtins, &Builtin{
		Name: s.Name, Settings: settings, Range: s.Range, Restart: b.serverRestart(s.Restart), Sandbox: b.serverSandbox(s.Sandbox),
		Lifecycle: b.lifecycle(&s.Range, s.Start, s.IdleTimeout, b.cfg.Lifecycle),
		Timeouts:  b.serverTimeouts(s.Range, s.CallTimeout, s.Tools),
	})
}

// defaultBuiltins enables the built-ins that run without a block
// (builtins.Builtin.Default) unless a block names them.
func (b *builder) defaultBuiltins() {
	for _, bi := range builtins.All() {
		if _, named := b.seen["builtin "+bi.Name]; named || !bi.Default {
			continue
		}
		settings, _ := json.Marshal(bi.NewSettings())
		b.cfg.Builtins = append(b.cfg.Builtins, &Builtin{Name: bi.Name, Settings: settings, Restart: b.cfg.Restart, Lifecycle: b.cfg.Lifecycle})
	}
}

// builtinName refuses a plugin or external block named like a built-in
// (kind as in a summary, and as in the sentence), and reports whether it did.
func (b *builder) builtinName(kind, noun, name string, r hcl.Range) bool {
	if name == builtins.Reserved {
		b.errAt(r, kind+" named like a built-in", fmt.Sprintf("%q is reserved for the built-in introspection server (on by default; builtin %q { enabled = false } turns it off, and the name stays reserved); give the %s another name.", name, name, noun))
		return true
	}
	if _, taken := builtins.Lookup(name); !taken {
		return false
	}
	b.errAt(r, kind+" named like a built-in", fmt.Sprintf("%q is the name of a built-in (enabled with builtin %q {}); give the %s another name.", name, name, noun))
	return true
}

// plugin reads one plugin block.
func (b *builder) plugin(p pluginSchema) {
	if !registry.NameRE.MatchString(p.Name) {
		b.errAt(p.Range, "Invalid plugin name", fmt.Sprintf("%q is not a valid server name: use lowercase letters, digits, '_' and '-' (at most 48, starting with a letter or digit).", p.Name))
		return
	}
	if b.builtinName("Plugin", "plugin", p.Name, p.Range) {
		return
	}
	if prev, dup := b.claim("plugin", p.Name, p.Range); dup {
		b.errAt(p.Range, "Duplicate plugin block", fmt.Sprintf("plugin %q is already configured at %s; give each plugin its own name.", p.Name, prev))
		return
	}
	if p.Enabled != nil && !*p.Enabled {
		b.cfg.Disabled = append(b.cfg.Disabled, Disabled{Name: p.Name, Kind: "plugin", Range: p.Range})
		return
	}
	pl := &Plugin{
		Name: p.Name, Args: p.Args, Env: p.Env, Range: p.Range, StartTimeout: 30 * time.Second, Restart: b.serverRestart(p.Restart), Sandbox: b.serverSandbox(p.Sandbox),
		Lifecycle: b.lifecycle(&p.Range, p.Start, p.IdleTimeout, b.cfg.Lifecycle),
		Timeouts:  b.serverTimeouts(p.Range, p.CallTimeout, p.Tools),
	}
	b.pluginBinary(p, pl)
	if p.SHA256 != nil && *p.SHA256 != "" {
		sum := strings.ToLower(strings.TrimPrefix(*p.SHA256, "sha256:"))
		if raw, err := hex.DecodeString(sum); err != nil || len(raw) != sha256.Size {
			b.errAt(b.in(p.Range, "sha256"), "Invalid sha256", fmt.Sprintf("plugin %q: sha256 must be 64 hex digits (from `sha256sum %s`).", p.Name, pl.Path))
		}
		pl.SHA256 = sum
	}
	if p.StartTimeout != nil {
		d, err := time.ParseDuration(*p.StartTimeout)
		if err != nil || d <= 0 {
			b.errAt(b.in(p.Range, "start_timeout"), "Invalid start_timeout", fmt.Sprintf("plugin %q: start_timeout %q is not a positive duration such as \"30s\".", p.Name, *p.StartTimeout))
		}
		pl.StartTimeout = d
	}
	for k := range p.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			b.errAt(b.in(p.Range, "env"), "Invalid environment variable", fmt.Sprintf("plugin %q: env key %q is not a valid variable name.", p.Name, k))
		}
	}
	if p.Settings != nil && !p.Settings.IsNull() {
		js, err := ctyJSON(*p.Settings)
		if err != nil {
			b.errAt(b.in(p.Range, "config"), "Invalid plugin config", fmt.Sprintf("plugin %q: config must be an object: %v", p.Name, err))
		}
		pl.Settings = js
	}
	b.prefix(p.Name, p.Prefix, p.Range)
	b.serverResults(p.Name, p.Range, p.MaxResultChars, p.MaxImageBytes, p.Tools)
	b.cfg.Plugins = append(b.cfg.Plugins, pl)
}

// external reads one external block: exactly one of command and url.
func (b *builder) external(x externalSchema) {
	if !registry.NameRE.MatchString(x.Name) {
		b.errAt(x.Range, "Invalid external server name", fmt.Sprintf("%q is not a valid server name: use lowercase letters, digits, '_' and '-'.", x.Name))
		return
	}
	if b.builtinName("External server", "external server", x.Name, x.Range) {
		return
	}
	if prev, dup := b.claim("external", x.Name, x.Range); dup {
		b.errAt(x.Range, "Duplicate external block", fmt.Sprintf("external %q is already configured at %s.", x.Name, prev))
		return
	}
	ext := &External{
		Name: x.Name, Args: x.Args, Env: x.Env, Headers: x.Headers, Range: x.Range, Timeout: 30 * time.Second, Restart: b.serverRestart(x.Restart), Sandbox: b.serverSandbox(x.Sandbox),
		Lifecycle: b.lifecycle(&x.Range, x.Start, x.IdleTimeout, b.cfg.Lifecycle),
		Timeouts:  b.serverTimeouts(x.Range, x.CallTimeout, x.Tools),
	}
	if x.Command != nil {
		ext.Command = *x.Command
	}
	if x.URL != nil {
		ext.URL = *x.URL
	}
	switch {
	case ext.Command == "" && ext.URL == "":
		b.errAt(x.Range, "External server without command or url", fmt.Sprintf("external %q needs command = \"...\" (stdio) or url = \"...\" (streamable HTTP).", x.Name))
	case ext.Command != "" && ext.URL != "":
		b.errAt(x.Range, "External server with both command and url", fmt.Sprintf("external %q: set command or url, not both.", x.Name))
	case ext.URL != "" && !strings.HasPrefix(ext.URL, "http://") && !strings.HasPrefix(ext.URL, "https://"):
		b.errAt(b.in(x.Range, "url"), "Invalid url", fmt.Sprintf("external %q: url %q must start with http:// or https://.", x.Name, ext.URL))
	}
	if x.Timeout != nil {
		d, err := time.ParseDuration(*x.Timeout)
		if err != nil || d <= 0 {
			b.errAt(b.in(x.Range, "timeout"), "Invalid timeout", fmt.Sprintf("external %q: timeout %q is not a positive duration.", x.Name, *x.Timeout))
		}
		ext.Timeout = d
	}
	if x.Enabled != nil && !*x.Enabled {
		b.cfg.Disabled = append(b.cfg.Disabled, Disabled{Name: x.Name, Kind: "external", Range: x.Range})
		return
	}
	b.prefix(x.Name, x.Prefix, x.Range)
	b.serverResults(x.Name, x.Range, x.MaxResultChars, x.MaxImageBytes, x.Tools)
	b.cfg.Externals = append(b.cfg.Externals, ext)
}

// prefix records a server block's prefix attribute, if set.
func (b *builder) prefix(name string, p *string, rng hcl.Range) {
	if p == nil {
		return
	}
	if !nameOf(*p, "_-", 48) { // the characters of an MCP name; "" for bare names
		b.errAt(b.in(rng, "prefix"), "Invalid prefix", fmt.Sprintf("%s: prefix %q may use only letters, digits, '_' and '-' (at most 48); \"\" shows names bare.", name, *p))
		return
	}
	if b.cfg.Prefixes == nil {
		b.cfg.Prefixes = map[string]string{}
	}
	b.cfg.Prefixes[name] = *p
}

// importMCPJSON adds the project's .mcp.json servers when import_mcp_json
// is set; an external block of the same name wins over an entry.
func (b *builder) importMCPJSON(on *bool) {
	if on == nil || !*on {
		return
	}
	b.cfg.MCPJSON = filepath.Join(b.cfg.ProjectDir, ".mcp.json")
	// The file is the project's, which tools may write: what is wrong
	// with it is a warning (its servers, or the broken entries, are left
	// out), never a config the host refuses to start or reload with.
	mj, err := readMCPJSON(b.cfg.MCPJSON, b.cfg.Restart)
	if err != nil {
		r := b.at("import_mcp_json")
		left := "the entries named are not imported; the rest are"
		if mj == nil {
			left = "none of its servers are imported"
		}
		b.diags = append(b.diags, &hcl.Diagnostic{
			Severity: hcl.DiagWarning, Summary: "Cannot import all of .mcp.json",
			Detail: fmt.Sprintf("%v: %s, and the rest of the config is used. Fix the file, then run `switchboard reload`.", err, left), Subject: &r,
		})
	}
	for _, x := range mj {
		if _, dup := b.seen["external "+x.Name]; dup {
			continue
		}
		if x.Name == builtins.Reserved {
			r := b.at("import_mcp_json")
			b.diags = append(b.diags, &hcl.Diagnostic{
				Severity: hcl.DiagWarning, Summary: ".mcp.json server named like a built-in",
				Detail: fmt.Sprintf("%s: the server %q is not imported: the name is reserved for the built-in introspection server; rename it there.", b.cfg.MCPJSON, x.Name), Subject: &r,
			})
			continue
		}
		x.Lifecycle = b.cfg.Lifecycle
		b.cfg.Externals = append(b.cfg.Externals, x)
	}
}

// permissions reads the permissions block: default, access and every
// allow and deny pattern.
func (b *builder) permissions(blocks []permSchema) {
	if len(blocks) > 1 {
		b.errAt(blocks[1].Range, "Duplicate permissions block", "Only one permissions block is allowed; merge them.")
	}
	if len(blocks) == 0 {
		return
	}
	p := blocks[0]
	perm := &Permissions{Allow: p.Allow, Deny: p.Deny, Default: "allow", Access: "write", Range: p.Range}
	if p.Default != nil {
		perm.Default = *p.Default
	}
	if p.Access != nil {
		perm.Access = *p.Access
	}
	if !slices.Contains([]string{"allow", "ask", "deny"}, perm.Default) {
		b.errAt(b.in(p.Range, "default"), "Invalid permissions default", fmt.Sprintf("default = %q must be \"allow\", \"ask\" or \"deny\".", perm.Default))
	}
	if !slices.Contains([]string{"read", "write"}, perm.Access) {
		b.errAt(b.in(p.Range, "access"), "Invalid permissions access", fmt.Sprintf("access = %q must be \"read\" or \"write\".", perm.Access))
	}
	for _, list := range []struct {
		name string
		pats []string
	}{{"allow", perm.Allow}, {"deny", perm.Deny}} {
		for _, pat := range list.pats {
			if err := ValidatePattern(pat); err != nil {
				b.errAt(b.in(p.Range, list.name), "Invalid permission pattern", err.Error())
			}
			if rel, ok := b.absoluteProjectPattern(pat); ok {
				r := b.in(p.Range, list.name)
				b.diags = append(b.diags, &hcl.Diagnostic{
					Severity: hcl.DiagWarning, Summary: "Permission pattern matches nothing",
					Detail:  fmt.Sprintf("%s %q names a path in project_dir by its absolute path, but the filesystem's patterns are paths relative to project_dir: write %q.", list.name, pat, rel),
					Subject: &r,
				})
			}
		}
	}
	b.cfg.Permissions = perm
}

// absoluteProjectPattern reports whether pat is a filesystem rule whose
// path is an absolute one inside project_dir, which never matches (the
// filesystem shows such paths relative to project_dir; found from
// outside: a deny rule written so protected nothing, and validate said
// nothing), and the pattern as it should be written.
func (b *builder) absoluteProjectPattern(pat string) (string, bool) {
	head, tail, ok := strings.Cut(pat, ":")
	if !ok || !strings.HasPrefix(head, "filesystem.") || !filepath.IsAbs(tail) || b.cfg.ProjectDir == "" {
		return "", false
	}
	for _, dir := range []string{b.cfg.ProjectDir, resolved(b.cfg.ProjectDir)} {
		if rel, err := filepath.Rel(dir, tail); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			return head + ":" + filepath.ToSlash(rel), true
		}
	}
	return "", false
}

// pluginBinary sets a plugin's binary: path when given (a file, or a
// folder to search), else the plugin's newest binary in plugin_dirs and
// the install directory that meets version.
func (b *builder) pluginBinary(p pluginSchema, pl *Plugin) {
	if p.Version != nil {
		pl.Version = strings.TrimSpace(*p.Version)
		if _, err := pluginstore.ParseConstraint(pl.Version); err != nil {
			b.errAt(b.in(p.Range, "version"), "Invalid version", fmt.Sprintf("plugin %q: version %q is not a version constraint such as \"~> 1.2\" or \">= 1.0, < 2.0\".", p.Name, *p.Version))
			return
		}
	}
	dirs := b.cfg.SearchDirs()
	if p.Path != nil && *p.Path == "" {
		b.errAt(b.in(p.Range, "path"), "Missing plugin path", fmt.Sprintf("plugin %q: path is empty; point it at the plugin's binary (or a folder of its versions), or leave it out to pick the newest installed binary (that meets version).", p.Name))
		return
	}
	if p.Path != nil {
		path := resolve(b.dir, *p.Path)
		if st, err := os.Stat(path); err != nil || !st.IsDir() {
			pl.Path = path
			if _, v, ok := pluginstore.ParseName(filepath.Base(path)); ok && v != nil {
				pl.Resolved = v.String()
			}
			if pl.Version != "" {
				b.checkPathVersion(p, pl)
			}
			return
		}
		dirs = []string{path}
		pl.VersionsDir = path
	}
	bin, err := pluginstore.Find(dirs, p.Name, pl.Version)
	if err != nil {
		b.errAt(p.Range, "No plugin binary", fmt.Sprintf("plugin %q: %v.", p.Name, err))
		return
	}
	pl.Path, pl.Resolved = bin.Path, bin.VersionString()
}

// checkPathVersion refuses a path whose binary's name carries a version
// that does not meet the block's constraint.
func (b *builder) checkPathVersion(p pluginSchema, pl *Plugin) {
	cons, _ := pluginstore.ParseConstraint(pl.Version)
	if _, v, ok := pluginstore.ParseName(filepath.Base(pl.Path)); ok && v != nil && !cons.Check(v) {
		b.errAt(b.in(p.Range, "version"), "Plugin version does not match", fmt.Sprintf("plugin %q: %s is version %s, which does not meet %q; point path at a matching binary (or a folder of them), or change version.", p.Name, pl.Path, v, pl.Version))
	}
}

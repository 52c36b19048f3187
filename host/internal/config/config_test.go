package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/host/internal/builtins"
)

func load(t *testing.T, src string) (*Result, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.hcl")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	return Load(path), dir
}

func TestLoadValid(t *testing.T) {
	t.Setenv("SB_TEST_TOKEN", "s3cret")
	res, dir := load(t, `
project_dir = "."
plugin_dirs = ["plugins"]
builtin "filesystem" { roots = ["extra"] }
builtin "bash" { timeout = "30s" }
builtin "git" { enabled = false }
plugin "hello" {
  path = "bin/hello"
  env  = { TOKEN = env("SB_TEST_TOKEN") }
  config = { greeting = "hi", times = 2 }
}
permissions {
  deny = ["bash.run:rm"]
}
`)
	if res.Diags.HasErrors() {
		t.Fatalf("Load: %s", res.Diags.Error())
	}
	cfg := res.Config
	real, _ := filepath.EvalSymlinks(dir)
	if cfg.ProjectDir != real {
		t.Errorf("ProjectDir = %q, want %q", cfg.ProjectDir, real)
	}
	if len(cfg.Builtins) != 3 || cfg.Builtins[0].Name != "filesystem" || cfg.Builtins[1].Name != "bash" || cfg.Builtins[2].Name != "switchboard" {
		t.Fatalf("Builtins = %+v, want filesystem, bash (git disabled), switchboard (on by default)", cfg.Builtins)
	}
	var fs struct{ Roots []string }
	if err := json.Unmarshal(cfg.Builtins[0].Settings, &fs); err != nil || len(fs.Roots) != 1 || fs.Roots[0] != filepath.Join(dir, "extra") {
		t.Errorf("filesystem settings = %s, want roots resolved against the config dir", cfg.Builtins[0].Settings)
	}
	p := cfg.Plugins[0]
	if p.Path != filepath.Join(dir, "bin/hello") {
		t.Errorf("plugin path = %q, want it resolved against the config dir", p.Path)
	}
	if p.Env["TOKEN"] != "s3cret" {
		t.Errorf("env(\"SB_TEST_TOKEN\") = %q, want s3cret", p.Env["TOKEN"])
	}
	if !bytes.Contains(p.Settings, []byte(`"greeting":"hi"`)) {
		t.Errorf("plugin settings = %s", p.Settings)
	}
	if cfg.PluginDirs[0] != filepath.Join(dir, "plugins") {
		t.Errorf("PluginDirs = %v", cfg.PluginDirs)
	}
	if cfg.Permissions == nil || cfg.Permissions.Deny[0] != "bash.run:rm" || cfg.Permissions.Default != "allow" {
		t.Errorf("Permissions = %+v", cfg.Permissions)
	}
	if strings.HasPrefix(cfg.DataDir, cfg.ProjectDir) {
		t.Errorf("DataDir %q is inside the project", cfg.DataDir)
	}
}

func TestDiagnostics(t *testing.T) {
	tests := []struct {
		name string
		src  string
		// want is a substring of the rendered diagnostics; pos is the
		// "file:line:col" position they must carry.
		want string
		pos  string
	}{
		{"syntax error", "builtin \"git\" {\n  x = \n}\n", "Invalid expression", "config.hcl:2:"},
		{"unknown top-level attribute", "project_dir = \".\"\nprojet = 1\n", `An argument named "projet" is not expected here`, "config.hcl:2:1"},
		{"unknown builtin attribute", "builtin \"bash\" {\n  timout = \"1m\"\n}\n", `An argument named "timout" is not expected here`, "config.hcl:2:3"},
		{"unknown plugin attribute", "plugin \"x\" {\n  path = \"x\"\n  sha = \"1\"\n}\n", `"sha" is not expected`, "config.hcl:3:3"},
		{"unknown builtin", "builtin \"ftp\" {}\n", `There is no built-in "ftp"`, "config.hcl:1:1"},
		{"unknown block", "plugins \"x\" {}\n", `Blocks of type "plugins" are not expected here`, "config.hcl:1:1"},
		{"duplicate plugin", "plugin \"a\" { path = \"x\" }\nplugin \"a\" { path = \"y\" }\n", "already configured at", "config.hcl:2:1"},
		{"bad plugin name", "plugin \"Bad.Name\" { path = \"x\" }\n", "not a valid server name", "config.hcl:1:1"},
		{"bad sha256", "plugin \"a\" {\n path = \"x\"\n sha256 = \"abc\"\n}\n", "64 hex digits", "config.hcl:3:2"},
		{"wrong type", "builtin \"bash\" {\n  output_cap = \"lots\"\n}\n", "Unsuitable value type", "config.hcl:2:"},
		{"bad permission pattern", "permissions {\n  deny = [\"rm\"]\n}\n", "must look like", "config.hcl:2:3"},
		{"project_dir missing", "project_dir = \"nope\"\n", "project_dir is not a directory", "config.hcl:1:1"},
		{"data_dir inside project", "data_dir = \"state\"\n", "data_dir is inside project_dir", "config.hcl:1:1"},
		{"bad duplicate_call_limit", "duplicate_call_limit = 1\n", "Invalid duplicate_call_limit", "config.hcl:1:1"},
		{"bad call_timeout", "call_timeout = \"soon\"\n", "Invalid call_timeout", "config.hcl:1:1"},
		{"bad tool call_timeout", "plugin \"a\" {\n  path = \"x\"\n  tool \"t\" {\n    call_timeout = \"30\"\n  }\n}\n", "is not a positive duration", "config.hcl:4:5"},
		{"duplicate tool block", "builtin \"bash\" {\n  tool \"run\" {}\n  tool \"run\" {}\n}\n", "Duplicate tool block", "config.hcl:3:3"},
		{"plugin named like a built-in", "plugin \"git\" { path = \"x\" }\n", "Plugin named like a built-in", "config.hcl:1:1"},
		{"plugin named switchboard", "plugin \"switchboard\" { path = \"x\" }\n", "is reserved for the built-in introspection server", "config.hcl:1:1"},
		{"plugin named switchboard while it is off", "builtin \"switchboard\" { enabled = false }\nplugin \"switchboard\" { path = \"x\" }\n", "the name stays reserved", "config.hcl:2:1"},
		{"external named switchboard", "external \"switchboard\" { command = \"a\" }\n", "is reserved for the built-in introspection server", "config.hcl:1:1"},
		{"bad prefix", "plugin \"a\" {\n path = \"x\"\n prefix = \"a.b\"\n}\n", "Invalid prefix", "config.hcl:3:2"},
		{"bad audit_max_bytes", "\naudit_max_bytes = 10\n", "audit_max_bytes must be at least 4096", "config.hcl:2:1"},
		{"bad log_level", "log_level = \"loud\"\n", "Invalid log_level", "config.hcl:1:1"},
		{"bad shutdown_grace", "shutdown_grace = \"soon\"\n", "Invalid shutdown_grace", "config.hcl:1:1"},
		{"duplicate top-level restart", "restart {}\nrestart {}\n", "Only one top-level restart block", "config.hcl:2:1"},
		{"bad restart jitter", "restart { jitter = 2 }\n", "jitter must be between 0 and 1", "config.hcl:1:1"},
		{"duplicate server restart", "builtin \"git\" {\n  restart {}\n  restart {}\n}\n", "Only one restart block per server", "config.hcl:3:3"},
		{"duplicate builtin", "builtin \"git\" {}\nbuiltin \"git\" {}\n", "Duplicate builtin block", "config.hcl:2:1"},
		{"disabled builtin still checked", "builtin \"bash\" {\n  enabled = false\n  timout = \"1m\"\n}\n", `"timout" is not expected`, "config.hcl:3:3"},
		{"bad sandbox mode", "builtin \"git\" {\n  sandbox {\n    mode = \"strict\"\n  }\n}\n", "Invalid sandbox mode", "config.hcl:3:5"},
		{"bad sandbox memory", "builtin \"git\" {\n  sandbox {\n    memory = \"1KiB\"\n  }\n}\n", "Invalid sandbox memory", "config.hcl:3:5"},
		{"duplicate sandbox", "builtin \"git\" {\n  sandbox {}\n  sandbox {}\n}\n", "Only one sandbox block per server", "config.hcl:3:3"},
		{"plugin without path", "plugin \"a\" { path = \"\" }\n", "Missing plugin path", "config.hcl:1:1"},
		{"bad start_timeout", "plugin \"a\" {\n path = \"x\"\n start_timeout = \"0s\"\n}\n", "Invalid start_timeout", "config.hcl:3:2"},
		{"bad env key", "plugin \"a\" {\n path = \"x\"\n env = { \"A=B\" = \"1\" }\n}\n", "Invalid environment variable", "config.hcl:3:2"},
		{"external without command", "external \"x\" {}\n", "External server without command or url", "config.hcl:1:1"},
		{"external with both", "external \"x\" {\n command = \"a\"\n url = \"http://h\"\n}\n", "with both command and url", "config.hcl:1:1"},
		{"external bad url", "external \"x\" {\n url = \"ftp://h\"\n}\n", "Invalid url", "config.hcl:2:2"},
		{"external bad timeout", "external \"x\" {\n command = \"a\"\n timeout = \"-1s\"\n}\n", "Invalid timeout", "config.hcl:3:2"},
		{"duplicate external", "external \"x\" { command = \"a\" }\nexternal \"x\" { command = \"b\" }\n", "Duplicate external block", "config.hcl:2:1"},
		{"bad permissions default", "permissions {\n  default = \"maybe\"\n}\n", "Invalid permissions default", "config.hcl:2:3"},
		{"bad permissions access", "permissions {\n  access = \"all\"\n}\n", "Invalid permissions access", "config.hcl:2:3"},
		{"duplicate permissions", "permissions {}\npermissions {}\n", "Duplicate permissions block", "config.hcl:2:1"},
		{"bad max_result_chars", "max_result_chars = 10\n", "use 0 (no limit) or at least 1000", "config.hcl:1:1"},
		{"bad tool max_result_chars", "plugin \"a\" {\n  path = \"x\"\n  tool \"t\" {\n    max_result_chars = -1\n  }\n}\n", "Invalid max_result_chars", "config.hcl:4:5"},
		{"bad max_image_bytes", "builtin \"git\" {\n  max_image_bytes = -1\n}\n", "Invalid max_image_bytes", "config.hcl:2:3"},
		{"bad expose", "expose = \"some\"\n", "Invalid expose", "config.hcl:1:1"},
		{"bad tool_budget_tokens", "tool_budget_tokens = 0\n", "Invalid tool_budget_tokens", "config.hcl:1:1"},
		{"bad always_list", "always_list = [\"read_text_file\"]\n", "is not a tool name", "config.hcl:1:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, _ := load(t, tt.src)
			if !res.Diags.HasErrors() {
				t.Fatalf("Load(%q) has no errors", tt.src)
			}
			var out bytes.Buffer
			if err := res.WriteDiagnostics(&out); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("diagnostics do not mention %q:\n%s", tt.want, out.String())
			}
			if !strings.Contains(out.String(), tt.pos) {
				t.Errorf("diagnostics lack position %q:\n%s", tt.pos, out.String())
			}
			if res.Config != nil {
				t.Error("Config is set despite errors")
			}
		})
	}
}

func TestDefaultConfigIsValid(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	for _, f := range []string{"../../../config.hcl", "../../../examples/config.hcl"} {
		res := Load(f)
		if res.Diags.HasErrors() {
			var out bytes.Buffer
			_ = res.WriteDiagnostics(&out)
			t.Errorf("%s: %s", f, out.String())
		}
	}
	res := Load("../../../config.hcl")
	if want := len(builtins.Names()); res.Config != nil && len(res.Config.Builtins) != want {
		t.Errorf("config.hcl enables %d built-ins, want all %d", len(res.Config.Builtins), want)
	}
}

func TestResolvePath(t *testing.T) {
	t.Setenv(EnvConfig, "")
	if got := ResolvePath(""); got != DefaultFile {
		t.Errorf("ResolvePath(\"\") = %q, want %q", got, DefaultFile)
	}
	t.Setenv(EnvConfig, "/x/y.hcl")
	if got := ResolvePath(""); got != "/x/y.hcl" {
		t.Errorf("ResolvePath with $%s = %q", EnvConfig, got)
	}
	if got := ResolvePath("flag.hcl"); got != "flag.hcl" {
		t.Errorf("ResolvePath(flag) = %q", got)
	}
}

func FuzzLoadBytes(f *testing.F) {
	f.Add([]byte(`builtin "bash" { timeout = "1m" }`))
	f.Add([]byte(`plugin "a" { path = "x" env = { A = env("HOME") } }`))
	f.Add([]byte(`permissions { deny = ["a.b:c*"] }`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, src []byte) {
		res := LoadBytes(filepath.Join(dir, "fuzz.hcl"), src, nil)
		if res.Config == nil && !res.Diags.HasErrors() {
			t.Fatal("no config and no errors")
		}
	})
}

func TestImportMCPJSON(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	t.Setenv("SB_MCP_TOKEN", "tok")
	mcpJSON := `{"mcpServers": {
  "everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"], "env": {"A": "${SB_MCP_TOKEN}", "B": "${SB_UNSET:-dflt}"}},
  "remote": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${SB_MCP_TOKEN}"}},
  "mine": {"command": "from-mcp-json"},
  "shell": {"command": "/bin/sh", "args": ["-c", "echo $0 $SB_MCP_TOKEN ${1} ${SB_MCP_TOKEN}x ${not-a-name} ${SB_MCP_TOKEN"]}
}}`
	if err := os.WriteFile(filepath.Join(dir, ".mcp.json"), []byte(mcpJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	src := "import_mcp_json = true\nexternal \"mine\" { command = \"from-config\" }\nbuiltin \"git\" { enabled = false }\n"
	if err := os.WriteFile(filepath.Join(dir, "config.hcl"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	res := Load(filepath.Join(dir, "config.hcl"))
	if res.Diags.HasErrors() {
		t.Fatal(res.Diags)
	}
	byName := map[string]*External{}
	var order []string
	for _, x := range res.Config.Externals {
		byName[x.Name] = x
		order = append(order, x.Name)
	}
	if strings.Join(order, ",") != "mine,everything,remote,shell" {
		t.Errorf("externals = %v, want the config's block first, then .mcp.json by name", order)
	}
	if byName["mine"].Command != "from-config" {
		t.Errorf("a config block must win over .mcp.json: %+v", byName["mine"])
	}
	ev := byName["everything"]
	if !ev.FromMCPJSON || ev.Command != "npx" || ev.Env["A"] != "tok" || ev.Env["B"] != "dflt" {
		t.Errorf("everything = %+v", ev)
	}
	if r := byName["remote"]; r.URL != "http://127.0.0.1:9/mcp" || r.Headers["Authorization"] != "Bearer tok" {
		t.Errorf("remote = %+v", r)
	}
	// Only ${VAR} and ${VAR:-default}, as Claude Code reads the file: the
	// shell's own $0, $VAR and ${1} reach the shell.
	if got, want := byName["shell"].Args[1], "echo $0 $SB_MCP_TOKEN ${1} tokx ${not-a-name} ${SB_MCP_TOKEN"; got != want {
		t.Errorf("shell's script = %q, want %q", got, want)
	}
	// The entry as written is kept beside what runs: a client is shown that.
	if w := ev.AsWritten; w.Env["A"] != "${SB_MCP_TOKEN}" || w.Args[1] != "@modelcontextprotocol/server-everything" {
		t.Errorf("everything as written = %+v", w)
	}
	if len(res.Config.Disabled) != 1 || res.Config.Disabled[0].Name != "git" {
		t.Errorf("Disabled = %+v", res.Config.Disabled)
	}
}

// A .mcp.json the host cannot use (a tool in the project may write it)
// leaves its servers, or its broken entries, out with a warning: the
// config itself stays valid, so a broken file cannot stop the host from
// starting or reloading.
func TestBrokenMCPJSONIsAWarning(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	for _, tc := range []struct {
		name, file, warning string
		imported            []string
	}{
		{"not JSON", `{"mcpServers": {`, "is not valid JSON", nil},
		{
			"a broken entry", `{"mcpServers": {"good": {"command": "x"}, "bad name!": {"command": "y"}, "neither": {}}}`,
			`"bad name!" is not a valid server name; neither needs exactly one of command and url`,
			[]string{"good"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, ".mcp.json"), []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "config.hcl"), []byte("import_mcp_json = true\nbuiltin \"git\" {}\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			res := Load(filepath.Join(dir, "config.hcl"))
			if res.Diags.HasErrors() || res.Config == nil {
				t.Fatalf("Load = %v; want a valid config", res.Diags)
			}
			if len(res.Config.Warnings) != 1 || !strings.Contains(res.Config.Warnings[0], tc.warning) {
				t.Errorf("warnings = %q; want one saying %q", res.Config.Warnings, tc.warning)
			}
			var got []string
			for _, x := range res.Config.Externals {
				got = append(got, x.Name)
			}
			if !slices.Equal(got, tc.imported) {
				t.Errorf("imported %v; want %v", got, tc.imported)
			}
			if !slices.ContainsFunc(res.Config.Builtins, func(b *Builtin) bool { return b.Name == "git" }) {
				t.Errorf("the rest of the config was not used: builtins %v", res.Config.Builtins)
			}
		})
	}
}

// TestREADMEExamples keeps the README's config examples valid.
func TestREADMEExamples(t *testing.T) {
	b, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(b), "```hcl\n")[1:]
	if len(blocks) == 0 {
		t.Fatal("no hcl examples found in README.md")
	}
	for i, blk := range blocks {
		src, _, _ := strings.Cut(blk, "```")
		res, _ := load(t, src)
		if res.Diags.HasErrors() {
			var out bytes.Buffer
			_ = res.WriteDiagnostics(&out)
			t.Errorf("README example %d does not validate:\n%s\n%s", i+1, src, out.String())
		}
	}
}

// prefix is read from every kind of server block; an unset one is absent
// (the server's name), "" is kept (bare names), and a builtin's prefix is
// not one of its settings.
func TestPrefixes(t *testing.T) {
	res, dir := load(t, `
project_dir = "."
data_dir    = "`+t.TempDir()+`"
builtin "git" { prefix = "g" }
plugin "a" {
  path   = "a"
  prefix = ""
}
plugin "b" { path = "b" }
external "e" {
  command = "x"
  prefix  = "ext"
}
`)
	if res.Diags.HasErrors() {
		t.Fatalf("Load in %s: %s", dir, res.Diags.Error())
	}
	want := map[string]string{"git": "g", "a": "", "e": "ext"}
	if diff := cmp.Diff(want, res.Config.Prefixes); diff != "" {
		t.Errorf("Prefixes (-want +got):\n%s", diff)
	}
	if s := string(res.Config.Builtins[0].Settings); strings.Contains(s, "prefix") {
		t.Errorf("git settings = %s, want no prefix", s)
	}
}

// max_result_chars is read at the top level, in every kind of server block
// and in tool blocks; the most specific one decides; max_image_bytes at
// the top level and per server.
func TestResultLimits(t *testing.T) {
	res, dir := load(t, `
project_dir      = "."
data_dir         = "`+t.TempDir()+`"
max_result_chars = 5000
builtin "git" {
  max_result_chars = 2000
  tool "git_log" { max_result_chars = 0 }
}
plugin "a" {
  path            = "a"
  max_image_bytes = 10
  tool "t" {
    call_timeout     = "1m"
    max_result_chars = 9000
  }
}
external "e" { command = "x" }
`)
	if res.Diags.HasErrors() {
		t.Fatalf("Load in %s: %s", dir, res.Diags.Error())
	}
	r := res.Config.Results
	for _, tc := range []struct {
		server, tool string
		chars        int
		images       int64
	}{
		{"git", "git_status", 2000, DefaultMaxImageBytes},
		{"git", "git_log", 0, DefaultMaxImageBytes},
		{"a", "t", 9000, 10},
		{"a", "u", 5000, 10},
		{"e", "x", 5000, DefaultMaxImageBytes},
	} {
		chars, images, _ := r.Limits(tc.server, tc.tool)
		if chars != tc.chars || images != tc.images {
			t.Errorf("Limits(%s, %s) = %d, %d; want %d, %d", tc.server, tc.tool, chars, images, tc.chars, tc.images)
		}
	}
	if s := string(res.Config.Builtins[0].Settings); strings.Contains(s, "max_result_chars") {
		t.Errorf("git settings = %s, want no max_result_chars", s)
	}
	if e := res.Config.Expose; e.Mode != ExposeAll || e.BudgetTokens != DefaultToolBudgetTokens {
		t.Errorf("Expose = %+v, want all and the default budget", e)
	}
}

// TestSwitchboardOnByDefault checks that the built-in switchboard server
// runs without a block and that only enabled = false turns it off.
func TestSwitchboardOnByDefault(t *testing.T) {
	names := func(cfg *Config) []string {
		var out []string
		for _, b := range cfg.Builtins {
			out = append(out, b.Name)
		}
		return out
	}
	tests := []struct {
		name, src string
		want      []string
		disabled  bool
	}{
		{"no block", "builtin \"git\" {}\n", []string{"git", "switchboard"}, false},
		{"a block", "builtin \"switchboard\" {}\nbuiltin \"git\" {}\n", []string{"switchboard", "git"}, false},
		{"turned off", "builtin \"switchboard\" { enabled = false }\nbuiltin \"git\" {}\n", []string{"git"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, _ := load(t, tt.src)
			if res.Diags.HasErrors() {
				t.Fatalf("Load: %s", res.Diags.Error())
			}
			if diff := cmp.Diff(tt.want, names(res.Config)); diff != "" {
				t.Errorf("Builtins (-want +got):\n%s", diff)
			}
			off := slices.ContainsFunc(res.Config.Disabled, func(d Disabled) bool { return d.Name == "switchboard" })
			if off != tt.disabled {
				t.Errorf("switchboard disabled = %v, want %v", off, tt.disabled)
			}
		})
	}
}

// TestMCPJSONMustBeARegularFile: a repository's .mcp.json linked to
// /dev/zero was read until the host's memory ran out, a FIFO there made the
// load wait forever (red team). Both are refused with a diagnostic at
// once, as is a file too large to be one.
func TestMCPJSONMustBeARegularFile(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	for _, tc := range []struct {
		name string
		make func(path string) error
		want string
	}{
		{"zero", func(p string) error { return os.Symlink("/dev/zero", p) }, "not a regular file"},
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o600) }, "not a regular file"},
		{"huge", func(p string) error {
			return os.WriteFile(p, []byte(`{"mcpServers":{}}`+strings.Repeat(" ", maxMCPJSON)), 0o600)
		}, "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := tc.make(filepath.Join(dir, ".mcp.json")); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "config.hcl"), []byte("import_mcp_json = true\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			done := make(chan *Result, 1)
			go func() { done <- Load(filepath.Join(dir, "config.hcl")) }()
			select {
			case res := <-done:
				if res.Config == nil || len(res.Config.Warnings) != 1 || !strings.Contains(res.Config.Warnings[0], tc.want) {
					t.Errorf("Load with a .mcp.json that is %s: %v, want the config with a warning saying %q", tc.name, res.Diags, tc.want)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("Load with a .mcp.json that is %s did not return", tc.name)
			}
		})
	}
}

// A relative XDG_STATE_HOME is ignored, as the XDG specification asks: it
// put every default data_dir inside the folder the host was started from,
// a project its servers may write (red team round 5).
func TestRelativeXDGStateHomeIsIgnored(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", "relstate")
	if got, want := StateRoot(), filepath.Join(home, ".local", "state", "switchboard"); got != want {
		t.Errorf("StateRoot with XDG_STATE_HOME=relstate = %s, want %s", got, want)
	}
	abs := t.TempDir()
	t.Setenv("XDG_STATE_HOME", abs)
	if got := StateRoot(); got != filepath.Join(abs, "switchboard") {
		t.Errorf("StateRoot with an absolute XDG_STATE_HOME = %s", got)
	}
}

// A filesystem rule naming a path in project_dir by its absolute path
// matches nothing (the filesystem's patterns are relative to project_dir):
// the config says so and how to write it (red team round 19: such a deny
// rule protected nothing, and validate said nothing).
func TestAbsoluteFilesystemPatternWarned(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	if err := os.Mkdir(filepath.Join(dir, "p"), 0o755); err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(dir, "p", "secrets")
	src := fmt.Sprintf("project_dir = \"p\"\npermissions {\n  deny = [%q, \"filesystem.*:*.env\", \"filesystem.*:/etc/*\"]\n}\n", "filesystem.*:"+abs+"/*")
	if err := os.WriteFile(filepath.Join(dir, "config.hcl"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	res := Load(filepath.Join(dir, "config.hcl"))
	if res.Diags.HasErrors() {
		t.Fatal(res.Diags)
	}
	var warned []string
	for _, w := range res.Config.Warnings {
		if strings.Contains(w, "matches nothing") {
			warned = append(warned, w)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], `"filesystem.*:secrets/*"`) {
		t.Errorf("warnings %q: want one naming filesystem.*:secrets/*", res.Config.Warnings)
	}
}

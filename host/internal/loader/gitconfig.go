package loader

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/switchboard-mcp/switchboard/internal/regularfile"
)

// gitConfig is what the host reads of a git config file: its variables in
// the order git reads them, the files it includes inlined where the
// include stands (git's include.path and includeIf.<condition>.path), and
// every file it includes, whether or not it exists.
type gitConfig struct {
	vars     []gitVar
	includes []string
}

// gitVar is one variable of a config file: section (lower case, without
// its subsection) and key (lower case), and value.
type gitVar struct {
	section, key, value string
	// sub is the subsection, as written ([url "ext::sh x #"]).
	sub string
}

// maxIncludeDepth is how deep includes are followed (git stops at 10).
const maxIncludeDepth = 10

// maxConfigSize is the largest config file read: a 1 MiB limit skipped
// the includes of a person's 1.1 MB config (red team round 14). Servers
// cannot write the configs read here (they are bound read-only), only the
// person can make one this large.
const maxConfigSize = 64 << 20

// personConfigs are the person's own git config files, in the order git
// reads them before a repository's: the system's, then the global ones
// (XDG's, then ~/.gitconfig). A relative core.hooksPath set there is
// resolved in each work tree, and their includes may lie in a folder
// servers may write (red team round 14: a global hooksPath = .githooks
// had the agent's hook run at the person's commit).
//
// The environment the host runs in, which is the person's, chooses them as
// it chooses git's (red team round 21: a GIT_CONFIG_GLOBAL file's alias and
// GIT_CONFIG_COUNT's variables were not read): GIT_CONFIG_SYSTEM and
// GIT_CONFIG_NOSYSTEM, GIT_CONFIG_GLOBAL (which replaces both global
// files), and the variables of GIT_CONFIG_COUNT and GIT_CONFIG_PARAMETERS,
// read as a config of their own (envConfig).
func personConfigs() []string {
	var out []string
	switch sys := os.Getenv("GIT_CONFIG_SYSTEM"); {
	case truthy(os.Getenv("GIT_CONFIG_NOSYSTEM")):
	case sys != "":
		out = append(out, sys)
	default:
		out = append(out, "/etc/gitconfig")
	}
	home, _ := os.UserHomeDir()
	if g, ok := os.LookupEnv("GIT_CONFIG_GLOBAL"); ok {
		if g != "" {
			out = append(out, g)
		}
	} else {
		if x := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
			out = append(out, filepath.Join(x, "git", "config"))
		} else if home != "" {
			out = append(out, filepath.Join(home, ".config", "git", "config"))
		}
		if home != "" {
			out = append(out, filepath.Join(home, ".gitconfig"))
		}
	}
	if os.Getenv("GIT_CONFIG_COUNT") != "" || os.Getenv("GIT_CONFIG_PARAMETERS") != "" {
		out = append(out, envConfig)
	}
	return out
}

// envConfig names, among personConfigs, the variables the environment
// sets (GIT_CONFIG_COUNT's KEY_n and VALUE_n, GIT_CONFIG_PARAMETERS).
const envConfig = "\x00environment"

// truthy is git's reading of a boolean variable that is set.
func truthy(v string) bool {
	switch strings.ToLower(v) {
	case "", "0", "false", "no", "off":
		return false
	}
	return true
}

// envVars reads the variables the environment gives git.
func envVars() []gitVar {
	var kvs [][2]string
	for _, w := range shellWords(os.Getenv("GIT_CONFIG_PARAMETERS"), maxSubstitution) {
		if strings.HasPrefix(w, "\x00") {
			continue
		}
		if k, v, ok := strings.Cut(w, "="); ok {
			kvs = append(kvs, [2]string{k, v})
		}
	}
	if n, err := strconv.Atoi(os.Getenv("GIT_CONFIG_COUNT")); err == nil {
		for i := 0; i < n && i < 1000; i++ {
			kvs = append(kvs, [2]string{os.Getenv(fmt.Sprintf("GIT_CONFIG_KEY_%d", i)), os.Getenv(fmt.Sprintf("GIT_CONFIG_VALUE_%d", i))})
		}
	}
	var out []gitVar
	for _, kv := range kvs {
		key := strings.ToLower(kv[0])
		section, rest, ok := strings.Cut(key, ".")
		if !ok {
			continue
		}
		sub, name := "", rest
		if i := strings.LastIndexByte(rest, '.'); i >= 0 {
			sub, name = kv[0][len(section)+1:len(section)+1+i], rest[i+1:]
		}
		out = append(out, gitVar{section: section, key: name, value: kv[1], sub: sub})
	}
	return out
}

// effectiveHooksPath is core.hooksPath as git resolves it for a work tree
// whose repository keeps its config in common and its per-work-tree
// config (extensions.worktreeConfig) in gitDir: the last one set of the
// person's configs, the repository's config and its config.worktree
// (each with its includes). Relative, it is relative to the work tree.
func effectiveHooksPath(common, gitDir string) string {
	hp := ""
	for _, f := range append(personConfigs(), filepath.Join(common, "config"), filepath.Join(gitDir, "config.worktree")) {
		if v := hooksPath(f); v != "" {
			hp = v
		}
	}
	if rest, ok := strings.CutPrefix(hp, "~/"); ok {
		// git expands ~/ in a path setting (a global hooksPath = ~/hooks).
		if home, _ := os.UserHomeDir(); home != "" {
			hp = filepath.Join(home, rest)
		}
	}
	return hp
}

// readGitConfig reads the config file at path and the files it includes.
// Every includeIf is followed whatever its condition: what git may
// include is protected (conservative, as a condition such as onbranch:
// changes with the branch).
func readGitConfig(path string) gitConfig {
	var c gitConfig
	home, _ := os.UserHomeDir()
	c.read(path, home, 0)
	return c
}

func (c *gitConfig) read(path, home string, depth int) {
	if depth > maxIncludeDepth {
		return
	}
	if path == envConfig {
		for _, v := range envVars() {
			c.vars = append(c.vars, v)
			if v.key == "path" && (v.section == "include" || v.section == "includeif") && v.value != "" && filepath.IsAbs(v.value) {
				c.includes = append(c.includes, filepath.Clean(v.value))
				c.read(filepath.Clean(v.value), home, depth+1)
			}
		}
		return
	}
	b, err := regularfile.Read(path, maxConfigSize)
	if err != nil {
		return
	}
	// A UTF-8 byte order mark, which git skips (an editor's), hid the
	// first section from the host (red team round 19).
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	lines := strings.Split(string(b), "\n")
	section, sub := "", ""
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if strings.HasPrefix(line, "[") {
			// [section], [section "subsection"] or [section.subsection],
			// possibly followed by a variable on the same line.
			end := strings.IndexByte(line, ']')
			if end < 0 {
				continue
			}
			header := line[1:end]
			if q := strings.IndexByte(header, '"'); q >= 0 {
				// [section "sub"]: the subsection may hold ] and spaces.
				if close := closingQuote(line, 1+q); close > 0 {
					if e := strings.IndexByte(line[close:], ']'); e >= 0 {
						end = close + e
						header = line[1:end]
					}
				}
			}
			name, subsection, _ := strings.Cut(header, " ")
			name, dotted, isDotted := strings.Cut(name, ".")
			section = strings.ToLower(strings.TrimSpace(strings.Trim(name, `"`)))
			sub = unquoteSub(strings.TrimSpace(subsection))
			if isDotted {
				sub = strings.ToLower(dotted)
			}
			line = strings.TrimSpace(line[end+1:])
			if line == "" {
				continue
			}
		}
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		key := strings.ToLower(strings.TrimSpace(k))
		value := "true" // a key alone is a boolean true
		if ok {
			// A value may go on over the next lines, each line but the
			// last ending in a backslash (red team round 19: "fsmonitor =
			// sh tools/\" then "fsm.sh" left tools/fsm.sh writable).
			for continues(v) && i+1 < len(lines) {
				i++
				v = strings.TrimRight(v, "\r")
				v = v[:len(v)-1] + lines[i]
			}
			value = configString(v)
		}
		c.vars = append(c.vars, gitVar{section: section, key: key, value: value, sub: sub})
		if key == "path" && (section == "include" || section == "includeif") && value != "" {
			inc := value
			if rest, found := strings.CutPrefix(inc, "~/"); found {
				if home == "" {
					continue
				}
				inc = filepath.Join(home, rest)
			} else if !filepath.IsAbs(inc) {
				inc = filepath.Join(filepath.Dir(path), inc)
			}
			inc = filepath.Clean(inc)
			c.includes = append(c.includes, inc)
			c.read(inc, home, depth+1)
		}
	}
}

// closingQuote returns the index of the quote that closes the one at open
// in s (backslashes escape), or -1.
func closingQuote(s string, open int) int {
	for i := open + 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// unquoteSub is a subsection as git reads it: "a \"b\"" is a "b".
func unquoteSub(s string) string {
	s = strings.TrimPrefix(strings.TrimSuffix(s, `"`), `"`)
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// continues reports whether a value's line (v, after the "=") goes on
// over the next line as git reads it: it ends in a backslash that no
// backslash escapes, outside a comment.
func continues(v string) bool {
	v = strings.TrimRight(v, "\r")
	quoted := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			quoted = !quoted
		case !quoted && (c == '#' || c == ';'):
			return false
		case c == '\\':
			if i == len(v)-1 {
				return true
			}
			i++
		}
	}
	return false
}

// configString is a variable's value as git reads it: quotes removed,
// a comment (# or ; outside quotes) cut off, the common escapes undone.
func configString(v string) string {
	// git's value ends at a NUL (red team round 20: "sh x.sh\x00zzz" ran
	// sh x.sh); the marks programPaths uses are no value's.
	if i := strings.IndexByte(v, 0); i >= 0 {
		v = v[:i]
	}
	v = strings.NewReplacer("\x01", "_", "\x02", "_").Replace(v)
	var out strings.Builder
	quoted := false
	v = strings.TrimSpace(v)
	for i := 0; i < len(v); i++ {
		switch ch := v[i]; {
		case ch == '"':
			quoted = !quoted
		case !quoted && (ch == '#' || ch == ';'):
			return strings.TrimSpace(out.String())
		case ch == '\\' && i+1 < len(v):
			i++
			switch v[i] {
			case 'n':
				out.WriteByte('\n')
			case 't':
				out.WriteByte('\t')
			default:
				out.WriteByte(v[i])
			}
		default:
			out.WriteByte(ch)
		}
	}
	return strings.TrimSpace(out.String())
}

// value returns section.key (lower case), the last one set, as in git.
func (c gitConfig) value(section, key string) string {
	found := ""
	for _, v := range c.vars {
		if v.section == section && v.key == key {
			found = v.value
		}
	}
	return found
}

// configValue reads section.key from a repository's config file and the
// files it includes (readGitConfig).
func configValue(config, section, key string) string {
	return readGitConfig(config).value(section, strings.ToLower(key))
}

// hooksPath reads core.hooksPath from a repository's config file.
func hooksPath(config string) string { return configValue(config, "core", "hookspath") }

package loader

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
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
}

// maxIncludeDepth is how deep includes are followed (git stops at 10).
const maxIncludeDepth = 10

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
	b, err := regularfile.Read(path, 1<<20)
	if err != nil {
		return
	}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			// [section], [section "subsection"] or [section.subsection],
			// possibly followed by a variable on the same line.
			end := strings.IndexByte(line, ']')
			if end < 0 {
				continue
			}
			header := line[1:end]
			name, _, _ := strings.Cut(header, " ")
			name, _, _ = strings.Cut(name, ".")
			section = strings.ToLower(strings.TrimSpace(strings.Trim(name, `"`)))
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
			value = configString(v)
		}
		c.vars = append(c.vars, gitVar{section, key, value})
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

// configString is a variable's value as git reads it: quotes removed,
// a comment (# or ; outside quotes) cut off, the common escapes undone.
func configString(v string) string {
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

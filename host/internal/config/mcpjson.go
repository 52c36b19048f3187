package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/host/internal/approvals"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
)

// readMCPJSON reads a Claude Code style .mcp.json: {"mcpServers": {NAME:
// {"command", "args", "env"} or {"type": "http", "url", "headers"}}}.
// ${VAR} and ${VAR:-default} in strings are expanded from the environment.
// A missing file is no servers.
func readMCPJSON(path string, restart Restart) ([]*External, error) {
	b, err := readRegular(path, maxMCPJSON)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f struct {
		MCPServers map[string]struct {
			Type    string            `json:"type"`
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
			URL     string            `json:"url"`
			Headers map[string]string `json:"headers"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON: %v", path, err)
	}
	names := make([]string, 0, len(f.MCPServers))
	for n := range f.MCPServers {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []*External
	var problems []string
	for _, n := range names {
		s := f.MCPServers[n]
		if !registry.NameRE.MatchString(n) {
			problems = append(problems, fmt.Sprintf("%q is not a valid server name", n))
			continue
		}
		x := &External{
			Name: n, Command: expand(s.Command), URL: expand(s.URL), Timeout: 30 * time.Second, Restart: restart, FromMCPJSON: true,
			AsWritten: approvals.Entry{Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL, Headers: s.Headers},
		}
		for _, a := range s.Args {
			x.Args = append(x.Args, expand(a))
		}
		if len(s.Env) > 0 {
			x.Env = map[string]string{}
			for k, v := range s.Env {
				x.Env[k] = expand(v)
			}
		}
		if len(s.Headers) > 0 {
			x.Headers = map[string]string{}
			for k, v := range s.Headers {
				x.Headers[k] = expand(v)
			}
		}
		x.ProjectFiles = projectFiles(filepath.Dir(path), append([]string{x.Command}, x.Args...))
		if (x.Command == "") == (x.URL == "") {
			problems = append(problems, fmt.Sprintf("%s needs exactly one of command and url", n))
			continue
		}
		if s.Type == "sse" {
			problems = append(problems, fmt.Sprintf("%s: the sse transport is not supported; use its streamable HTTP endpoint", n))
			continue
		}
		out = append(out, x)
	}
	if len(problems) > 0 {
		if out == nil {
			out = []*External{} // the file was read: some entries stand
		}
		return out, fmt.Errorf("%s: %s", path, strings.Join(problems, "; "))
	}
	return out, nil
}

// expand fills in ${VAR} and ${VAR:-default} from the host's environment,
// as Claude Code reads .mcp.json: nothing else, so a shell's $VAR (or $0,
// $1) in an argument reaches the shell the entry runs.
func expand(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			break
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			break
		}
		name, def, hasDef := strings.Cut(s[i+2:i+end], ":-")
		if !envName(name) {
			b.WriteString(s[:i+2])
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		if val, ok := os.LookupEnv(name); ok && val != "" {
			b.WriteString(val)
		} else if hasDef {
			b.WriteString(def)
		}
		s = s[i+end+1:]
	}
	b.WriteString(s)
	return b.String()
}

// envName reports whether s is an environment variable's name as a shell
// writes one: a letter or _, then letters, digits and _.
func envName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return s != ""
}

// Redactions maps values of the server's spec that came from the host's
// environment to how its config writes them, for the server's errors
// (external.Spec.Redact): for a .mcp.json entry, each value ${VAR}
// changed (its command, an argument, an env or header value, its URL) to
// the value as written; for every server, each value env("NAME") returned
// while the config was read.
func (x *External) Redactions() map[string]string {
	out := map[string]string{}
	envRead.Range(func(k, v any) bool {
		out[k.(string)] = v.(string)
		return true
	})
	if !x.FromMCPJSON {
		return out
	}
	pair := func(value, written string) {
		if value != written && len(value) >= minRedacted {
			out[value] = written
		}
	}
	w := x.AsWritten
	pair(x.Command, w.Command)
	pair(x.URL, w.URL)
	for i, a := range x.Args {
		if i < len(w.Args) {
			pair(a, w.Args[i])
		}
	}
	for k, v := range x.Env {
		pair(v, w.Env[k])
	}
	for k, v := range x.Headers {
		pair(v, w.Headers[k])
	}
	return out
}

// ApprovalEntry is what a person approves of a server from .mcp.json
// (`switchboard approve NAME`): its values after ${VAR} expansion, that
// is, exactly what runs.
func (x *External) ApprovalEntry() approvals.Entry {
	e := approvals.Entry{Command: x.Command, Args: x.Args, Env: x.Env, URL: x.URL, Headers: x.Headers}
	for _, f := range x.ProjectFiles {
		if e.Files == nil {
			e.Files = map[string]string{}
		}
		e.Files[f] = fileSHA256(f)
	}
	return e
}

// projectFiles lists the files in the project (dir, where the .mcp.json
// is and where the server runs) that a server's command line names, its
// command or an argument (a script it runs): tools can write the project,
// so an approval covers their contents too, and every sandbox binds them
// read-only (Config.Binaries), or an approved server could be edited into
// another (found from outside: a script approved as a server was changed
// by bash afterwards, and ran changed at every start).
func projectFiles(dir string, words []string) []string {
	root := resolved(filepath.Clean(dir))
	var out []string
	for _, w := range words {
		if w == "" || strings.HasPrefix(w, "-") {
			continue
		}
		p := w
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		if within(p, root) && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// maxMCPJSON bounds the .mcp.json the host reads (real ones are a few KB).
const maxMCPJSON = 4 << 20

// readRegular reads the regular file at path, at most limit bytes. A
// project's .mcp.json comes with whatever a repository holds: as a link to
// /dev/zero the host read it until its memory ran out, as a FIFO its open
// never returned (red team). The open does not wait (O_NONBLOCK), and
// anything but a regular file of at most limit bytes is refused.
func readRegular(path string, limit int64) ([]byte, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than the %d bytes the host reads from it", path, limit)
	}
	return b, nil
}

// openRegular opens path for reading without waiting (a FIFO), and only
// when it is a regular file (after any link).
func openRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file (%v): the host reads only a regular file there", path, st.Mode().Type())
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// fileSHA256 is the hex SHA-256 of a file's content ("unreadable" when it
// cannot be read or is not a regular file, which no approval matches).
func fileSHA256(path string) string {
	f, err := openRegular(path)
	if err != nil {
		return "unreadable"
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "unreadable"
	}
	return hex.EncodeToString(h.Sum(nil))
}

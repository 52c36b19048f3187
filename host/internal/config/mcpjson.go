package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/host/internal/approvals"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
)

// readMCPJSON reads a Claude Code style .mcp.json: {"mcpServers": {NAME:
// {"command", "args", "env"} or {"type": "http", "url", "headers"}}}.
// ${VAR} and ${VAR:-default} in strings are expanded from the environment.
// A missing file is no servers.
func readMCPJSON(path string, restart Restart) ([]*External, error) {
	b, err := os.ReadFile(path)
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
		x := &External{Name: n, Command: expand(s.Command), URL: expand(s.URL), Timeout: 30 * time.Second, Restart: restart, FromMCPJSON: true}
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
		return out, fmt.Errorf("%s: %s", path, strings.Join(problems, "; "))
	}
	return out, nil
}

func expand(s string) string {
	return os.Expand(s, func(v string) string {
		name, def, hasDef := strings.Cut(v, ":-")
		if val, ok := os.LookupEnv(name); ok && val != "" {
			return val
		}
		if hasDef {
			return def
		}
		return ""
	})
}

// ApprovalEntry is what a person approves of a server from .mcp.json
// (`switchboard approve NAME`): its values after ${VAR} expansion, that
// is, exactly what runs.
func (x *External) ApprovalEntry() approvals.Entry {
	return approvals.Entry{Command: x.Command, Args: x.Args, Env: x.Env, URL: x.URL, Headers: x.Headers}
}

package registry

import (
	"fmt"
	"strings"

	"github.com/switchboard-mcp/switchboard/sdk/pluginv1"
	"github.com/switchboard-mcp/switchboard/sdk/protocol"
)

// Policy decides which calls may run. Rules are globs over
// "<server>.<tool>" (any arguments) or "<server>.<tool>:<pattern>", where
// the pattern comes from the owning server's PermissionPattern. A call is
// denied if ANY of its patterns matches a deny rule, and allowed if ALL of
// them match an allow rule or the default allows. An opaque pattern
// (protocol.OpaquePrefix: something the server could not read) is never
// matched by an allow rule.
type Policy struct {
	Allow   []string
	Deny    []string
	Default string // "allow" or "deny"
	Access  string // "read" or "write"
}

// Visible reports whether a tool is listed at all: with access "read" the
// WRITE tools are neither listed nor callable.
func (p *Policy) Visible(t Tool) bool { return p.AccessAllows(t) }

// AccessAllows reports whether the access level permits the tool.
func (p *Policy) AccessAllows(t Tool) bool {
	return p.Access != "read" || t.Access() == pluginv1.Access_ACCESS_READ
}

// Check judges a call of tool (canonical name) with its patterns.
func (p *Policy) Check(tool string, patterns []string) error {
	for _, pat := range patterns {
		if rule, ok := matchAny(p.Deny, tool, pat); ok {
			return protocol.Errorf(protocol.CodePermissionDenied, "%s denied by rule %q in the permissions block", describe(tool, pat), rule)
		}
	}
	if p.Default == "allow" {
		return nil
	}
	for _, pat := range patterns {
		if strings.HasPrefix(pat, protocol.OpaquePrefix) {
			return protocol.Errorf(protocol.CodePermissionDenied, "%s is not allowed: the default is deny and no allow rule can approve what the server could not read", describe(tool, pat))
		}
		if _, ok := matchAny(p.Allow, tool, pat); !ok {
			return protocol.Errorf(protocol.CodePermissionDenied, "%s is not allowed: no allow rule matches and the default is deny; add %q to permissions.allow to permit it", describe(tool, pat), suggestion(tool, pat))
		}
	}
	return nil
}

func describe(tool, pat string) string {
	if reason, ok := strings.CutPrefix(pat, protocol.OpaquePrefix); ok {
		return tool + " (" + reason + ")"
	}
	if pat == "" || pat == tool[strings.IndexByte(tool, '.')+1:] {
		return tool
	}
	return tool + ":" + pat
}

func suggestion(tool, pat string) string { return describe(tool, pat) }

// matchAny returns the first rule matching the call.
func matchAny(rules []string, tool, pattern string) (string, bool) {
	for _, rule := range rules {
		head, tail, hasTail := strings.Cut(rule, ":")
		if !Glob(head, tool) {
			continue
		}
		if hasTail && strings.HasPrefix(pattern, protocol.OpaquePrefix) {
			// Only a catch-all rule speaks for what could not be read.
			if tail == "*" {
				return rule, true
			}
			continue
		}
		if !hasTail || Glob(tail, pattern) {
			return rule, true
		}
	}
	return "", false
}

// Glob matches s against a pattern where * matches any run of characters
// (including '/' and '.') and ? any one character.
func Glob(pattern, s string) bool {
	px, sx := 0, 0
	nextPx, nextSx := -1, -1
	for px < len(pattern) || sx < len(s) {
		if px < len(pattern) {
			switch c := pattern[px]; c {
			case '*':
				nextPx, nextSx = px, sx+1
				px++
				continue
			case '?':
				if sx < len(s) {
					px++
					sx++
					continue
				}
			default:
				if sx < len(s) && s[sx] == c {
					px++
					sx++
					continue
				}
			}
		}
		if nextSx > 0 && nextSx <= len(s) {
			px, sx = nextPx, nextSx
			continue
		}
		return false
	}
	return true
}

// String summarises the policy for logs.
func (p *Policy) String() string {
	return fmt.Sprintf("default=%s access=%s allow=%d deny=%d", p.Default, p.Access, len(p.Allow), len(p.Deny))
}

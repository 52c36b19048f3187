package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/switchboard-mcp/switchboard/host/internal/strictmode"
	"github.com/switchboard-mcp/switchboard/internal/pluginv1"
	"github.com/switchboard-mcp/switchboard/internal/protocol"
)

// Policy decides which calls may run. Rules are globs over
// "<server>.<tool>" (any arguments) or "<server>.<tool>:<pattern>", where
// the pattern comes from the owning server's PermissionPattern. A call is
// denied if ANY of its patterns matches a deny rule, and allowed if ALL of
// them match an allow rule; otherwise the default decides (allow, ask or
// deny). An opaque pattern (protocol.OpaquePrefix: something the server
// could not read) is never matched by an allow rule.
//
// Besides the config's rules, a Policy keeps the "always allow" and
// "always deny" decisions users make when asked, in a file in the data
// directory, so they survive restarts. A Policy is safe for concurrent use.
type Policy struct {
	Allow   []string
	Deny    []string
	Default string // "allow", "ask" or "deny"
	Access  string // "read" or "write"
	// Source names where the rules live, for messages ("config.hcl").
	Source string

	mu           sync.RWMutex
	runtimeAllow []string
	runtimeDeny  []string
	storePath    string
}

// Decision is the verdict on one call.
type Decision struct {
	// Verdict is "allow", "deny" or "ask".
	Verdict string
	// Rule is the rule that decided, or "default".
	Rule string
	// Pending are the call's patterns ("tool:pattern") that no allow rule
	// matched, for an "ask" verdict, as shown to a person.
	Pending []string
	// Rules are the rules that would allow (or deny) exactly the pending
	// patterns and nothing else, for an "always" answer: each pattern is
	// quoted with Literal, so a file named "*" stays that one file.
	// Patterns no rule can approve (opaque ones) have none.
	Rules []string
}

// ApprovalRequiredError is returned for a call the policy wants a person
// to approve.
type ApprovalRequiredError struct {
	Tool    string
	Pending []string
	// Rules are what an "always" answer stores (see Decision.Rules).
	Rules  []string
	Source string
}

func (e *ApprovalRequiredError) Error() string {
	return fmt.Sprintf("%s needs approval: no allow rule matches %s and the default is ask; approve it when asked, or add %s to permissions.allow in %s",
		e.Tool, strings.Join(e.Pending, ", "), quoteList(e.Pending), e.Source)
}

// Is makes errors.Is(err, protocol.ErrPermissionDenied) true: the call did
// not run.
func (e *ApprovalRequiredError) Is(target error) bool { return target == protocol.ErrPermissionDenied }

func quoteList(ps []string) string {
	q := make([]string, len(ps))
	for i, p := range ps {
		q[i] = fmt.Sprintf("%q", p)
	}
	return strings.Join(q, ", ")
}

// Update replaces the config's rules (a reload); saved "always" decisions
// stay.
func (p *Policy) Update(allow, deny []string, def, access string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.Allow, p.Deny, p.Default, p.Access = allow, deny, def, access
}

// Visible reports whether a tool is listed at all: with access "read" the
// WRITE tools are neither listed nor callable.
func (p *Policy) Visible(t Tool) bool { return p.AccessAllows(t) }

// AccessAllows reports whether the access level permits the tool.
func (p *Policy) AccessAllows(t Tool) bool {
	p.mu.RLock()
	access := p.Access
	p.mu.RUnlock()
	return access != "read" || t.Access() == pluginv1.Access_ACCESS_READ
}

// MayAsk reports whether a call can need a person's approval (the default
// is "ask").
func (p *Policy) MayAsk() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.Default == "ask"
}

// Decide judges a call of tool (canonical name) with its patterns.
func (p *Policy) Decide(tool string, patterns []string) Decision {
	p.mu.RLock()
	deny, runtimeDeny := p.Deny, p.runtimeDeny
	allow, runtimeAllow := p.Allow, p.runtimeAllow
	def := p.Default
	p.mu.RUnlock()
	for _, pat := range patterns {
		if rule, ok := matchAny(deny, tool, pat, false); ok {
			return Decision{Verdict: "deny", Rule: rule}
		}
		if rule, ok := matchAny(runtimeDeny, tool, pat, false); ok {
			return Decision{Verdict: "deny", Rule: rule}
		}
	}
	var pending, rules []string
	rule := ""
	for _, pat := range patterns {
		r, ok := matchAny(allow, tool, pat, true)
		if !ok {
			r, ok = matchAny(runtimeAllow, tool, pat, true)
		}
		if !ok {
			pending = append(pending, describe(tool, pat))
			if !strings.HasPrefix(pat, protocol.OpaquePrefix) {
				rules = append(rules, Literal(tool)+":"+Literal(pat))
			}
			continue
		}
		rule = r
	}
	if len(pending) == 0 {
		return Decision{Verdict: "allow", Rule: rule}
	}
	switch def {
	case "allow", "":
		return Decision{Verdict: "allow", Rule: "default"}
	case "ask":
		return Decision{Verdict: "ask", Rule: "default", Pending: pending, Rules: rules}
	default:
		return Decision{Verdict: "deny", Rule: "default", Pending: pending, Rules: rules}
	}
}

// Check judges a call and returns nil when it may run, or the refusal.
func (p *Policy) Check(tool string, patterns []string) error {
	return p.errorFor(tool, p.Decide(tool, patterns), false)
}

// errorFor turns a decision into the refusal (nil to run). approved means
// a person approved this very call.
func (p *Policy) errorFor(tool string, d Decision, approved bool) error {
	switch d.Verdict {
	case "allow":
		return nil
	case "ask":
		if approved {
			return nil
		}
		return &ApprovalRequiredError{Tool: tool, Pending: d.Pending, Rules: d.Rules, Source: p.source()}
	}
	if d.Rule != "default" {
		return protocol.Errorf(protocol.CodePermissionDenied, "%s denied by rule %q in the permissions block", tool, d.Rule)
	}
	for _, pat := range d.Pending {
		if strings.Contains(pat, " (") {
			return protocol.Errorf(protocol.CodePermissionDenied, "%s is not allowed: the default is deny and no allow rule can approve what the server could not read", pat)
		}
	}
	return protocol.Errorf(protocol.CodePermissionDenied, "%s is not allowed: no allow rule matches and the default is deny; add %s to permissions.allow in %s to permit it",
		strings.Join(d.Pending, ", "), quoteList(d.Pending), p.source())
}

func (p *Policy) source() string {
	if p.Source == "" {
		return "the config"
	}
	return p.Source
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

// matchAny returns the first rule matching the call. An opaque pattern is
// never matched by an allow rule; a deny rule matches it only when its
// pattern part is "*" or absent.
func matchAny(rules []string, tool, pattern string, allow bool) (string, bool) {
	opaque := strings.HasPrefix(pattern, protocol.OpaquePrefix)
	if opaque && allow {
		return "", false
	}
	for _, rule := range rules {
		head, tail, hasTail := strings.Cut(rule, ":")
		if !Glob(head, tool) {
			continue
		}
		if hasTail && opaque {
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
// (including '/' and '.'), ? any one character, and a backslash makes the
// character after it literal (\* is a star, \\ a backslash; a trailing
// backslash matches itself). Literal quotes any string for a pattern.
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
			case '\\':
				lit, n := c, 1
				if px+1 < len(pattern) {
					lit, n = pattern[px+1], 2
				}
				if sx < len(s) && s[sx] == lit {
					px += n
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

// Literal quotes s so that Glob matches exactly s and nothing else: the
// form in which an "always" answer about one call is stored.
func Literal(s string) string {
	if !strings.ContainsAny(s, `*?\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '*' || c == '?' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// String summarises the policy for logs.
func (p *Policy) String() string {
	return fmt.Sprintf("default=%s access=%s allow=%d deny=%d", p.Default, p.Access, len(p.Allow), len(p.Deny))
}

// storedRules is the permissions file's format.
type storedRules struct {
	Version int      `json:"version"`
	Allow   []string `json:"allow"`
	Deny    []string `json:"deny"`
}

// Load reads the "always" decisions from path (a missing file is empty)
// and keeps path for Remember. A file another user owns or can write is
// refused (strictmode.Check).
func (p *Policy) Load(path string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.storePath = path
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("registry: reading saved permissions: %w", err)
	}
	// Another user able to write the file could allow anything.
	if err := strictmode.Check(path); err != nil {
		return fmt.Errorf("registry: saved permissions refused: %w", err)
	}
	var s storedRules
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("registry: saved permissions %s are not valid JSON (%v); fix or delete the file", path, err)
	}
	p.runtimeAllow, p.runtimeDeny = s.Allow, s.Deny
	return nil
}

// Remember adds "always allow" (allow) or "always deny" rules, effective
// from the next call, and saves them (atomically) when a file was loaded.
func (p *Policy) Remember(rules []string, allow bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Another host on the same data directory may have saved decisions
	// since this one loaded them: merge, never overwrite.
	if p.storePath != "" {
		if err := strictmode.Check(p.storePath); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("registry: saved permissions refused: %w", err)
		}
		if b, err := os.ReadFile(p.storePath); err == nil {
			var s storedRules
			if json.Unmarshal(b, &s) == nil {
				for _, r := range s.Allow {
					if !slices.Contains(p.runtimeAllow, r) {
						p.runtimeAllow = append(p.runtimeAllow, r)
					}
				}
				for _, r := range s.Deny {
					if !slices.Contains(p.runtimeDeny, r) {
						p.runtimeDeny = append(p.runtimeDeny, r)
					}
				}
			}
		}
	}
	for _, r := range rules {
		if allow && !slices.Contains(p.runtimeAllow, r) {
			p.runtimeAllow = append(p.runtimeAllow, r)
		}
		if !allow && !slices.Contains(p.runtimeDeny, r) {
			p.runtimeDeny = append(p.runtimeDeny, r)
		}
	}
	if p.storePath == "" {
		return nil
	}
	b, err := json.MarshalIndent(storedRules{Version: 1, Allow: p.runtimeAllow, Deny: p.runtimeDeny}, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p.storePath), ".permissions-*.json")
	if err != nil {
		return fmt.Errorf("registry: saving permissions: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), p.storePath)
}

// Remembered returns the saved "always" rules.
func (p *Policy) Remembered() (allow, deny []string) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return slices.Clone(p.runtimeAllow), slices.Clone(p.runtimeDeny)
}

package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/host/internal/strictmode"
	"github.com/switchboard-mcp/switchboard/sdk/protocol"
)

// Policy decides which calls may run. Rules are globs over
// "<server>.<tool>" (any arguments) or "<server>.<tool>:<pattern>", where
// the pattern comes from the owning server's PermissionPattern. A call is
// denied if ANY of its patterns matches a deny rule, and allowed if ALL of
// them match an allow rule; otherwise the default decides (Allow, Ask or
// Deny). An opaque pattern (protocol.OpaquePrefix: something the server
// could not read) is never matched by an allow rule. Access decides which
// tools are listed and callable at all.
//
// Besides the config's rules, a Policy keeps the "always allow" and
// "always deny" decisions users make when asked, in a file in the data
// directory, so they survive restarts. A Policy is safe for concurrent use
// once it is shared; set its fields before, and change them with Update.
type Policy struct {
	Allow   []string
	Deny    []string
	Default Verdict // the zero Verdict means Allow
	Access  Access  // the zero Access means AccessWrite
	// Source names where the rules live, for messages ("config.hcl").
	Source string
	// AskFirst lists tools (canonical names) that a person approves
	// before they run when no allow rule matches, even when the default
	// is allow: a deny default still refuses them, and an allow rule or a
	// saved "always allow" still lets them run (switchboard.restart_server).
	AskFirst []string

	mu           sync.RWMutex
	runtimeAllow []string
	runtimeDeny  []string
	// callerSaved are the authenticated callers' own "always" answers,
	// by caller name: they count only for that caller.
	callerSaved map[string]savedRules
	storePath   string
	shared      Decisions
}

// savedRules are one caller's saved "always" answers.
type savedRules struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// Decisions keeps saved "always" answers where every host on a config
// reads them (the shared store), instead of this host's permissions file.
// It is safe for concurrent use.
type Decisions interface {
	// Saved returns the saved "always allow" and "always deny" rules of
	// owner ("" holds the answers that apply to every caller).
	Saved(ctx context.Context, owner string) (allow, deny []string, err error)
	// Save adds rules to owner's saved "always allow" (allow) or "always
	// deny" rules; once it returns they are in every later Saved, on
	// every host. Adding a rule already saved is not an error.
	Save(ctx context.Context, owner string, rules []string, allow bool) error
}

// EveryCaller is the owner of saved answers that apply to every caller:
// today all of them (a person's "always" answer extends the config's
// rules, which are everyone's).
const EveryCaller = ""

// ShareDecisions makes p keep its saved answers in d instead of a file:
// every call reads them from d, so an answer given on another host counts
// from the next call on, and Remember saves to d. Call it before p is
// shared.
func (p *Policy) ShareDecisions(d Decisions) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shared = d
}

// rulesAt reads the policy once for a call: with shared decisions, their
// current state. An error means the shared decisions could not be read.
func (p *Policy) rulesAt(ctx context.Context) (rules, error) {
	c := CallerFrom(ctx)
	r := p.rulesFor(c)
	p.mu.RLock()
	shared := p.shared
	p.mu.RUnlock()
	if shared == nil {
		return r, nil
	}
	allow, deny, err := shared.Saved(ctx, EveryCaller)
	if err != nil {
		return r, protocol.Errorf(protocol.CodeUnavailable, "the saved \"always\" answers could not be read from the shared store, and one may deny this call, so it was not run: %v. Check that the database in the store block of %s is up and reachable", err, r.source)
	}
	r.savedAllow, r.savedDeny = allow, deny
	if c != nil {
		// The authenticated caller's own answers (RememberFor).
		ca, cd, err := shared.Saved(ctx, c.Name)
		if err != nil {
			return r, protocol.Errorf(protocol.CodeUnavailable, "the saved \"always\" answers could not be read from the shared store, and one may deny this call, so it was not run: %v. Check that the database in the store block of %s is up and reachable", err, r.source)
		}
		r.callerAllow, r.callerDeny = ca, cd
		r.savedAllow = append(slices.Clip(r.savedAllow), ca...)
		r.savedDeny = append(slices.Clip(r.savedDeny), cd...)
	}
	return r, nil
}

// rules is one consistent reading of a Policy: a call is judged against
// one of these, so that a reload in the middle of a call cannot mix old
// and new rules.
type rules struct {
	allow, deny           []string
	savedAllow, savedDeny []string
	def                   Verdict
	access                Access
	source                string
	askFirst              []string
	// caller, when set, narrows the verdict (caller.go); callerAllow and
	// callerDeny are its saved answers, which also count in the config's
	// layer (its "always allow" settles what it was asked about).
	caller                  *Caller
	callerAllow, callerDeny []string
}

// rules reads the policy once.
func (p *Policy) rules() rules { return p.rulesFor(nil) }

// rulesFor reads the policy once for caller c (nil: nobody authenticated).
func (p *Policy) rulesFor(c *Caller) rules {
	p.mu.RLock()
	defer p.mu.RUnlock()
	r := rules{
		allow: p.Allow, deny: p.Deny, savedAllow: p.runtimeAllow, savedDeny: p.runtimeDeny,
		def: p.Default, access: p.Access, source: sourceName(p.Source), askFirst: p.AskFirst,
	}
	if c != nil {
		r.caller = c
		own := p.callerSaved[c.Name]
		r.callerAllow, r.callerDeny = own.Allow, own.Deny
		r.savedAllow = append(slices.Clip(r.savedAllow), own.Allow...)
		r.savedDeny = append(slices.Clip(r.savedDeny), own.Deny...)
	}
	return r
}

// Update replaces the config's rules (a reload); saved "always" decisions
// stay.
func (p *Policy) Update(allow, deny []string, def Verdict, access Access) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.Allow, p.Deny, p.Default, p.Access = allow, deny, def, access
}

// Visible reports whether a tool is listed at all: with AccessRead the
// WRITE tools are neither listed nor callable.
func (p *Policy) Visible(t Tool) bool { return p.rules().visible(t) }

func (r rules) visible(t Tool) bool {
	return r.access.Permits(t.Access()) && r.caller.Visible(t.Access())
}

// MayAsk reports whether a call can need a person's approval (the default
// is Ask).
func (p *Policy) MayAsk() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.Default == Ask
}

// Decide judges a call of tool (canonical name) with its patterns (as the
// server sent them: an opaque one starts with protocol.OpaquePrefix).
func (p *Policy) Decide(tool string, patterns []string) Decision {
	return p.rules().decide(tool, patterns)
}

func (r rules) decide(tool string, patterns []string) Decision {
	return r.decideCaller(tool, patterns, r.decideOwn(tool, patterns))
}

// decideOwn judges a call against these rules alone (without a caller's).
func (r rules) decideOwn(tool string, patterns []string) Decision {
	for _, pat := range patterns {
		if rule, ok := matchAny(r.deny, tool, pat, false); ok {
			return Decision{Verdict: Deny, Reason: ByRule, Rule: rule}
		}
		if rule, ok := matchAny(r.savedDeny, tool, pat, false); ok {
			return Decision{Verdict: Deny, Reason: BySaved, Rule: rule}
		}
	}
	var pending []Pending
	d := Decision{Verdict: Allow}
	for _, pat := range patterns {
		if rule, ok := matchAny(r.allow, tool, pat, true); ok {
			d.Reason, d.Rule = ByRule, rule
			continue
		}
		if rule, ok := matchAny(r.savedAllow, tool, pat, true); ok {
			d.Reason, d.Rule = BySaved, rule
			continue
		}
		pending = append(pending, newPending(tool, pat))
	}
	if len(pending) == 0 {
		return d
	}
	switch r.def {
	case 0, Allow:
		if slices.Contains(r.askFirst, tool) {
			return Decision{Verdict: Ask, Reason: ByDefault, Pending: pending}
		}
		if rule := r.uncheckedDeny(tool, pending); rule != "" {
			return Decision{Verdict: Ask, Reason: ByDefault, Pending: pending, Unchecked: rule}
		}
		return Decision{Verdict: Allow, Reason: ByDefault}
	case Ask:
		return Decision{Verdict: Ask, Reason: ByDefault, Pending: pending, Unchecked: r.uncheckedDeny(tool, pending)}
	default:
		return Decision{Verdict: Deny, Reason: ByDefault, Pending: pending}
	}
}

// uncheckedDeny returns a deny rule with a pattern for tool (e.g.
// "bash.run:rm") when one of the pending patterns is unreadable: the rule
// cannot be checked against it (found from outside: under default "allow",
// `{rm,f}` and `x=rm; $x f` ran although bash.run:rm was denied).
func (r rules) uncheckedDeny(tool string, pending []Pending) string {
	if !slices.ContainsFunc(pending, func(p Pending) bool { return p.Unreadable != "" }) {
		return ""
	}
	for _, rule := range slices.Concat(r.deny, r.savedDeny) {
		if head, _, hasTail := strings.Cut(rule, ":"); hasTail && Glob(head, tool) {
			return rule
		}
	}
	return ""
}

// deniedPatterns returns the pattern parts of the deny rules (the
// config's, the saved ones, and the caller's) that name tool: what a tool
// that reads beyond what its arguments name must leave out
// (toolcall.WithDenied), as a call naming it would be refused.
func (r rules) deniedPatterns(tool string) []string {
	var out []string
	add := func(rules []string) {
		for _, rule := range rules {
			if head, tail, ok := strings.Cut(rule, ":"); ok && Glob(head, tool) && !slices.Contains(out, tail) {
				out = append(out, tail)
			}
		}
	}
	add(r.deny)
	add(r.savedDeny)
	if r.caller != nil {
		add(r.caller.Deny)
		add(r.callerDeny)
	}
	return out
}

// Check judges a call and returns nil when it may run, or the refusal (an
// Ask verdict is refused with an *ApprovalRequiredError: nobody is asked).
func (p *Policy) Check(tool string, patterns []string) error {
	r := p.rules()
	d := r.decide(tool, patterns)
	switch d.Verdict {
	case Allow:
		return nil
	case Ask:
		return Approval{Tool: tool, Pending: d.Pending, Source: r.source, AskFirst: r.def != Ask, Unchecked: d.Unchecked}.Required()
	}
	return r.refusal(tool, d)
}

// refusal is the error for a Deny verdict.
func (r rules) refusal(tool string, d Decision) error {
	if d.Caller != "" && r.caller != nil {
		return r.callerRefusal(tool, d)
	}
	switch d.Reason {
	case ByRule:
		return protocol.Errorf(protocol.CodePermissionDenied, "%s denied by rule %q in the permissions block", tool, d.Rule)
	case BySaved:
		return protocol.Errorf(protocol.CodePermissionDenied, "%s denied by rule %q, saved from an earlier \"always deny\" answer", tool, d.Rule)
	}
	for _, p := range d.Pending {
		if p.Unreadable != "" {
			return protocol.Errorf(protocol.CodePermissionDenied, "%s is not allowed: the default is deny and no allow rule can approve what the server could not read", p)
		}
	}
	return protocol.Errorf(protocol.CodePermissionDenied, "%s is not allowed: no allow rule matches and the default is deny; add %s to permissions.allow in %s to permit it",
		describeAll(d.Pending), quoteAll(d.Pending), r.source)
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

// Glob is protocol.Glob: how a rule's patterns match (plugins that leave
// out what deny rules match use the same).
func Glob(pattern, s string) bool { return protocol.Glob(pattern, s) }

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
	r := p.rules()
	def, access := r.def, r.access
	if def == 0 {
		def = Allow
	}
	if access == 0 {
		access = AccessWrite
	}
	return fmt.Sprintf("default=%s access=%s allow=%d deny=%d", def, access, len(r.allow), len(r.deny))
}

// storedRules is the permissions file's format.
type storedRules struct {
	Version int      `json:"version"`
	Allow   []string `json:"allow"`
	Deny    []string `json:"deny"`
	// Callers are the authenticated callers' own answers, by name.
	Callers map[string]savedRules `json:"callers,omitempty"`
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
	p.callerSaved = s.Callers
	return nil
}

// Remember adds "always allow" (allow) or "always deny" rules, effective
// from the next call, and saves them (atomically) when a file was loaded.
func (p *Policy) Remember(rules []string, allow bool) error {
	return p.RememberFor("", rules, allow)
}

// RememberFor is Remember for the answers of the authenticated caller
// named caller ("" for everyone's): they count only in that caller's calls.
func (p *Policy) RememberFor(caller string, rules []string, allow bool) error {
	p.mu.RLock()
	shared := p.shared
	p.mu.RUnlock()
	if shared != nil {
		return p.rememberShared(shared, caller, rules, allow)
	}
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
				for name, theirs := range s.Callers {
					p.mergeCaller(name, theirs.Allow, true)
					p.mergeCaller(name, theirs.Deny, false)
				}
			}
		}
	}
	if caller != "" {
		p.mergeCaller(caller, rules, allow)
	} else {
		for _, r := range rules {
			if allow && !slices.Contains(p.runtimeAllow, r) {
				p.runtimeAllow = append(p.runtimeAllow, r)
			}
			if !allow && !slices.Contains(p.runtimeDeny, r) {
				p.runtimeDeny = append(p.runtimeDeny, r)
			}
		}
	}
	if p.storePath == "" {
		return nil
	}
	b, err := json.MarshalIndent(storedRules{Version: 1, Allow: p.runtimeAllow, Deny: p.runtimeDeny, Callers: p.callerSaved}, "", "  ")
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

// mergeCaller adds rules to caller's saved answers; p.mu held.
func (p *Policy) mergeCaller(caller string, rules []string, allow bool) {
	if p.callerSaved == nil {
		p.callerSaved = map[string]savedRules{}
	}
	own := p.callerSaved[caller]
	for _, r := range rules {
		if allow && !slices.Contains(own.Allow, r) {
			own.Allow = append(own.Allow, r)
		}
		if !allow && !slices.Contains(own.Deny, r) {
			own.Deny = append(own.Deny, r)
		}
	}
	p.callerSaved[caller] = own
}

// RememberedBy returns the "always" rules saved by the authenticated
// caller named caller.
func (p *Policy) RememberedBy(caller string) (allow, deny []string) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	own := p.callerSaved[caller]
	return slices.Clone(own.Allow), slices.Clone(own.Deny)
}

// rememberShared saves rules of owner in the shared decisions, without
// holding p.mu (calls keep being judged while the database answers), and
// adds them to the ones this host knows.
func (p *Policy) rememberShared(shared Decisions, owner string, rules []string, allow bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := shared.Save(ctx, owner, rules, allow); err != nil {
		return err
	}
	if owner != EveryCaller {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range rules {
		if allow && !slices.Contains(p.runtimeAllow, r) {
			p.runtimeAllow = append(p.runtimeAllow, r)
		}
		if !allow && !slices.Contains(p.runtimeDeny, r) {
			p.runtimeDeny = append(p.runtimeDeny, r)
		}
	}
	return nil
}

// Remembered returns the saved "always" rules this host knows of (with
// shared decisions: those it saved itself).
func (p *Policy) Remembered() (allow, deny []string) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return slices.Clone(p.runtimeAllow), slices.Clone(p.runtimeDeny)
}

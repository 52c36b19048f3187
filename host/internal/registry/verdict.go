package registry

import (
	"context"
	"fmt"
	"strings"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
)

// Verdict is the policy's answer about one call.
type Verdict int

// Verdicts. The zero Verdict is none of them; as a Policy's Default it
// means Allow.
const (
	// Allow runs the call.
	Allow Verdict = iota + 1
	// Ask runs the call only if a person approves it (see Approver).
	Ask
	// Deny refuses the call.
	Deny
)

// String returns the verdict as the config and the audit log write it.
func (v Verdict) String() string {
	switch v {
	case Allow:
		return "allow"
	case Ask:
		return "ask"
	case Deny:
		return "deny"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// ParseVerdict reads a verdict as the config writes it: "allow", "ask" or
// "deny".
func ParseVerdict(s string) (Verdict, error) {
	for _, v := range []Verdict{Allow, Ask, Deny} {
		if s == v.String() {
			return v, nil
		}
	}
	return 0, fmt.Errorf("registry: %q is not a verdict (allow, ask or deny)", s)
}

// Access is an access level: of a tool (what it may do) and of a host
// (which tools it lists and runs).
type Access int

// Access levels. The zero Access is neither; as a Policy's Access it means
// AccessWrite, and a tool that does not say counts as AccessWrite.
const (
	// AccessRead is a tool that only reads, or a host that runs only those.
	AccessRead Access = iota + 1
	// AccessWrite is a tool that may change things, or a host that runs
	// every tool.
	AccessWrite
)

// String returns the level as the config writes it: "read" or "write".
func (a Access) String() string {
	switch a {
	case AccessRead:
		return "read"
	case AccessWrite:
		return "write"
	}
	return fmt.Sprintf("Access(%d)", int(a))
}

// ParseAccess reads an access level as the config writes it: "read" or
// "write".
func ParseAccess(s string) (Access, error) {
	switch s {
	case "read":
		return AccessRead, nil
	case "write":
		return AccessWrite, nil
	}
	return 0, fmt.Errorf("registry: %q is not an access level (read or write)", s)
}

// Permits reports whether a host with access level a runs a tool of
// level tool: a read-only host runs only READ tools.
func (a Access) Permits(tool Access) bool {
	return a != AccessRead || tool == AccessRead
}

// Reason says which part of the policy reached a verdict.
type Reason int

// Reasons.
const (
	// ByRule: a rule of the config's permissions block (Decision.Rule).
	ByRule Reason = iota + 1
	// BySaved: a saved "always allow" or "always deny" answer
	// (Decision.Rule).
	BySaved
	// ByDefault: no deny rule matched and some pattern no allow rule
	// matched (Decision.Pending), so the policy's default decided.
	ByDefault
	// ByPatternError: the server could not say what the call touches
	// (its PermissionPattern failed), so the call is denied.
	ByPatternError
)

// String names the reason for logs.
func (r Reason) String() string {
	switch r {
	case ByRule:
		return "rule"
	case BySaved:
		return "saved"
	case ByDefault:
		return "default"
	case ByPatternError:
		return "pattern-error"
	}
	return fmt.Sprintf("Reason(%d)", int(r))
}

// Pending is one of a call's permission patterns that no allow rule
// matched.
type Pending struct {
	// Tool is the canonical "<server>.<tool>".
	Tool string
	// Pattern is the owning server's pattern for the call ("ls",
	// "/p/a"), or the tool's own name when the tool has no patterns of its
	// own. Empty when Unreadable is set.
	Pattern string
	// Unreadable, when set, says why the server could not read the call
	// (it sent an opaque pattern, protocol.Opaque). No allow rule ever
	// approves such a pattern, and no "always" answer can.
	Unreadable string
	// Rule is what an "always" answer stores to allow (or deny) exactly
	// this pattern and nothing else: quoted with Literal, so a file named
	// "*" stays that one file. Empty when Unreadable is set.
	Rule string
}

// newPending describes pattern pat of a call of tool.
func newPending(tool, pat string) Pending {
	if reason, ok := strings.CutPrefix(pat, protocol.OpaquePrefix); ok {
		return Pending{Tool: tool, Unreadable: reason}
	}
	return Pending{Tool: tool, Pattern: pat, Rule: Literal(tool) + ":" + Literal(pat)}
}

// String shows the pattern to a person: "bash.run:ls", "git.git_status"
// (a tool without patterns of its own), or "bash.run (a subshell)" (an
// unreadable one).
func (p Pending) String() string {
	if p.Unreadable != "" {
		return p.Tool + " (" + p.Unreadable + ")"
	}
	if p.Pattern == "" || p.Pattern == p.Tool[strings.IndexByte(p.Tool, '.')+1:] {
		return p.Tool
	}
	return p.Tool + ":" + p.Pattern
}

// Decision is the policy's verdict on one call and why.
type Decision struct {
	Verdict Verdict
	Reason  Reason
	// Rule is the rule that decided (ByRule, BySaved): the deny rule that
	// matched, or the last allow rule that matched.
	Rule string
	// Pending are the call's patterns that no allow rule matched, for a
	// verdict reached ByDefault.
	Pending []Pending
	// Caller is set when the authenticated caller's own rules reached the
	// verdict (its name).
	Caller string
	// Unchecked is set when the verdict is Ask although the default is
	// allow: a pattern the server could not read (protocol.Opaque) may be
	// what this deny rule forbids. A line whose effect cannot be known
	// statically is never allowed by default (DESIGN, Boundaries).
	Unchecked string
}

// Rules are the rules an "always" answer about the call stores: one per
// pending pattern that a rule can approve (see Pending.Rule).
func (d Decision) Rules() []string { return rulesOf(d.Pending) }

// auditRule is the decision's rule as the audit log records it.
func (d Decision) auditRule() string {
	switch d.Reason {
	case ByDefault, ByPatternError:
		return d.Reason.String()
	}
	return d.Rule
}

func rulesOf(pending []Pending) []string {
	var rules []string
	for _, p := range pending {
		if p.Rule != "" {
			rules = append(rules, p.Rule)
		}
	}
	return rules
}

func describeAll(pending []Pending) string {
	s := make([]string, len(pending))
	for i, p := range pending {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

func quoteAll(pending []Pending) string {
	q := make([]string, len(pending))
	for i, p := range pending {
		q[i] = fmt.Sprintf("%q", p.String())
	}
	return strings.Join(q, ", ")
}

// Approval is a call whose verdict is Ask: what a person is asked about.
type Approval struct {
	// Tool is the canonical "<server>.<tool>".
	Tool string
	// Args are the call's arguments as the registry checked them (a JSON
	// object).
	Args []byte
	// Pending are the patterns that need the person's yes.
	Pending []Pending
	// Source names where the rules live, for messages ("config.hcl").
	Source string
	// AskFirst says the tool is asked about although the default is not
	// ask (Policy.AskFirst).
	AskFirst bool
	// Caller is the authenticated caller that made the call ("" for
	// none): its "always" answers are kept for it alone
	// (Policy.RememberFor).
	Caller string
	// Unchecked is a deny rule that could not be checked against an
	// unreadable pattern (Decision.Unchecked).
	Unchecked string
}

// Rules are what an "always" answer stores (see Pending.Rule).
func (a Approval) Rules() []string { return rulesOf(a.Pending) }

// What lists the pending patterns for a person: "bash.run:curl, bash.run:sh".
func (a Approval) What() string {
	if a.Unchecked != "" {
		return describeAll(a.Pending) + "; its effect is known only when it runs, so the deny rule " + a.Unchecked + " cannot be checked against it"
	}
	return describeAll(a.Pending)
}

// Required is the refusal of the call when nobody can be asked.
func (a Approval) Required() *ApprovalRequiredError { return &ApprovalRequiredError{Approval: a} }

// Approver settles calls whose verdict is Ask. Call finds it in the
// call's context (WithApprover); without one, such a call is refused with
// an *ApprovalRequiredError.
type Approver interface {
	// Approve is called at most once per call, after the policy's one
	// evaluation and before the call reaches its server. It returns nil
	// when a person approved the call. Otherwise Call refuses the call
	// with the error as is: an *ApprovalRequiredError, or an error that
	// wraps one, when nobody answered (audited as "ask"), any other error
	// when a person said no (audited as "deny"). Approve may block while
	// a person thinks and must return when ctx ends.
	Approve(ctx context.Context, a Approval) error
}

type approverKey struct{}

// WithApprover makes Call ask a for approval of calls whose verdict is
// Ask.
func WithApprover(ctx context.Context, a Approver) context.Context {
	return context.WithValue(ctx, approverKey{}, a)
}

func approverFrom(ctx context.Context) Approver {
	a, _ := ctx.Value(approverKey{}).(Approver)
	return a
}

// ApprovalRequiredError refuses a call whose verdict is Ask when nobody
// approved it.
type ApprovalRequiredError struct {
	Approval
}

func (e *ApprovalRequiredError) Error() string {
	if e.Unchecked != "" {
		return fmt.Sprintf("%s needs approval: no allow rule matches %s; approve it when asked, or write the line so that what it runs can be read", e.Tool, e.What())
	}
	why := "the default is ask"
	if e.AskFirst {
		why = "this tool asks first whatever the default"
	}
	return fmt.Sprintf("%s needs approval: no allow rule matches %s and %s; approve it when asked, or add %s to permissions.allow in %s",
		e.Tool, e.What(), why, quoteAll(e.Pending), sourceName(e.Source))
}

// Is makes errors.Is(err, protocol.ErrPermissionDenied) true: the call did
// not run.
func (e *ApprovalRequiredError) Is(target error) bool { return target == protocol.ErrPermissionDenied }

func sourceName(s string) string {
	if s == "" {
		return "the config"
	}
	return s
}

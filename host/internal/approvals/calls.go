package approvals

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
)

// Answer is a person's answer about a call that needs approval.
type Answer int

// The four answers. The zero Answer is none of them.
const (
	AllowOnce Answer = iota + 1
	AlwaysAllow
	DenyOnce
	AlwaysDeny
)

var answerNames = [...]string{AllowOnce: "allow_once", AlwaysAllow: "always_allow", DenyOnce: "deny", AlwaysDeny: "always_deny"}

// String returns the answer as an MCP client sends it in the approval
// form ("allow_once", "always_allow", "deny", "always_deny").
func (a Answer) String() string {
	if a >= AllowOnce && a <= AlwaysDeny {
		return answerNames[a]
	}
	return fmt.Sprintf("Answer(%d)", int(a))
}

// ParseAnswer reads an answer as String writes it.
func ParseAnswer(s string) (Answer, bool) {
	for a := AllowOnce; a <= AlwaysDeny; a++ {
		if answerNames[a] == s {
			return a, true
		}
	}
	return 0, false
}

// ErrCannotAsk is what an Asker returns when there is nobody to ask: an MCP
// client without elicitation, a CLI without a terminal. The call is then
// refused with a *registry.ApprovalRequiredError, which names the rule
// that would allow it.
var ErrCannotAsk = errors.New("approvals: nobody can be asked")

// Asker puts a call that needs approval to a person.
type Asker interface {
	// Ask returns the person's answer about a. It returns ErrCannotAsk
	// when nobody can be asked; any other error means the question is
	// still open (the call is refused as not approved, with an error that
	// wraps both the *registry.ApprovalRequiredError and this error, so a
	// front end can find its own error with errors.As). Ask may block
	// while the person thinks and must return when ctx ends.
	Ask(ctx context.Context, a registry.Approval) (Answer, error)
}

// Rememberer keeps "always" answers: *registry.Policy.
type Rememberer interface {
	// Remember adds rules to the saved "always allow" (allow) or "always
	// deny" rules.
	Remember(rules []string, allow bool) error
}

// CallerRememberer keeps "always" answers apart per authenticated caller:
// *registry.Policy. Apply uses it for an Approval that names a caller.
type CallerRememberer interface {
	// RememberFor is Remember for the answers of caller alone.
	RememberFor(caller string, rules []string, allow bool) error
}

// Approver is the one place where a call that needs approval is decided:
// it asks a person through an Asker, keeps "always" answers in a
// Rememberer, and refuses the call when nobody can be asked. It is the
// registry.Approver the front ends put in a call's context
// (registry.WithApprover); the registry calls it at most once per call,
// with the verdict of the policy's one evaluation.
type Approver struct {
	keep Rememberer
	ask  Asker
}

// NewApprover returns the Approver that asks through ask and keeps
// "always" answers in keep.
func NewApprover(keep Rememberer, ask Asker) *Approver {
	return &Approver{keep: keep, ask: ask}
}

// Approve asks about a and carries out the answer.
func (g *Approver) Approve(ctx context.Context, a registry.Approval) error {
	answer, err := g.ask.Ask(ctx, a)
	switch {
	case errors.Is(err, ErrCannotAsk):
		return a.Required()
	case err != nil:
		return &unansweredError{required: a.Required(), err: err}
	}
	return Apply(g.keep, a, answer)
}

// Apply carries out a person's answer about a: nil to run the call, or the
// refusal. "Always" answers store a.Rules() in keep first; each rule
// matches the approved call's pattern literally, never as a glob.
func Apply(keep Rememberer, a registry.Approval, answer Answer) error {
	rules := a.Rules()
	remember := keep.Remember
	if pc, ok := keep.(CallerRememberer); ok && a.Caller != "" {
		remember = func(rules []string, allow bool) error { return pc.RememberFor(a.Caller, rules, allow) }
	}
	switch answer {
	case AllowOnce:
		return nil
	case AlwaysAllow:
		if len(rules) > 0 {
			if err := remember(rules, true); err != nil {
				return fmt.Errorf("%s: allowed once, but the decision could not be saved: %v", a.Tool, err)
			}
		}
		return nil
	case AlwaysDeny:
		if len(rules) > 0 {
			if err := remember(rules, false); err != nil {
				return fmt.Errorf("%s denied (the decision could not be saved: %v)", a.Tool, err)
			}
		}
		return fmt.Errorf("%s denied by the user, now and from now on (%s)", a.Tool, strings.Join(rules, ", "))
	default:
		return fmt.Errorf("%s denied by the user", a.Tool)
	}
}

// unansweredError refuses a call whose question is still open: it is the
// *registry.ApprovalRequiredError (so the registry audits it as "ask") and
// the Asker's own error.
type unansweredError struct {
	required *registry.ApprovalRequiredError
	err      error
}

func (e *unansweredError) Error() string   { return e.required.Error() }
func (e *unansweredError) Unwrap() []error { return []error{e.required, e.err} }

var (
	_ registry.Approver = (*Approver)(nil)
	_ Rememberer        = (*registry.Policy)(nil)
	_ CallerRememberer  = (*registry.Policy)(nil)
)

package registry

import (
	"context"
	"fmt"
	"slices"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/caller"
)

// Caller is an authenticated caller (a static token's name, or a JWT's
// subject) and its own rules, which are layered on the policy's: a call
// runs only if both the config's rules and the caller's let it, so a
// caller can be narrowed but never widened. Its "always" answers are kept
// apart from everyone else's (Policy.RememberFor) and count only for it.
// The zero values of Access and Default narrow nothing.
type Caller struct {
	// Name identifies the caller in audit records, metrics, traces and
	// messages; it is also the owner of its bash jobs and duplicate guard
	// (Owner).
	Name string
	// Access caps the tools the caller may list and call (AccessRead: READ
	// tools only).
	Access Access
	// Allow, Deny and Default are judged like the permissions block's,
	// after it: the stricter verdict wins (deny over ask over allow).
	Allow, Deny []string
	Default     Verdict
	// Source says where the caller's rules live, for messages
	// (`caller "ci" in config.hcl`).
	Source string
}

// Owner is the owner id of everything that belongs to the caller (see
// package caller): "caller:NAME".
func (c *Caller) Owner() string { return "caller:" + c.Name }

type callerKey struct{}

// WithCaller tags ctx with the authenticated caller c: Call judges the call
// against c's rules too, and the caller's owner id becomes the client's.
func WithCaller(ctx context.Context, c *Caller) context.Context {
	if c == nil {
		return ctx
	}
	return caller.With(context.WithValue(ctx, callerKey{}, c), c.Owner())
}

// CallerFrom returns the authenticated caller in ctx, or nil.
func CallerFrom(ctx context.Context) *Caller {
	c, _ := ctx.Value(callerKey{}).(*Caller)
	return c
}

// CallerName is the authenticated caller's name in ctx, or "".
func CallerName(ctx context.Context) string {
	if c := CallerFrom(ctx); c != nil {
		return c.Name
	}
	return ""
}

// Visible reports whether the caller may see and call a tool of access
// level a.
func (c *Caller) Visible(a Access) bool { return c == nil || c.Access.Permits(a) }

func (c *Caller) source() string {
	if c.Source != "" {
		return c.Source
	}
	return fmt.Sprintf("caller %q", c.Name)
}

// layer is the caller's rules as a rules value of their own (with the
// caller's saved answers).
func (r rules) layer() rules {
	c := r.caller
	return rules{
		allow: c.Allow, deny: c.Deny, savedAllow: r.callerAllow, savedDeny: r.callerDeny,
		def: c.Default, source: c.source(),
	}
}

// decideCaller narrows the config's decision d with the caller's rules.
func (r rules) decideCaller(tool string, patterns []string, d Decision) Decision {
	if r.caller == nil || d.Verdict == Deny {
		return d
	}
	dc := r.layer().decide(tool, patterns)
	dc.Caller = r.caller.Name
	switch {
	case dc.Verdict == Deny:
		return dc
	case dc.Verdict == Ask && d.Verdict == Allow:
		return dc
	case dc.Verdict == Ask && d.Verdict == Ask:
		for _, p := range dc.Pending {
			if !slices.ContainsFunc(d.Pending, func(q Pending) bool { return q.String() == p.String() }) {
				d.Pending = append(d.Pending, p)
			}
		}
	}
	return d
}

// callerRefusal is the error for a Deny verdict of the caller's rules.
func (r rules) callerRefusal(tool string, d Decision) error {
	c := r.caller
	switch d.Reason {
	case ByRule:
		return protocol.Errorf(protocol.CodePermissionDenied, "%s denied for caller %q by rule %q of %s", tool, c.Name, d.Rule, c.source())
	case BySaved:
		return protocol.Errorf(protocol.CodePermissionDenied, "%s denied for caller %q by rule %q, saved from its earlier \"always deny\" answer", tool, c.Name, d.Rule)
	}
	return protocol.Errorf(protocol.CodePermissionDenied, "%s is not allowed for caller %q: no allow rule of %s matches and its default is deny; add %s to its allow list to permit it",
		describeAll(d.Pending), c.Name, c.source(), quoteAll(d.Pending))
}

// Package caller carries the identity of whoever made a tool call through a
// context: the authenticated caller when there is one, else the HTTP
// session, else the stdio client ("cli" for the command line). It is the one
// owner type the host uses wherever something belongs to a caller: bash
// jobs, "always" decisions, duplicate guards and the audit log.
//
// Host plumbing, not a plugin author's API: this package belongs to the
// wire protocol and launch core that the SDK and the host share (see
// package [github.com/switchboard-mcp/switchboard/sdk/protocol]). It is
// exported only because the host is another module; its Go API may change
// in any release, and the only compatibility promise is the protocol
// version. Plugins use package sdk and sdktest.
package caller

import "context"

type key struct{}

// With returns ctx tagged with the caller id.
func With(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, key{}, id)
}

// From returns the caller id ctx carries, or "" when it carries none.
func From(ctx context.Context) string {
	id, _ := ctx.Value(key{}).(string)
	return id
}

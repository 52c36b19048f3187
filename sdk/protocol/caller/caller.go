// Package caller carries the identity of whoever made a tool call through a
// context: the authenticated caller when there is one, else the HTTP
// session, else the stdio client ("cli" for the command line). It is the one
// owner type the host uses wherever something belongs to a caller: bash
// jobs, "always" decisions, duplicate guards and the audit log.
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

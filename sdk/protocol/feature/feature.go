// Package feature is the host's model of what MCP offers beyond tools:
// reading resources, rendering prompts, completing arguments, resource
// subscriptions and the events a server sends on its own (a list changed,
// a subscribed resource was updated).
//
// Like package toolcall it has no dependency on gRPC, go-plugin or mcp-go:
// a version 2 plugin (package launcher) and an external MCP server
// (package external) implement [Server]; the supervisor forwards it to its
// current instance; the registry routes to it and watches its events; the
// front end serves it to MCP clients. What a server offers (its resources,
// resource templates and prompts) is part of its description
// (Describe), so that one snapshot says everything a server exposes.
//
// Host plumbing, not a plugin author's API: this package belongs to the
// wire protocol and launch core that the SDK and the host share (see
// package [github.com/switchboard-mcp/switchboard/sdk/protocol]). It is
// exported only because the host is another module; its Go API may change
// in any release, and the only compatibility promise is the protocol
// version. Plugins use package sdk and sdktest.
package feature

import (
	"context"
	"encoding/json"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// Server is implemented by servers that can offer resources, prompts and
// completion. It is optional: a server without it (or whose description
// lists no resources, templates or prompts) offers tools only. A version 1
// plugin implements it and answers every method with an error
// (CodeUnavailable) and has no events; callers decide from the description, not from the
// type.
//
// Methods are safe for concurrent use. Errors are *protocol.Error values
// with a code, as for calls.
type Server interface {
	// ReadResource reads the resource at uri (one listed, or one a
	// template matches); each item is a toolcall.Content of type
	// TypeResource.
	ReadResource(ctx context.Context, uri string) ([]toolcall.Content, error)
	// GetPrompt renders the prompt called name with args.
	GetPrompt(ctx context.Context, name string, args map[string]string) (*PromptResult, error)
	// Complete suggests values for an argument of a prompt or of a
	// resource template.
	Complete(ctx context.Context, req CompleteRequest) (*Completion, error)
	// Subscribe starts (on) or stops updates of the resource at uri.
	Subscribe(ctx context.Context, uri string, on bool) error
	// Watch hands the server's events to fn, on one goroutine, in order,
	// until ctx ends or the server goes; it returns why it stopped. A
	// ListChanged event is sent after the server's description (Describe)
	// already shows the change.
	Watch(ctx context.Context, fn func(Event)) error
}

// EventKind says what happened.
type EventKind int

// The events a server sends.
const (
	// ListChanged: the server's resources, resource templates, prompts
	// or tools changed; its description shows the new lists.
	ListChanged EventKind = iota + 1
	// ResourceUpdated: the subscribed resource URI changed.
	ResourceUpdated
	// Log: a log message of the server not tied to a call (Level, Logger,
	// Data as in MCP's notifications/message).
	Log
)

// Event is one event of a server.
type Event struct {
	Kind EventKind
	URI  string // ResourceUpdated
	// Log: the MCP level ("debug" … "emergency"), the logger's name and
	// the data (any JSON value).
	Level  string
	Logger string
	Data   json.RawMessage
}

// PromptResult is a rendered prompt.
type PromptResult struct {
	Description string
	Messages    []PromptMessage
}

// PromptMessage is one message of a rendered prompt.
type PromptMessage struct {
	Role    string // "user" or "assistant"
	Content toolcall.Content
}

// Reference kinds of a CompleteRequest.
const (
	RefPrompt   = "prompt"   // Ref is a prompt's name
	RefResource = "resource" // Ref is a resource template's URI template
)

// CompleteRequest asks for completions of one argument.
type CompleteRequest struct {
	RefType string // RefPrompt or RefResource
	Ref     string
	// Argument is the argument's name, Value what was typed so far.
	Argument, Value string
	// Context holds the arguments already resolved.
	Context map[string]string
}

// Completion is the answer to a CompleteRequest.
type Completion struct {
	Values  []string // at most 100
	Total   int      // 0 when unknown
	HasMore bool
}

// Package toolcall is the host's own model of a tool server and its calls:
// the one interface every kind of tool server offers ([Server]), what a
// server says about itself ([Description], [Tool]), what a call returns
// ([Result], [Content]) and the progress it reports ([Progress]).
//
// It is a package of its own, with no dependency on gRPC, go-plugin or
// mcp-go, so that everything that handles calls (the launcher, the
// supervisor, the registry, external servers, the front ends and sdktest)
// shares one domain model while the wire formats stay at the edges: the
// plugin protocol's generated types are converted in package protocol (the
// wire adapter), MCP's in package external (MCP in) and package frontend
// (MCP out). It is not in package protocol because that package is the
// go-plugin and gRPC plumbing; the registry and the front ends need the
// model without it.
//
// A call's lifecycle as seen from here: a caller hands a Server the tool's
// name, its arguments as raw JSON and, if it wants progress, a
// [ProgressFunc]; the server reports progress on the calling goroutine and
// returns a Result (the tool ran; IsError says whether it failed) or an
// error (the tool did not run, or was cut short; a *protocol.Error whose
// code says why).
//
// Host plumbing, not a plugin author's API: this package belongs to the
// wire protocol and launch core that the SDK and the host share (see
// package [github.com/switchboard-mcp/switchboard/sdk/protocol]). It is
// exported only because the host is another module; its Go API may change
// in any release, and the only compatibility promise is the protocol
// version. Plugins use package sdk and sdktest.
package toolcall

import (
	"context"
	"encoding/json"
	"strings"
)

// Server is what every kind of tool server (a plugin, a built-in plugin, an
// external MCP server, a supervised server) offers the host. Consumers add
// what they need on top (a name, a description, a health check).
//
// Implementations are safe for concurrent Calls; Close may be called more
// than once, and calls after Close fail with an error.
type Server interface {
	// Call runs one tool call. onProgress, if not nil, asks for progress
	// and receives it, in order, on the goroutine that called Call; the
	// caller's identity travels in ctx (package caller). When ctx ends the
	// server is told to cancel the call.
	Call(ctx context.Context, tool string, args []byte, onProgress ProgressFunc) (*Result, error)
	// PermissionPatterns returns the patterns a call is judged by, one
	// per thing the call would do.
	PermissionPatterns(ctx context.Context, tool string, args []byte) ([]string, error)
	// Close stops the server.
	Close(ctx context.Context) error
}

// Progress is one progress report of a running call.
type Progress struct {
	// Progress grows with each report; Total is 0 when unknown.
	Progress, Total float64
	Message         string
}

// ProgressFunc receives a call's progress reports.
type ProgressFunc func(Progress)

// Result is what a tool that ran returns.
type Result struct {
	Content []Content
	// StructuredContent is the structured result as JSON, passed through
	// unchanged (nil when there is none).
	StructuredContent json.RawMessage
	// IsError says the tool ran and failed; the content says how.
	IsError bool
	// Meta is the result's _meta object as JSON, passed through unchanged
	// (nil when there is none).
	Meta json.RawMessage
}

// The content types MCP defines.
const (
	TypeText         = "text"
	TypeImage        = "image"
	TypeAudio        = "audio"
	TypeResourceLink = "resource_link"
	TypeResource     = "resource"
)

// Content is one content item of a result. Type says which fields are
// used: text (Text), image and audio (Data, MIMEType), resource_link (URI,
// Name, Description, MIMEType), resource (URI, MIMEType, and Text or Blob).
type Content struct {
	Type        string
	Text        string
	Data        []byte // image, audio: the decoded bytes
	MIMEType    string
	URI         string
	Name        string
	Description string
	Blob        []byte // resource: the decoded blob (nil for a text resource)
	// Raw is the item exactly as an MCP server sent it, when it came from
	// one. A front end that speaks MCP sends Raw unchanged, so what the
	// fields above do not model (annotations, an item's _meta, content
	// types this host does not know) passes through; the fields are filled
	// for the types above, for the host's own use (the CLI's text).
	Raw json.RawMessage
}

// TextContent returns a text item.
func TextContent(text string) Content { return Content{Type: TypeText, Text: text} }

// Text returns the result's text items joined by newlines.
func (r *Result) Text() string {
	if r == nil {
		return ""
	}
	var parts []string
	for _, c := range r.Content {
		if c.Type == TypeText {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Log is one log message of a running call.
type Log struct {
	// Level is MCP's: "debug", "info", "notice", "warning", "error" …
	Level   string
	Message string
	// Logger names the part of the server that logged ("" for the
	// server itself).
	Logger string
	// Fields are key/value pairs as a JSON object (nil when none).
	Fields json.RawMessage
}

// LogFunc receives a call's log messages, in order, on the goroutine that
// called Call.
type LogFunc func(Log)

type logKey struct{}

// WithLog returns ctx carrying fn: a server that has log messages of the
// calls made with ctx hands them to fn (besides logging them itself).
func WithLog(ctx context.Context, fn LogFunc) context.Context {
	return context.WithValue(ctx, logKey{}, fn)
}

type deniedKey struct{}

// WithDenied returns ctx carrying the pattern parts of the deny rules for
// the tool about to be called (the host's rules and its caller's): a
// plugin's tool that reads what its arguments do not name leaves out what
// they match (Call.denied_patterns).
func WithDenied(ctx context.Context, patterns []string) context.Context {
	if len(patterns) == 0 {
		return ctx
	}
	return context.WithValue(ctx, deniedKey{}, patterns)
}

// DeniedFrom returns the patterns WithDenied put in ctx.
func DeniedFrom(ctx context.Context) []string {
	p, _ := ctx.Value(deniedKey{}).([]string)
	return p
}

// LogFrom returns the LogFunc in ctx, or nil.
func LogFrom(ctx context.Context) LogFunc {
	fn, _ := ctx.Value(logKey{}).(LogFunc)
	return fn
}

// Package tracing carries a call's OpenTelemetry trace context from the
// client, through the host, into the plugin, in the W3C Trace Context
// format. It is shared by the host (which makes a span per call when
// tracing is configured) and the plugin side (which makes the handler's
// span a child of the host's).
//
// Host plumbing, not a plugin author's API: this package belongs to the
// wire protocol and launch core that the SDK and the host share (see
// package [github.com/switchboard-mcp/switchboard/sdk/protocol]). It is
// exported only because the host is another module; its Go API may change
// in any release, and the only compatibility promise is the protocol
// version. Plugins use package sdk and sdktest.
package tracing

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName names the tracers of this module.
const ScopeName = "github.com/switchboard-mcp/switchboard"

var (
	enabled atomic.Bool
	w3c     = propagation.TraceContext{}
)

// Enable marks the host's tracing as configured: calls get spans and carry
// their context to plugins. Off (the default), nothing is done per call.
func Enable(on bool) { enabled.Store(on) }

// Enabled reports whether the host traces calls.
func Enabled() bool { return enabled.Load() }

// Tracer is this module's tracer from the global provider.
func Tracer() trace.Tracer { return otel.Tracer(ScopeName) }

// Extract returns ctx with the remote span context that traceparent (and
// tracestate) describe, or ctx unchanged when traceparent is empty or
// malformed.
func Extract(ctx context.Context, traceparent, tracestate string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return w3c.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent, "tracestate": tracestate})
}

// Inject returns the traceparent and tracestate of ctx's span ("" when ctx
// has none).
func Inject(ctx context.Context) (traceparent, tracestate string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return "", ""
	}
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	return c["traceparent"], c["tracestate"]
}

// FromMeta returns ctx with the trace context of an MCP request's _meta
// (the traceparent and tracestate keys), when tracing is on.
func FromMeta(ctx context.Context, meta map[string]any) context.Context {
	if !Enabled() || meta == nil {
		return ctx
	}
	tp, _ := meta["traceparent"].(string)
	ts, _ := meta["tracestate"].(string)
	return Extract(ctx, tp, ts)
}

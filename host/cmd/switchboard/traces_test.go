package main

import (
	"context"
	"encoding/hex"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// receiver is a real OTLP trace receiver (gRPC TraceService).
type receiver struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (r *receiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func (r *receiver) find(name string) *tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.spans {
		if s.GetName() == name {
			return s
		}
	}
	return nil
}

func attr(s *tracepb.Span, key string) string {
	for _, a := range s.GetAttributes() {
		if a.GetKey() == key {
			return a.GetValue().GetStringValue()
		}
	}
	return ""
}

// TestTracesReachAnOTLPReceiver: with the standard OTEL_* variables set,
// a call made through MCP with a W3C traceparent in _meta is exported to a
// real OTLP receiver as a span of that trace, child of the client's span,
// with the tool, server, decision and outcome; and the plugin's handler
// runs in the same trace, under the host's span.
func TestTracesReachAnOTLPReceiver(t *testing.T) {
	rcv := &receiver{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(gs, rcv)
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)

	e := setupWith(t, `permissions { default = "allow" }`)
	c, _ := mcpClient(t, e, func(cmd *exec.Cmd) {
		cmd.Env = append(cmd.Env,
			"OTEL_EXPORTER_OTLP_ENDPOINT=http://"+ln.Addr().String(),
			"OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_EXPORTER_OTLP_INSECURE=true",
			"OTEL_BSP_SCHEDULE_DELAY=100")
	})
	initialize(t, c)

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req := mcp.CallToolRequest{}
	req.Params.Name = "fx__trace"
	req.Params.Arguments = map[string]any{}
	req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{"traceparent": "00-" + traceID + "-" + parentID + "-01"}}
	res, err := c.CallTool(t.Context(), req)
	if err != nil || res.IsError {
		t.Fatalf("fx__trace: %v %v", err, res)
	}
	seen := strings.Fields(resultText(res)) // the handler's trace and span ids
	if len(seen) != 2 || seen[0] != traceID {
		t.Fatalf("the plugin's handler ran in trace %q, want %s", resultText(res), traceID)
	}

	var span *tracepb.Span
	if !eventually(20*time.Second, func() bool { span = rcv.find("tools/call fx.trace"); return span != nil }) {
		t.Fatalf("no span for the call reached the receiver; got %d spans", len(rcv.spans))
	}
	if got := hex.EncodeToString(span.GetTraceId()); got != traceID {
		t.Errorf("span trace id = %s, want the client's %s", got, traceID)
	}
	if got := hex.EncodeToString(span.GetParentSpanId()); got != parentID {
		t.Errorf("span parent = %s, want the client's span %s", got, parentID)
	}
	if got := hex.EncodeToString(span.GetSpanId()); got != seen[1] {
		t.Errorf("the handler's span context is %s, want the host's call span %s (its parent)", seen[1], got)
	}
	for k, want := range map[string]string{"switchboard.server": "fx", "switchboard.outcome": "ok", "switchboard.decision": "allow", "gen_ai.tool.name": "fx.trace"} {
		if got := attr(span, k); got != want {
			t.Errorf("span attribute %s = %q, want %q", k, got, want)
		}
	}
	var policy bool
	for _, ev := range span.GetEvents() {
		policy = policy || ev.GetName() == "policy"
	}
	if !policy {
		t.Error("the span has no policy event")
	}

	// A refused call is a span with an error status.
	req.Params.Name, req.Params.Meta = "fx__echo", nil
	req.Params.Arguments = map[string]any{"text": 5}
	_, _ = c.CallTool(t.Context(), req)
	if !eventually(20*time.Second, func() bool {
		s := rcv.find("tools/call fx.echo")
		return s != nil && s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR && attr(s, "switchboard.decision") == "invalid"
	}) {
		t.Errorf("no error span for a call refused by the schema (%d spans)", len(rcv.spans))
	}
}

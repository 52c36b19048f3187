// Package sdk is what a Switchboard plugin imports. A plugin is a small Go
// program: it builds a [Server], adds typed tools to it with [AddTool], and
// hands it to [Serve] from main. The host starts the program as a
// subprocess, negotiates the protocol version, calls Configure and Describe,
// and then sends tool calls.
//
//	func main() {
//		s := sdk.NewServer("hello", "1.0.0")
//		sdk.AddTool(s, sdk.Tool{Name: "greet", Description: "Greets someone.", ReadOnly: true},
//			func(ctx context.Context, req *sdk.Request, in struct{ Name string `json:"name"` }) (*sdk.Result, error) {
//				return sdk.Text("Hello, " + in.Name + "!"), nil
//			})
//		sdk.Serve(s)
//	}
//
// The input JSON Schema of a typed tool is derived from its input struct
// (field tags: json, and jsonschema for descriptions, enums and bounds).
// A handler sees cancellation as ctx.Done(), reports progress with
// [Request.Progress], and returns a [Result]: [Text], [JSON], [ErrorResult].
// A plain error returned by a handler becomes an error result the model can
// read; the call itself still succeeded at the protocol level.
// A handler that returns a struct instead of *Result gets an output schema
// and structured results (see [AddTool]). [Logger] and [Request.Logger]
// are standard log/slog loggers whose lines the host re-logs.
//
// Test a plugin with package sdktest. The protocol underneath (go-plugin,
// gRPC, sdk/proto, the packages under sdk/protocol) is the host's plumbing,
// not part of this API; plugins in other languages implement
// sdk/proto/switchboard/plugin/v1/plugin.proto.
//
// The SDK is a Go module of its own, github.com/switchboard-mcp/switchboard/sdk,
// with only the dependencies a plugin needs (go-plugin, gRPC, protobuf, a
// logger, JSON Schema, the OpenTelemetry API) and an old enough go directive:
//
//	go get github.com/switchboard-mcp/switchboard/sdk@latest
package sdk

// Version is the SDK's version, reported to the host in Describe.
const Version = "0.1.0"

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
// [Request.Progress], and returns a [Result]: [Text], [JSON], [Errorf].
// A plain error returned by a handler becomes an error result the model can
// read; the call itself still succeeded at the protocol level.
//
// The layer underneath, for plugins that want full control, is package
// protocol: implement protocol.Handler and call [ServeHandler].
package sdk

// Version is the SDK's version, reported to the host in Describe.
const Version = "0.1.0"

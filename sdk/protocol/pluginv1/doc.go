// Package pluginv1 is the Go code generated from
// sdk/proto/switchboard/plugin/v1/plugin.proto by protoc-gen-go and
// protoc-gen-go-grpc (`make proto`; never edit it by hand).
//
// Host plumbing, not a plugin author's API: it belongs to the wire protocol
// that the SDK and the host share (see package
// [github.com/switchboard-mcp/switchboard/sdk/protocol]). Its Go API may
// change in any release; the only compatibility promise is the protocol
// version, and the .proto file is the contract for other languages.
package pluginv1

package sdk

import (
	"fmt"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
)

// Errors a call can end with at the protocol level, rather than with a
// result. Compare with errors.Is: the codes survive the trip between plugin
// and host, so a test through sdktest sees the same errors the host does.
var (
	// ErrInvalidArguments: the arguments do not fit the tool's input (the
	// SDK returns it when they do not decode into the input struct).
	ErrInvalidArguments error = protocol.ErrInvalidArguments
	// ErrUnknownTool: the plugin has no tool by that name.
	ErrUnknownTool error = protocol.ErrUnknownTool
	// ErrCancelled: the caller cancelled the call.
	ErrCancelled error = protocol.ErrCancelled
	// ErrDeadline: the call ran out of time.
	ErrDeadline error = protocol.ErrDeadline
	// ErrInternal: the plugin failed (a handler panicked).
	ErrInternal error = protocol.ErrInternal
	// ErrPermissionDenied: the call may not do what it asked.
	ErrPermissionDenied error = protocol.ErrPermissionDenied
)

// InvalidArguments returns an ErrInvalidArguments error with a message for
// the model: return it from a handler when arguments that decoded are still
// unusable and the client should be told the call itself was malformed. A
// failure the model can act on is better returned as [ErrorResult].
func InvalidArguments(format string, args ...any) error {
	return protocol.Errorf(protocol.CodeInvalidArguments, format, args...)
}

// OpaquePattern returns a permission pattern that stands for something a
// tool's PermissionPattern function could not read (a command line that
// does not parse, a name computed at run time). The host never lets an
// allow rule match it: only the default or a deny rule decides the call.
// reason is shown to the person asked to approve.
func OpaquePattern(reason string) string { return protocol.Opaque(reason) }

// OpaquePatternf is OpaquePattern with a formatted reason.
func OpaquePatternf(format string, args ...any) string {
	return protocol.Opaque(fmt.Sprintf(format, args...))
}

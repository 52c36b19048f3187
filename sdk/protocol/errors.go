package protocol

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
)

// Code says why a call did not produce a result. Codes cross the wire, so
// errors.Is on an *Error compares codes, not messages.
type Code = pluginv1.ErrorCode

// The error codes.
const (
	CodeUnknownTool      = pluginv1.ErrorCode_ERROR_CODE_UNKNOWN_TOOL
	CodeInvalidArguments = pluginv1.ErrorCode_ERROR_CODE_INVALID_ARGUMENTS
	CodeCancelled        = pluginv1.ErrorCode_ERROR_CODE_CANCELLED
	CodeDeadline         = pluginv1.ErrorCode_ERROR_CODE_DEADLINE_EXCEEDED
	CodeInternal         = pluginv1.ErrorCode_ERROR_CODE_INTERNAL
	CodeUnavailable      = pluginv1.ErrorCode_ERROR_CODE_UNAVAILABLE
	CodePermissionDenied = pluginv1.ErrorCode_ERROR_CODE_PERMISSION_DENIED
	// CodeShuttingDown means the host or the server is shutting down and
	// takes no more calls. It is not CodeUnavailable: retrying an
	// unavailable server may help, retrying one that is shutting down
	// will not.
	CodeShuttingDown = pluginv1.ErrorCode_ERROR_CODE_SHUTTING_DOWN
)

// Error is an error with a code that survives the trip between plugin and
// host.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return codeText(e.Code)
	}
	return e.Message
}

// Is reports whether target is an *Error with the same code, so that
// errors.Is(err, protocol.ErrCancelled) works on both sides of the wire.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels to compare against with errors.Is.
var (
	ErrUnknownTool      = &Error{Code: CodeUnknownTool}
	ErrInvalidArguments = &Error{Code: CodeInvalidArguments}
	ErrCancelled        = &Error{Code: CodeCancelled}
	ErrDeadline         = &Error{Code: CodeDeadline}
	ErrInternal         = &Error{Code: CodeInternal}
	ErrUnavailable      = &Error{Code: CodeUnavailable}
	ErrPermissionDenied = &Error{Code: CodePermissionDenied}
	// ErrShuttingDown matches every error with CodeShuttingDown: the host
	// or the server is going away. errors.Is(err, ErrUnavailable) is false
	// for it.
	ErrShuttingDown = &Error{Code: CodeShuttingDown}
)

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func codeText(c Code) string {
	switch c {
	case CodeUnknownTool:
		return "unknown tool"
	case CodeInvalidArguments:
		return "invalid arguments"
	case CodeCancelled:
		return "call cancelled"
	case CodeDeadline:
		return "call timed out"
	case CodeUnavailable:
		return "plugin unavailable"
	case CodePermissionDenied:
		return "permission denied"
	case CodeShuttingDown:
		return "shutting down"
	default:
		return "internal plugin error"
	}
}

// toWire turns any error into the wire form, keeping an *Error's code and
// mapping context errors to their codes.
func toWire(err error) *pluginv1.Error {
	return toWireOr(err, CodeInternal)
}

// toWireOr is toWire with the code given to an error that has none.
func toWireOr(err error, plain Code) *pluginv1.Error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return &pluginv1.Error{Code: e.Code, Message: e.Error()}
	case errors.Is(err, context.Canceled):
		return &pluginv1.Error{Code: CodeCancelled, Message: "call cancelled"}
	case errors.Is(err, context.DeadlineExceeded):
		return &pluginv1.Error{Code: CodeDeadline, Message: "call timed out"}
	default:
		return &pluginv1.Error{Code: plain, Message: err.Error()}
	}
}

// statusError is how the plugin side answers a failed unary call
// (Configure, Describe, PermissionPattern): a gRPC status whose code fits
// and which carries the *Error's code and message as a detail, so the host
// gets the same *Error back (see rpcError). An error without a code gets
// plain. A nil err is nil (the version 2 RPCs pass their handler's error
// through it on success too).
func statusError(err error, plain Code) error {
	if err == nil {
		return nil
	}
	w := toWireOr(err, plain)
	w.Message = err.Error() // with whatever context wraps the *Error
	st := status.New(grpcCode(w.GetCode()), w.GetMessage())
	if withCode, derr := st.WithDetails(w); derr == nil {
		st = withCode
	}
	return st.Err()
}

// rpcError turns the error of a unary call or a broken stream into an
// *Error: the code the plugin sent as a status detail, or, from a plugin
// that sends none (an older SDK, another language), the code that matches
// the gRPC status.
func rpcError(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return &Error{Code: CodeUnavailable, Message: err.Error()}
	}
	for _, d := range st.Details() {
		if w, ok := d.(*pluginv1.Error); ok {
			return fromWire(w)
		}
	}
	return &Error{Code: codeOfGRPC(st.Code()), Message: st.Message()}
}

func grpcCode(c Code) codes.Code {
	switch c {
	case CodeUnknownTool:
		return codes.NotFound
	case CodeInvalidArguments:
		return codes.InvalidArgument
	case CodeCancelled:
		return codes.Canceled
	case CodeDeadline:
		return codes.DeadlineExceeded
	case CodeUnavailable, CodeShuttingDown:
		return codes.Unavailable
	case CodePermissionDenied:
		return codes.PermissionDenied
	default:
		return codes.Internal
	}
}

func codeOfGRPC(c codes.Code) Code {
	switch c {
	case codes.NotFound:
		return CodeUnknownTool
	case codes.InvalidArgument, codes.FailedPrecondition:
		return CodeInvalidArguments
	case codes.Canceled:
		return CodeCancelled
	case codes.DeadlineExceeded:
		return CodeDeadline
	case codes.Unavailable:
		return CodeUnavailable
	case codes.PermissionDenied:
		return CodePermissionDenied
	default:
		return CodeInternal
	}
}

func fromWire(w *pluginv1.Error) *Error {
	code := w.GetCode()
	if code == pluginv1.ErrorCode_ERROR_CODE_UNSPECIFIED {
		code = CodeInternal
	}
	return &Error{Code: code, Message: w.GetMessage()}
}

package protocol

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchboard-mcp/switchboard/internal/pluginv1"
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
	default:
		return "internal plugin error"
	}
}

// toWire turns any error into the wire form, keeping an *Error's code and
// mapping context errors to their codes.
func toWire(err error) *pluginv1.Error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return &pluginv1.Error{Code: e.Code, Message: e.Error()}
	case errors.Is(err, context.Canceled):
		return &pluginv1.Error{Code: CodeCancelled, Message: "call cancelled"}
	case errors.Is(err, context.DeadlineExceeded):
		return &pluginv1.Error{Code: CodeDeadline, Message: "call timed out"}
	default:
		return &pluginv1.Error{Code: CodeInternal, Message: err.Error()}
	}
}

func fromWire(w *pluginv1.Error) *Error {
	code := w.GetCode()
	if code == pluginv1.ErrorCode_ERROR_CODE_UNSPECIFIED {
		code = CodeInternal
	}
	return &Error{Code: code, Message: w.GetMessage()}
}

package protocol

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// statusError and rpcError carry an error's code across a unary RPC; from
// a plugin that sends no code (an older SDK, another language) the gRPC
// status code decides.
func TestStatusCarriesCodes(t *testing.T) {
	for _, tt := range []struct {
		name  string
		err   error
		plain Code
		want  Code
	}{
		{"coded", Errorf(CodePermissionDenied, "no"), CodeInvalidArguments, CodePermissionDenied},
		{"wrapped", fmt.Errorf("context: %w", Errorf(CodeShuttingDown, "bye")), CodeInternal, CodeShuttingDown},
		{"plain", errors.New("bad settings"), CodeInvalidArguments, CodeInvalidArguments},
		{"plain internal", errors.New("bug"), CodeInternal, CodeInternal},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := rpcError(statusError(tt.err, tt.plain))
			var e *Error
			if !errors.As(got, &e) || e.Code != tt.want || e.Message != tt.err.Error() {
				t.Errorf("rpcError(statusError(%v)) = %#v, want code %s and the same message", tt.err, got, tt.want)
			}
		})
	}
	if err := statusError(nil, CodeInternal); err != nil {
		t.Errorf("statusError(nil) = %v, want nil (the v2 RPCs return a handler's error through it)", err)
	}
	for _, tt := range []struct {
		grpc codes.Code
		want Code
	}{
		{codes.InvalidArgument, CodeInvalidArguments},
		{codes.Internal, CodeInternal},
		{codes.Unavailable, CodeUnavailable},
		{codes.Canceled, CodeCancelled},
		{codes.PermissionDenied, CodePermissionDenied},
	} {
		got := rpcError(status.Error(tt.grpc, "old plugin"))
		if !errors.Is(got, &Error{Code: tt.want}) || got.Error() != "old plugin" {
			t.Errorf("rpcError(status %s without a code) = %v, want %s", tt.grpc, got, tt.want)
		}
	}
	if rpcError(nil) != nil {
		t.Error("rpcError(nil) != nil")
	}
}

func TestShuttingDownIsItsOwnCode(t *testing.T) {
	err := fmt.Errorf("calling fx.echo: %w", Errorf(CodeShuttingDown, "registry: the host is shutting down"))
	if !errors.Is(err, ErrShuttingDown) || errors.Is(err, ErrUnavailable) || errors.Is(ErrUnavailable, ErrShuttingDown) {
		t.Errorf("errors.Is confuses shutting down with unavailable: %v", err)
	}
	if got := ErrShuttingDown.Error(); got != "shutting down" {
		t.Errorf("ErrShuttingDown.Error() = %q", got)
	}
}

// The version 2 RPCs pass their handler's error through statusError on
// success too: nil must stay nil (it panicked, killing the plugin on every
// successful ReadResource, GetPrompt and Complete).
func TestStatusErrorNil(t *testing.T) {
	if err := statusError(nil, CodeInternal); err != nil {
		t.Errorf("statusError(nil) = %v, want nil", err)
	}
}

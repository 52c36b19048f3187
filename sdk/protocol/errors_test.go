package protocol_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
)

// Codes survive the trip between plugin and host: errors.Is compares them.
func ExampleError() {
	err := fmt.Errorf("calling git.git_log: %w", protocol.Errorf(protocol.CodeCancelled, "call cancelled by the client"))
	fmt.Println(errors.Is(err, protocol.ErrCancelled), errors.Is(err, protocol.ErrUnavailable))
	fmt.Println(errors.Is(context.Canceled, protocol.ErrCancelled))
	// Output:
	// true false
	// false
}

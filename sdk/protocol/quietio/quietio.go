// Package quietio reads and writes the host's and plugins' pipes, sockets
// and audit file without waking the Go runtime's monitor thread.
//
// A Go process that has been idle has its monitor thread (sysmon) asleep,
// and the runtime wakes it on the process's next system call made the
// ordinary way (syscall.Syscall: the call might block, and sysmon is what
// hands the processor to another thread when one does). The wake is a
// futex call, and the woken thread then polls every 20 µs while the call
// goes on. A tool call through the host made three such wakes (the host
// reading the client's request, the host writing its audit record, the
// plugin reading the call), against one for a tool server called
// directly; on a machine whose idle processors sleep deeply (a VM without
// halt polling) they were most of what separated the two (README,
// PERFORMANCE).
//
// The reads and writes here cannot block: they go to descriptors in
// non-blocking mode, wait for readiness in Go's network poller as
// net.Conn's do, and make the system call itself with
// syscall.RawSyscall, which skips that bookkeeping. The audit file, a
// regular file, is written the same way only on a local file system, and
// the ordinary way for good after any write slower than slowWrite.
//
// Everything here is Linux-only; elsewhere each function returns what it
// was given. ablate.QuietIO turns it all off, for the benchmark.
//
// Host plumbing, not a plugin author's API: this package belongs to the
// wire protocol and launch core that the SDK and the host share (see
// package [github.com/switchboard-mcp/switchboard/sdk/protocol]). It is
// exported only because the host is another module; its Go API may change
// in any release, and the only compatibility promise is the protocol
// version. Plugins use package sdk and sdktest.
package quietio

import (
	"context"
	"net"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/ablate"
)

// slowWrite is the longest a write to a regular file may take before
// FileWriter stops making its writes without the runtime's bookkeeping:
// while such a write blocks, the processor it runs on serves nothing else.
var slowWrite = 2 * time.Millisecond

// on reports whether quiet reads and writes are switched on.
func on() bool { return !ablate.Off(ablate.QuietIO) }

// Creds wraps transport credentials so that the connections they secure
// are read and written as Conn does.
func Creds(c credentials.TransportCredentials) credentials.TransportCredentials {
	if !on() || !supported {
		return c
	}
	return creds{c}
}

type creds struct {
	credentials.TransportCredentials
}

func (c creds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.TransportCredentials.ClientHandshake(ctx, authority, Conn(raw))
}

func (c creds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.TransportCredentials.ServerHandshake(Conn(raw))
}

func (c creds) Clone() credentials.TransportCredentials {
	return creds{c.TransportCredentials.Clone()}
}

// SetSlowWriteForTest sets how long a quiet write to a file may take
// before FileWriter gives up on it (negative: every write is slow), until
// the returned function restores it. For tests only.
func SetSlowWriteForTest(d time.Duration) (restore func()) {
	old := slowWrite
	slowWrite = d
	return func() { slowWrite = old }
}

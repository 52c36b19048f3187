// Package ablate holds the switches that turn off, one at a time, the
// optimisations of the stdio call route, so that `make bench` can show
// what each is worth end to end (its ablation table, see README,
// PERFORMANCE). They are a measuring instrument, not a setting: nothing
// but the benchmark sets them.
//
// The switches are read once, from the comma-separated list in
// $SWITCHBOARD_ABLATE, by the host and by plugins (a plugin gets it
// through its config block's env). Every switch is listed here:
//
//   - "shortpath": serve hands every stdio message to mcp-go, plain
//     tools/call requests included, instead of answering those itself.
//   - "poller": serve reads a pipe or socket on stdin with blocking reads
//     instead of through Go's network poller.
//   - "workpool": calls run on a new goroutine each instead of on reused
//     ones (sdk/protocol/workpool: the plugin's call loop, the short path).
//   - "audit-linger": the audit writer writes what is queued at once
//     instead of collecting records for 20 ms per batch.
//   - "flow-window": the gRPC connection between host and plugin sizes
//     its flow-control windows as gRPC does by default (growing them by
//     bandwidth-delay pings, which cost a ping and its answer per call)
//     instead of fixed windows (package protocol, GRPCDialOptions).
//   - "quiet-io": the host's stdin, stdout, audit file and plugin
//     connections, and a plugin's connection, are read and written with
//     ordinary system calls, which wake the Go runtime's monitor thread
//     after an idle spell (package quietio).
//
// One optimisation needs no switch: `serve` runs with one scheduler slot
// unless $GOMAXPROCS is set, so the benchmark sets GOMAXPROCS to the
// number of CPUs (Go's default) to turn it off.
//
// Host plumbing, not a plugin author's API: this package belongs to the
// wire protocol and launch core that the SDK and the host share (see
// package [github.com/switchboard-mcp/switchboard/sdk/protocol]). It is
// exported only because the host is another module; its Go API may change
// in any release, and the only compatibility promise is the protocol
// version. Plugins use package sdk and sdktest.
package ablate

import (
	"os"
	"slices"
	"strings"
	"sync"
)

// Env is the environment variable holding the switches.
const Env = "SWITCHBOARD_ABLATE"

// The switches.
const (
	ShortPath   = "shortpath"
	Poller      = "poller"
	WorkPool    = "workpool"
	AuditLinger = "audit-linger"
	FlowWindow  = "flow-window"
	QuietIO     = "quiet-io"
)

var off = sync.OnceValue(func() []string { return parse(os.Getenv(Env)) })

// Off reports whether the optimisation named name is switched off.
func Off(name string) bool { return slices.Contains(off(), name) }

// parse splits a list of switches: comma-separated, spaces ignored.
func parse(list string) []string {
	var out []string
	for _, name := range strings.Split(list, ",") {
		if name = strings.TrimSpace(name); name != "" {
			out = append(out, name)
		}
	}
	return out
}

package sdk

import "github.com/switchboard-mcp/switchboard/sdk/protocol/pluginserve"

// Serve serves s as a plugin and returns when the host stops it. Call it
// from main and return afterwards. Serve:
//   - moves anything written to file descriptor 1 to stderr, so that only
//     the go-plugin handshake reaches the host on stdout (never print to
//     stdout: log with [Logger]);
//   - runs with one scheduler slot unless GOMAXPROCS is set in the plugin's
//     environment; a plugin whose tools do parallel CPU work should have its
//     config block set it (env = { GOMAXPROCS = "4" });
//   - writes a CPU profile to the file named by SWITCHBOARD_PLUGIN_CPUPROFILE
//     when the plugin's environment sets it (read it with go tool pprof);
//   - exits when the host dies or sends SIGTERM, cancelling running calls,
//     running the OnShutdown functions and stopping its own process group.
func Serve(s *Server) {
	pluginserve.Serve(handler{s})
}

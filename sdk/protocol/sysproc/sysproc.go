// Package sysproc holds the few process settings that differ between
// operating systems: a child in its own process group that also dies with
// its parent where the system can arrange it (Linux).
//
// Host plumbing, not a plugin author's API: this package belongs to the
// wire protocol and launch core that the SDK and the host share (see
// package [github.com/switchboard-mcp/switchboard/sdk/protocol]). It is
// exported only because the host is another module; its Go API may change
// in any release, and the only compatibility promise is the protocol
// version. Plugins use package sdk and sdktest.
package sysproc

// EnvOwnPIDNamespace is set ("1") in the environment of a plugin the
// kernel sandbox started as the first child of its own PID namespace,
// whose init (PID 1) is the sandbox's helper: every process there that
// was reparented to PID 1 is one the plugin's own tree left behind.
const EnvOwnPIDNamespace = "SWITCHBOARD_OWN_PIDNS"

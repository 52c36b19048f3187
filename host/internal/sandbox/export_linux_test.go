//go:build linux

package sandbox

import "github.com/switchboard-mcp/switchboard/host/internal/sandboxinit"

// LastWinsForTest is the spawner's environment rule (sandboxinit.LastWins).
var LastWinsForTest = sandboxinit.LastWins

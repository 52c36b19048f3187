// Command switchboard is the Switchboard host: it runs MCP tool servers as
// subprocess plugins and serves their tools to MCP clients. See
// `switchboard --help`.
package main

import (
	"os"

	"github.com/switchboard-mcp/switchboard/host/internal/cli"
	"github.com/switchboard-mcp/switchboard/host/internal/sandboxinit"
)

func main() {
	// Descriptors whoever started the host left open (without
	// close-on-exec) stay with the host: none passes on to a server, its
	// sandbox's helper or anything they start.
	sandboxinit.CloseOnExecFrom(3)
	os.Exit(cli.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

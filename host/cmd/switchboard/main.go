// Command switchboard is the Switchboard host: it runs MCP tool servers as
// subprocess plugins and serves their tools to MCP clients. See
// `switchboard --help`.
package main

import (
	"os"

	"github.com/switchboard-mcp/switchboard/host/internal/cli"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// Command switchboard-plugin-filesystem is the filesystem built-in as a
// standalone plugin binary.
package main

import (
	"github.com/switchboard-mcp/switchboard/plugins/filesystem"
	"github.com/switchboard-mcp/switchboard/sdk"
)

func main() { sdk.Serve(filesystem.New()) }

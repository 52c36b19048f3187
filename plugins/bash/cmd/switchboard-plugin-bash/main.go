// Command switchboard-plugin-bash is the bash built-in as a standalone
// plugin binary.
package main

import (
	"github.com/switchboard-mcp/switchboard/plugins/bash"
	"github.com/switchboard-mcp/switchboard/sdk"
)

func main() { sdk.Serve(bash.New()) }

// Command switchboard-plugin-git is the git built-in as a standalone plugin
// binary.
package main

import (
	"github.com/switchboard-mcp/switchboard/plugins/git"
	"github.com/switchboard-mcp/switchboard/sdk"
)

func main() { sdk.Serve(git.New()) }

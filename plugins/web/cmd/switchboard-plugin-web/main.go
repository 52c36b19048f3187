// Command switchboard-plugin-web is the web built-in as a standalone plugin
// binary.
package main

import (
	"github.com/switchboard-mcp/switchboard/plugins/web"
	"github.com/switchboard-mcp/switchboard/sdk"
)

func main() { sdk.Serve(web.New()) }

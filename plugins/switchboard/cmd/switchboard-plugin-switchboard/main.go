// Command switchboard-plugin-switchboard is the switchboard built-in as a
// standalone plugin binary. It works only when the host starts it as the
// built-in: its tools need the host's back-channel, which no other plugin
// is given.
package main

import (
	"github.com/switchboard-mcp/switchboard/plugins/switchboard"
	"github.com/switchboard-mcp/switchboard/sdk"
)

func main() { sdk.Serve(switchboard.New()) }

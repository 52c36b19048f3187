// Command switchboard-builtins serves one of the built-in plugins:
// `switchboard-builtins NAME`. make build builds it beside the switchboard
// binary and pins its SHA-256 into it (builtins.BinaryPin); the host then
// starts built-ins through this binary, which holds the built-ins' code
// without the host's, instead of re-executing itself
// (`switchboard plugin-serve NAME`). It is not meant to be run by hand.
package main

import (
	"fmt"
	"os"

	"github.com/switchboard-mcp/switchboard/host/internal/builtins"
	"github.com/switchboard-mcp/switchboard/sdk"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "switchboard-builtins is started by the switchboard host: switchboard-builtins NAME")
		os.Exit(2)
	}
	b, ok := builtins.Lookup(os.Args[1])
	if !ok {
		fmt.Fprintf(os.Stderr, "switchboard-builtins: no built-in named %q\n", os.Args[1])
		os.Exit(2)
	}
	sdk.Serve(b.New())
}

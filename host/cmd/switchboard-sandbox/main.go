// Command switchboard-sandbox is the kernel sandbox's helper: the host
// starts it as the first process of each confined plugin's namespaces. It
// is the same code as `switchboard sandbox-exec`, in a binary small enough
// to start in a few milliseconds; the host uses it when it sits beside the
// switchboard binary. It is not meant to be run by hand.
package main

import (
	"os"

	"github.com/switchboard-mcp/switchboard/host/internal/sandboxinit"
)

func main() { os.Exit(sandboxinit.Run()) }

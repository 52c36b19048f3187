// Command switchboard-plugin-conformance serves the fixtures of the MCP
// conformance suite's server scenarios (@modelcontextprotocol/conformance)
// as a Switchboard plugin: `make conformance` runs the suite against it
// through `switchboard serve --http`.
package main

import "github.com/switchboard-mcp/switchboard/sdk"

func main() { sdk.Serve(New()) }

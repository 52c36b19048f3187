// Command switchboard-plugin-hello is an example third-party Switchboard
// plugin, written only against the public SDK.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/switchboard-mcp/switchboard/sdk"
)

// greetArgs are the arguments of hello.greet; the tool's input schema is
// derived from this struct.
type greetArgs struct {
	Name string `json:"name" jsonschema:"description=Who to greet"`
}

// New returns the hello plugin. GREETING in the environment (set with
// env = { GREETING = "..." } in its plugin block) changes the greeting.
func New() *sdk.Server {
	s := sdk.NewServer("hello", "1.0.0", sdk.WithInstructions("Greets people by name."))
	sdk.AddTool(s, sdk.Tool{
		Name:        "greet",
		Title:       "Greet someone",
		Description: "Answer with a friendly greeting for name.",
		ReadOnly:    true,
		Idempotent:  sdk.Bool(true),
		OpenWorld:   sdk.Bool(false),
	}, func(_ context.Context, _ *sdk.Request, in greetArgs) (*sdk.Result, error) {
		name := strings.TrimSpace(in.Name)
		if name == "" {
			return sdk.ErrorResult("name is empty: pass the name of the person to greet"), nil
		}
		greeting := os.Getenv("GREETING")
		if greeting == "" {
			greeting = "Hello"
		}
		return sdk.Text(fmt.Sprintf("%s, %s!", greeting, name)), nil
	})
	return s
}

func main() { sdk.Serve(New()) }

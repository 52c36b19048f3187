package main

import (
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/sdk/sdktest"
)

func TestGreet(t *testing.T) {
	res := sdktest.StartInProcess(t, New()).Call("greet", map[string]any{"name": "Ada"})
	if got := res.Text(); !strings.Contains(got, "Ada") || res.IsError {
		t.Errorf("greet(Ada) = %q (isError %v), want a greeting naming Ada", got, res.IsError)
	}
}

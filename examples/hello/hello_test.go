package main

import (
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/sdk/sdktest"
)

func TestGreet(t *testing.T) {
	res := sdktest.StartInProcess(t, New()).Call("greet", map[string]any{"name": "Ada"})
	if got := sdktest.Text(res); !strings.Contains(got, "Ada") || res.GetIsError() {
		t.Errorf("greet(Ada) = %q (isError %v), want a greeting naming Ada", got, res.GetIsError())
	}
}

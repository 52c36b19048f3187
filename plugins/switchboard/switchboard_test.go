package switchboard_test

import (
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/plugins/switchboard"
	"github.com/switchboard-mcp/switchboard/sdk"
	"github.com/switchboard-mcp/switchboard/sdk/sdktest"
)

// TestTools checks the tools' access levels: restart_server is the one
// WRITE tool.
func TestTools(t *testing.T) {
	p := sdktest.StartInProcess(t, switchboard.New())
	want := map[string]sdk.Access{
		switchboard.ToolServers:     sdk.AccessRead,
		switchboard.ToolRestart:     sdk.AccessWrite,
		switchboard.ToolWhyRefused:  sdk.AccessRead,
		switchboard.ToolRecentCalls: sdk.AccessRead,
	}
	if len(p.Tools) != len(want) {
		t.Errorf("%d tools, want %d", len(p.Tools), len(want))
	}
	for name, access := range want {
		tool := p.Tool(name)
		if tool == nil {
			t.Errorf("no tool %s", name)
			continue
		}
		if tool.Access != access {
			t.Errorf("%s: access %v, want %v", name, tool.Access, access)
		}
	}
}

// TestWithoutTheHost: run as anything but the host's built-in (here, in
// process with no host service), every tool says it has no host.
func TestWithoutTheHost(t *testing.T) {
	p := sdktest.StartInProcess(t, switchboard.New())
	for _, tool := range []string{switchboard.ToolServers, switchboard.ToolWhyRefused, switchboard.ToolRecentCalls} {
		res := p.Call(tool, map[string]any{})
		if !res.IsError || !strings.Contains(res.Text(), "no host service") {
			t.Errorf("%s without the host = %q (error %v), want a refusal naming the missing host service", tool, res.Text(), res.IsError)
		}
	}
	if res := p.Call(switchboard.ToolRestart, map[string]any{"name": "git"}); !res.IsError || !strings.Contains(res.Text(), "no host service") {
		t.Errorf("restart_server without the host = %q", res.Text())
	}
}

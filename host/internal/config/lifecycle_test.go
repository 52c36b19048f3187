package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// start and idle_timeout are read at the top level (the defaults) and in
// every kind of server block, which overrides them.
func TestLifecycle(t *testing.T) {
	res, dir := load(t, `
project_dir  = "."
data_dir     = "`+t.TempDir()+`"
start        = "lazy"
idle_timeout = "10m"
builtin "git" { start = "eager" }
builtin "bash" { idle_timeout = "0" }
plugin "a" {
  path         = "a"
  idle_timeout = "2m"
}
external "e" {
  command = "x"
  start   = "eager"
}
`)
	if res.Diags.HasErrors() {
		t.Fatalf("Load in %s: %s", dir, res.Diags.Error())
	}
	c := res.Config
	got := map[string]Lifecycle{"top": c.Lifecycle, "a": c.Plugins[0].Lifecycle, "e": c.Externals[0].Lifecycle}
	for _, b := range c.Builtins {
		got[b.Name] = b.Lifecycle
	}
	want := map[string]Lifecycle{
		"top":  {Start: StartLazy, IdleTimeout: 10 * time.Minute},
		"git":  {Start: StartEager, IdleTimeout: 10 * time.Minute},
		"bash": {Start: StartLazy},
		"a":    {Start: StartLazy, IdleTimeout: 2 * time.Minute},
		"e":    {Start: StartEager, IdleTimeout: 10 * time.Minute},
		// On by default, without a block: the top level's.
		"switchboard": {Start: StartLazy, IdleTimeout: 10 * time.Minute},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Lifecycle (-want +got):\n%s", diff)
	}
	if s := string(c.Builtins[0].Settings); strings.Contains(s, "start") {
		t.Errorf("git settings = %s, want no start", s)
	}
}

func TestLifecycleRefused(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"start", `start = "sometimes"`, `start = "sometimes": use "eager"`},
		{"block start", `plugin "a" {
  path  = "a"
  start = "later"
}`, `start = "later"`},
		{"idle_timeout", `builtin "git" { idle_timeout = "soon" }`, `idle_timeout = "soon" is not a positive duration`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, _ := load(t, "project_dir = \".\"\ndata_dir = \""+t.TempDir()+"\"\n"+tt.src+"\n")
			if !res.Diags.HasErrors() || !strings.Contains(res.Diags.Error(), tt.want) {
				t.Errorf("Load = %v, want an error with %q", res.Diags, tt.want)
			}
		})
	}
}

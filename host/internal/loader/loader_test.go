package loader_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/loader"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/internal/fixtures"
	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

func TestMain(m *testing.M) { fixtures.Main(m) }

// start writes src as a config in a fresh project, loads it, and returns
// the registry (shut down when the test ends) and Load's error.
func start(t *testing.T, src string) (*registry.Registry, error) {
	t.Helper()
	bins := fixtures.Build(t)
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	src = strings.ReplaceAll(src, "$FIXTURE", bins.TestPlugin)
	src = strings.ReplaceAll(src, "$HELLO", bins.Hello)
	path := filepath.Join(dir, "config.hcl")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	res := config.Load(path)
	if res.Diags.HasErrors() {
		t.Fatalf("config: %v", res.Diags)
	}
	reg, err := loader.Load(t.Context(), res.Config, loader.Options{Self: bins.Switchboard, Logger: hclog.NewNullLogger(), WaitAll: true}) // every server, however loaded the machine
	if reg == nil {
		t.Fatalf("Load returned no registry: %v", err)
	}
	t.Cleanup(func() {
		if err := reg.Shutdown(context.Background(), time.Second); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return reg, err
}

func call(t *testing.T, reg *registry.Registry, name, args string) string {
	t.Helper()
	res, err := reg.Call(t.Context(), name, []byte(args), nil)
	if err != nil {
		t.Fatalf("Call(%s): %v", name, err)
	}
	return res.Text()
}

func TestBuiltinsAndPlugins(t *testing.T) {
	reg, err := start(t, `
builtin "filesystem" {}
builtin "bash" {}
builtin "git" {}
builtin "web" {}
plugin "hello" { path = "$HELLO" }
`)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	var names []string
	for _, e := range reg.Entries() {
		names = append(names, fmt.Sprintf("%s/%s", e.Server.Name(), e.Kind))
	}
	if got := strings.Join(names, " "); got != "filesystem/builtin bash/builtin git/builtin web/builtin switchboard/builtin hello/plugin" {
		t.Errorf("registered %s", got)
	}
	if got := call(t, reg, "hello.greet", `{"name":"Ada"}`); !strings.Contains(got, "Ada") {
		t.Errorf("hello.greet = %q", got)
	}
	if got := call(t, reg, "bash.run", `{"command":"echo from-bash"}`); !strings.Contains(got, "from-bash") {
		t.Errorf("bash.run = %q", got)
	}
	// Built-ins are subprocesses of their own.
	for _, e := range reg.Entries() {
		if p, ok := e.Server.(registry.Process); !ok || p.PID() == 0 || p.PID() == os.Getpid() {
			t.Errorf("%s is not a separate process", e.Server.Name())
		}
	}
}

func TestCollisions(t *testing.T) {
	bins := fixtures.Build(t)
	// Two plugins in a plugin directory that both call themselves
	// "fixture". (A plugin block that claims a built-in's name is refused
	// by the config, see config's tests.)
	pdir := t.TempDir()
	for _, n := range []string{"switchboard-plugin-a", "switchboard-plugin-b"} {
		b, err := os.ReadFile(bins.TestPlugin)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pdir, n), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := start(t, fmt.Sprintf(`
plugin_dirs = [%q]
allow_unlocked_plugins = true
builtin "git" {}
plugin "hello" { path = "$HELLO" }
`, pdir))

	var ce *registry.CollisionError
	if !errors.As(err, &ce) {
		t.Fatalf("Load error = %v, want a *CollisionError", err)
	}
	if ce.Name != "fixture" {
		t.Errorf("collision = %+v, want the second plugin calling itself fixture refused", ce)
	}
	fails := reg.Failures()
	if len(fails) != 1 {
		t.Fatalf("Failures = %v, want 1 collision", fails)
	}
	second := fails[0].Err.Error()
	for _, want := range []string{`"fixture"`, "switchboard-plugin-a", "switchboard-plugin-b"} {
		if !strings.Contains(second, want) {
			t.Errorf("collision %q does not name %s", second, want)
		}
	}
	// The first claimant keeps its place and everything else works.
	if got := call(t, reg, "git.git_status", `{}`); strings.Contains(got, "9.9.9") {
		t.Errorf("git.git_status went to the plugin: %q", got)
	}
	if _, err := reg.Lookup("git.echo"); !errors.Is(err, protocol.ErrUnknownTool) {
		t.Errorf("git.echo resolved (%v): the refused plugin's tools must not be routable", err)
	}
	if got := call(t, reg, "fixture.echo", `{"text":"a wins"}`); got != "a wins" {
		t.Errorf("fixture.echo = %q", got)
	}
	if got := call(t, reg, "hello.greet", `{"name":"Bo"}`); !strings.Contains(got, "Bo") {
		t.Errorf("hello.greet = %q", got)
	}
}

func TestVersionMismatchNextToV1(t *testing.T) {
	reg, err := start(t, `
plugin "future" {
  path = "$FIXTURE"
  env  = { FIXTURE_VERSIONS = "3" }
}
plugin "current" { path = "$FIXTURE" }
`)
	var pm *launcher.ProtocolMismatchError
	if !errors.As(err, &pm) || !strings.Contains(err.Error(), "[3]") || !strings.Contains(err.Error(), "[1 2]") {
		t.Fatalf("Load error = %v, want a protocol mismatch naming [3] and [1 2]", err)
	}
	if got := call(t, reg, "current.echo", `{"text":"v1 works"}`); got != "v1 works" {
		t.Errorf("current.echo = %q", got)
	}
	if _, err := reg.Call(t.Context(), "future.echo", []byte(`{}`), nil); !errors.Is(err, protocol.ErrUnknownTool) {
		t.Errorf("future.echo err = %v, want unknown (never registered)", err)
	}
}

// A plugin built on the version 1 SDK (a frozen copy, its own module) loads
// and answers next to version 2 plugins; each runs at its own version.
func TestV1PluginNextToV2(t *testing.T) {
	v1 := fixtures.V1Plugin(t)
	reg, err := start(t, `
plugin "old" { path = "`+v1+`" }
plugin "fx" { path = "$FIXTURE" }
plugin "hello" { path = "$HELLO" }
`)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := call(t, reg, "old.echo", `{"text":"still here"}`); got != "v1: still here" {
		t.Errorf("old.echo = %q", got)
	}
	if got := call(t, reg, "fx.echo", `{"text":"v2"}`); got != "v2" {
		t.Errorf("fx.echo = %q", got)
	}
	want := map[string]int{"old": protocol.Version1, "fx": protocol.Version2, "hello": protocol.Version2}
	for _, e := range reg.Entries() {
		p, ok := e.Server.(registry.Process)
		if !ok {
			continue
		}
		if v, named := want[e.Server.Name()]; named && p.ProtocolVersion() != v {
			t.Errorf("%s speaks protocol %d, want %d", e.Server.Name(), p.ProtocolVersion(), v)
		}
	}
}

func TestPolicyDeniesBeforeRouting(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	reg, _ := start(t, `
builtin "bash" {}
plugin "fx" { path = "$FIXTURE" }
permissions {
  deny = ["bash.*", "fx.echo"]
}
`)
	_, err := reg.Call(t.Context(), "bash.run", []byte(fmt.Sprintf(`{"command":"touch %s"}`, marker)), nil)
	if !errors.Is(err, protocol.ErrPermissionDenied) || !strings.Contains(err.Error(), `"bash.*"`) {
		t.Errorf("bash.run err = %v, want denied naming the rule", err)
	}
	if _, statErr := os.Stat(marker); statErr == nil {
		t.Error("denied command ran anyway")
	}
	if _, err := reg.Call(t.Context(), "fx.echo", []byte(`{"text":"x"}`), nil); !errors.Is(err, protocol.ErrPermissionDenied) {
		t.Errorf("fx.echo err = %v, want denied", err)
	}
}

func TestShutdownCancelsInFlight(t *testing.T) {
	reg, _ := start(t, `plugin "fx" { path = "$FIXTURE" }`)
	pid := reg.Entries()[0].Server.(registry.Process).PID()
	done := make(chan error, 1)
	inFlight := make(chan struct{})
	var once sync.Once
	go func() {
		_, err := reg.Call(context.Background(), "fx.sleep", []byte(`{"ms":60000}`), func(toolcall.Progress) {
			once.Do(func() { close(inFlight) }) // the handler is running
		})
		done <- err
	}()
	select {
	case <-inFlight:
	case err := <-done:
		t.Fatalf("fx.sleep ended before shutdown: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("fx.sleep never reached the plugin")
	}
	if err := reg.Shutdown(context.Background(), 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, protocol.ErrCancelled) && !errors.Is(err, protocol.ErrUnavailable) {
			t.Errorf("in-flight call err = %v, want cancelled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("in-flight call did not end at shutdown")
	}
	// Shutting down is not a passing outage: the error says so.
	_, err := reg.Call(context.Background(), "fx.echo", []byte(`{}`), nil)
	if !errors.Is(err, protocol.ErrShuttingDown) || errors.Is(err, protocol.ErrUnavailable) {
		t.Errorf("call after shutdown err = %v, want ErrShuttingDown and not ErrUnavailable", err)
	}
	if alive := fixtures.WaitGone([]int{pid}, 5*time.Second); len(alive) > 0 {
		t.Errorf("plugin %d alive after Shutdown", pid)
	}
}

func TestRestartRetriesAFailedStart(t *testing.T) {
	bins := fixtures.Build(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "late-plugin")
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	path := filepath.Join(dir, "config.hcl")
	if err := os.WriteFile(path, []byte(fmt.Sprintf("plugin \"late\" { path = %q }\n", bin)), 0o600); err != nil {
		t.Fatal(err)
	}
	res := config.Load(path)
	if res.Diags.HasErrors() {
		t.Fatal(res.Diags)
	}
	h, err := loader.Start(t.Context(), res.Config, loader.Options{Self: bins.Switchboard, Logger: hclog.NewNullLogger()})
	if err == nil || h == nil {
		t.Fatalf("Start with a missing binary: %v", err)
	}
	t.Cleanup(func() { _ = h.Registry().Shutdown(context.Background(), time.Second) })
	// A missing binary may appear later: the server waits, reconnecting.
	if len(h.Registry().Failures()) != 0 {
		t.Fatalf("failures = %v", h.Registry().Failures())
	}
	if _, err := h.Registry().Call(t.Context(), "late.echo", []byte(`{"text":"x"}`), nil); err == nil || !strings.Contains(err.Error(), "late is reconnecting") {
		t.Errorf("call while waiting = %v, want it to say late is reconnecting", err)
	}
	// The binary appears; restart brings the server up.
	b, err := os.ReadFile(bins.TestPlugin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Restart("late"); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if !eventually(10*time.Second, func() bool {
		_, err := h.Registry().Call(t.Context(), "late.echo", []byte(`{"text":"here"}`), nil)
		return err == nil
	}) {
		t.Errorf("late never came up after restart")
	}
}

func TestCheckWarnsAboutPluginBinaries(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	exe := filepath.Join(dir, "ok-plugin")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	noexec := filepath.Join(dir, "noexec-plugin")
	if err := os.WriteFile(noexec, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf("plugin \"ok\" { path = %q }\nplugin \"missing\" { path = \"nope\" }\nplugin \"noexec\" { path = %q }\nplugin \"pinned\" {\n  path = %q\n  sha256 = %q\n}\n",
		exe, noexec, exe, strings.Repeat("ab", 32))
	if err := os.WriteFile(filepath.Join(dir, "config.hcl"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	res := config.Load(filepath.Join(dir, "config.hcl"))
	if res.Diags.HasErrors() {
		t.Fatal(res.Diags)
	}
	var got []string
	for _, d := range loader.Check(res.Config) {
		if d.Severity != hcl.DiagWarning {
			t.Errorf("%s is not a warning", d.Summary)
		}
		got = append(got, d.Summary)
	}
	want := "Plugin binary not found|Plugin binary is not executable|Plugin binary does not match its sha256 pin"
	if strings.Join(got, "|") != want {
		t.Errorf("Check = %q, want %q", got, want)
	}
}

// A plugin binary that other users can write is refused, so the code that
// runs is the code its owner put there (StrictModes); the same binary with
// ordinary modes loads.
func TestWritablePluginBinaryIsRefused(t *testing.T) {
	bins := fixtures.Build(t)
	b, err := os.ReadFile(bins.TestPlugin)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	loose, tight := filepath.Join(dir, "loose"), filepath.Join(dir, "tight")
	for _, p := range []string{loose, tight} {
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(loose, 0o777); err != nil {
		t.Fatal(err)
	}
	reg, err := start(t, fmt.Sprintf("plugin \"loose\" { path = %q }\nplugin \"tight\" { path = %q }\n", loose, tight))
	if err == nil || !strings.Contains(err.Error(), "chmod") {
		t.Errorf("Load err = %v, want the world-writable binary refused with the chmod to run", err)
	}
	if reg.Entry("loose") != nil {
		t.Error("the world-writable plugin binary was started")
	}
	if reg.Entry("tight") == nil {
		t.Error("control: the same binary with ordinary modes did not load")
	}
}

// eventually polls cond, at growing intervals, until it holds or d has
// passed, and reports whether it held.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
	}
}

// A plugin's coded refusal to give permission patterns keeps its code
// through the registry, and the call does not run.
func TestPermissionPatternCodesReachTheCaller(t *testing.T) {
	reg, err := start(t, `
plugin "fx" { path = "$FIXTURE" }
permissions { default = "allow" }`)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []*protocol.Error{protocol.ErrPermissionDenied, protocol.ErrUnavailable} {
		_, err := reg.Call(t.Context(), "fx.guarded", []byte(`{"code":"`+want.Code.String()+`"}`), nil)
		if !errors.Is(err, want) || !strings.Contains(err.Error(), "fixture cannot judge the call") {
			t.Errorf("fx.guarded with a %s refusal: err = %v, want that code and the plugin's message", want.Code, err)
		}
	}
	if got := call(t, reg, "fx.guarded", `{"code":""}`); got != "ok" {
		t.Errorf("fx.guarded = %q, want ok", got)
	}
}

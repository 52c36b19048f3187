package modcheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

const (
	hostModule = "github.com/switchboard-mcp/switchboard"
	sdkModule  = hostModule + "/sdk"
	// maxSDKGo is the SDK module's go directive: the lowest its
	// requirements allow (go-plugin v1.8.0 and invopop/jsonschema v0.14.0
	// need 1.24). Raising it makes every plugin author upgrade Go; do it
	// only when a requirement the SDK truly needs asks for it.
	maxSDKGo = "1.24.0"
)

// hostOnly are module paths (or prefixes ending in "/") that the host needs
// and a plugin must not inherit through the SDK.
var hostOnly = []string{
	hostModule,
	"github.com/jackc/pgx/",
	"github.com/chromedp/",
	"github.com/hashicorp/hcl/",
	"github.com/zclconf/go-cty",
	"github.com/prometheus/",
	"go.opentelemetry.io/otel/exporters/",
	"go.opentelemetry.io/proto/otlp",
	"github.com/spf13/cobra",
	"github.com/santhosh-tekuri/jsonschema/",
	"github.com/mark3labs/mcp-go",
	"github.com/landlock-lsm/go-landlock",
	"github.com/coreos/go-oidc/",
	"mvdan.cc/sh/",
}

func isHostOnly(path string) bool {
	for _, h := range hostOnly {
		if path == h || strings.HasSuffix(h, "/") && strings.HasPrefix(path, h) {
			return true
		}
	}
	return false
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func parse(t *testing.T, path string) *modfile.File {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(path, b, nil)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return f
}

// checkGo fails when a module's go directive is above maxSDKGo or a
// toolchain line would make the go command fetch a newer Go.
func checkGo(t *testing.T, name string, f *modfile.File) {
	t.Helper()
	if f.Go == nil {
		t.Errorf("%s has no go directive: add `go %s`", name, maxSDKGo)
	} else if semver.Compare("v"+f.Go.Version, "v"+maxSDKGo) > 0 {
		t.Errorf("%s says go %s, above %s: plugin authors would need a newer Go; lower the requirement that asks for it (go get go@%s) or, if the SDK truly needs it, raise maxSDKGo here and say why", name, f.Go.Version, maxSDKGo, maxSDKGo)
	}
	if f.Toolchain != nil {
		t.Errorf("%s has `toolchain %s`: remove it (go get toolchain@none), a plugin author's Go must not be told to download another", name, f.Toolchain.Name)
	}
}

func TestSDKModuleStandsAlone(t *testing.T) {
	root := repoRoot(t)
	sdkDir := filepath.Join(root, "sdk")
	f := parse(t, filepath.Join(sdkDir, "go.mod"))
	if f.Module == nil || f.Module.Mod.Path != sdkModule {
		t.Fatalf("sdk/go.mod: module is not %s", sdkModule)
	}
	checkGo(t, "sdk/go.mod", f)
	for _, r := range f.Require {
		if strings.HasPrefix(r.Mod.Path, hostModule) || isHostOnly(r.Mod.Path) {
			t.Errorf("sdk/go.mod requires %s, a host-only module: move the code that needs it into the host's module", r.Mod.Path)
		}
	}
	for _, r := range f.Replace {
		t.Errorf("sdk/go.mod replaces %s: the SDK must build as published, without replace directives", r.Old.Path)
	}

	// The whole module graph a plugin author downloads, not only the
	// direct requirements.
	cmd := exec.Command("go", "list", "-m", "all")
	cmd.Dir = sdkDir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m all in sdk: %v", err)
	}
	mods := strings.Fields(string(out))
	if len(mods) < 10 {
		t.Fatalf("go list -m all in sdk listed %d words, want the module graph:\n%s", len(mods), out)
	}
	for _, m := range mods {
		if m != sdkModule && isHostOnly(m) {
			t.Errorf("the SDK's module graph holds %s, a host-only module: a plugin author would download it", m)
		}
	}
}

// TestHelloIsAThirdPartyModule: examples/hello depends on the SDK alone,
// as a plugin outside the repository does, and builds against the SDK in
// the repository.
func TestHelloIsAThirdPartyModule(t *testing.T) {
	f := parse(t, filepath.Join(repoRoot(t), "examples", "hello", "go.mod"))
	checkGo(t, "examples/hello/go.mod", f)
	for _, r := range f.Require {
		if !r.Indirect && r.Mod.Path != sdkModule {
			t.Errorf("examples/hello/go.mod requires %s directly: the example plugin should need only the SDK", r.Mod.Path)
		}
		if isHostOnly(r.Mod.Path) {
			t.Errorf("examples/hello/go.mod requires %s, a host-only module", r.Mod.Path)
		}
	}
	if len(f.Replace) != 1 || f.Replace[0].Old.Path != sdkModule || f.Replace[0].New.Path != "../../sdk" {
		t.Errorf("examples/hello/go.mod: want exactly `replace %s => ../../sdk`, got %d replace directives", sdkModule, len(f.Replace))
	}
}

// TestHostUsesTheSDKInTheRepository: the host's module builds against the
// SDK beside it (a replace, not a workspace, so that go build and
// goreleaser need no go.work).
func TestHostUsesTheSDKInTheRepository(t *testing.T) {
	f := parse(t, filepath.Join(repoRoot(t), "go.mod"))
	for _, r := range f.Replace {
		if r.Old.Path == sdkModule && r.New.Path == "./sdk" {
			return
		}
	}
	t.Errorf("go.mod: want `replace %s => ./sdk`", sdkModule)
}

// TestBuildsForWindows: the SDK module (every package, its tests too, under
// go vet), examples/hello and the plugins released for Windows (see
// .goreleaser.yaml) build for windows/amd64 and windows/arm64. Cross-
// compiling needs nothing beyond the Go toolchain and the module cache.
// The host and the filesystem, bash and git plugins are Unix-only.
func TestBuildsForWindows(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles three modules for two platforms")
	}
	root := repoRoot(t)
	run := func(t *testing.T, dir, goarch string, args ...string) {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOOS=windows", "GOARCH="+goarch, "CGO_ENABLED=0", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("GOOS=windows GOARCH=%s go %s in %s: %v\n%s\nA file that uses Unix-only calls (unix.Dup2, syscall.Kill, process groups) needs a //go:build unix tag and a _windows.go counterpart (see sdk/protocol/pluginserve/serve_windows.go)", goarch, strings.Join(args, " "), dir, err, out)
		}
	}
	for _, goarch := range []string{"amd64", "arm64"} {
		t.Run(goarch, func(t *testing.T) {
			run(t, filepath.Join(root, "sdk"), goarch, "vet", "./...")
			run(t, filepath.Join(root, "examples", "hello"), goarch, "vet", "./...")
			run(t, filepath.Join(root, "examples", "hello"), goarch, "build", "-o", os.DevNull, ".")
			run(t, root, goarch, "build", "./plugins/web/cmd/switchboard-plugin-web", "./examples/conformance")
		})
	}
}

package sdktest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/sdk/sdktest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction(sdktest.ReattachWaitFunction))
}

// TestStartBinary builds the example plugin and runs it as a subprocess,
// exactly as the host would.
func TestStartBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "switchboard-plugin-hello")
	// examples/hello is a module of its own that uses this one (through
	// its replace directive), so it is built in its folder.
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join("..", "..", "examples", "hello")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	p := sdktest.Start(t, bin, nil)
	if p.PID == 0 || p.PID == os.Getpid() {
		t.Errorf("PID = %d, want a separate process", p.PID)
	}
	if got := p.Call("greet", map[string]any{"name": "Ada"}).Text(); !strings.Contains(got, "Ada") {
		t.Errorf("greet = %q", got)
	}
}

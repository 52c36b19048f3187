package tuning_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/tuning"
)

// keepRuntime restores GOMAXPROCS and the GC percent after a test that
// tunes this process.
func keepRuntime(t *testing.T) {
	t.Helper()
	procs := runtime.GOMAXPROCS(0)
	gc := debug.SetGCPercent(100)
	debug.SetGCPercent(gc)
	rate := runtime.MemProfileRate
	t.Cleanup(func() {
		runtime.GOMAXPROCS(procs)
		debug.SetGCPercent(gc)
		runtime.MemProfileRate = rate
	})
}

func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestHost(t *testing.T) {
	tests := []struct {
		name             string
		gogc, gomaxprocs string
		wantGC, wantProc int
	}{
		{"defaults: the GC percent as it was until settled, one scheduler slot", "", "", 200, 1},
		{"the user's choice wins", "200", "3", 200, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keepRuntime(t)
			t.Setenv("GOGC", tt.gogc)
			t.Setenv("GOMAXPROCS", tt.gomaxprocs)
			// What the runtime would have read from the environment at start.
			debug.SetGCPercent(200)
			runtime.GOMAXPROCS(3)
			t.Cleanup(tuning.StopHeadroom)
			tuning.Host()
			if got := gcPercent(); got != tt.wantGC {
				t.Errorf("GC percent = %d, want %d", got, tt.wantGC)
			}
			if got := runtime.GOMAXPROCS(0); got != tt.wantProc {
				t.Errorf("GOMAXPROCS = %d, want %d", got, tt.wantProc)
			}
			// Once settled, the GC headroom takes over, unless the user
			// chose (GOGC).
			deadline := time.Now().Add(tuning.SettleDelay + 5*time.Second)
			for gcPercent() == tt.wantGC && tt.gogc == "" && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if tt.gogc != "" {
				time.Sleep(tuning.SettleDelay + 100*time.Millisecond)
			}
			got := gcPercent()
			if tt.gogc == "" && got == tt.wantGC {
				t.Errorf("GC percent %d %s after the settle, want the headroom's", got, tt.name)
			}
			if tt.gogc != "" && got != tt.wantGC {
				t.Errorf("GC percent %d after the settle with GOGC=%s, want %d", got, tt.gogc, tt.wantGC)
			}
		})
	}
}

func TestPlugin(t *testing.T) {
	tests := []struct {
		name       string
		inProcess  bool
		gomaxprocs string
		want       int
	}{
		{"subprocess", false, "", 1},
		{"subprocess, GOMAXPROCS set", false, "3", 3},
		{"in a test binary", true, "", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keepRuntime(t)
			t.Setenv("GOMAXPROCS", tt.gomaxprocs)
			t.Setenv(tuning.EnvPluginCPUProfile, "")
			runtime.GOMAXPROCS(3)
			gc := gcPercent()
			stop := tuning.Plugin(hclog.NewNullLogger(), tt.inProcess)
			stop()
			if got := runtime.GOMAXPROCS(0); got != tt.want {
				t.Errorf("GOMAXPROCS = %d, want %d", got, tt.want)
			}
			if got := gcPercent(); got != gc {
				t.Errorf("GC percent = %d, want %d (plugins keep Go's)", got, gc)
			}
		})
	}
}

func TestProfiles(t *testing.T) {
	t.Run("host", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "host.prof")
		t.Setenv(tuning.EnvHostCPUProfile, path)
		stop, err := tuning.StartHostProfile()
		if err != nil {
			t.Fatal(err)
		}
		stop()
		if st, err := os.Stat(path); err != nil || st.Size() == 0 {
			t.Errorf("profile %s: %v, want a written file", path, err)
		}
	})
	t.Run("plugin", func(t *testing.T) {
		keepRuntime(t)
		path := filepath.Join(t.TempDir(), "plugin.prof")
		t.Setenv(tuning.EnvPluginCPUProfile, path)
		tuning.Plugin(hclog.NewNullLogger(), true)()
		if st, err := os.Stat(path); err != nil || st.Size() == 0 {
			t.Errorf("profile %s: %v, want a written file", path, err)
		}
	})
	t.Run("unset", func(t *testing.T) {
		keepRuntime(t)
		t.Setenv(tuning.EnvHostCPUProfile, "")
		stop, err := tuning.StartHostProfile()
		if err != nil {
			t.Fatal(err)
		}
		stop()
	})
	t.Run("unwritable", func(t *testing.T) {
		t.Setenv(tuning.EnvHostCPUProfile, filepath.Join(t.TempDir(), "no", "such", "dir.prof"))
		stop, err := tuning.StartHostProfile()
		if err == nil {
			t.Error("StartHostProfile into a missing folder: no error")
		}
		stop()
	})
}

// A host or plugin process that writes no profile samples no allocations
// for one (each sampled call site's record stays resident); one that
// writes a profile, a plugin served in a test binary (whose test may write
// a heap profile) and a GODEBUG that sets the rate keep the sampling.
func TestAllocationSampling(t *testing.T) {
	profile := filepath.Join(t.TempDir(), "p.prof")
	tests := []struct {
		name    string
		env     map[string]string
		start   func()
		sampled bool
	}{
		{"host", nil, func() { stop, _ := tuning.StartHostProfile(); stop() }, false},
		{"host writing a profile", map[string]string{tuning.EnvHostCPUProfile: profile}, func() { stop, _ := tuning.StartHostProfile(); stop() }, true},
		{"host, GODEBUG sets the rate", map[string]string{"GODEBUG": "gctrace=0,memprofilerate=4096"}, func() { stop, _ := tuning.StartHostProfile(); stop() }, true},
		{"plugin", nil, func() { tuning.Plugin(hclog.NewNullLogger(), false)() }, false},
		{"plugin writing a profile", map[string]string{tuning.EnvPluginCPUProfile: profile}, func() { tuning.Plugin(hclog.NewNullLogger(), false)() }, true},
		{"plugin in a test binary", nil, func() { tuning.Plugin(hclog.NewNullLogger(), true)() }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keepRuntime(t)
			for _, k := range []string{tuning.EnvHostCPUProfile, tuning.EnvPluginCPUProfile, "GODEBUG"} {
				t.Setenv(k, tt.env[k])
			}
			runtime.MemProfileRate = 512 << 10
			tt.start()
			if sampled := runtime.MemProfileRate != 0; sampled != tt.sampled {
				t.Errorf("MemProfileRate = %d, want sampling %v", runtime.MemProfileRate, tt.sampled)
			}
		})
	}
}

// TestSDKNamesTheSameVariable keeps the variable sdk.Serve documents and
// the one this package reads the same.
func TestSDKNamesTheSameVariable(t *testing.T) {
	out, err := exec.Command("go", "doc", "github.com/switchboard-mcp/switchboard/sdk.Serve").CombinedOutput()
	if err != nil {
		t.Fatalf("go doc sdk.Serve: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), tuning.EnvPluginCPUProfile) {
		t.Errorf("sdk.Serve's doc does not name %s:\n%s", tuning.EnvPluginCPUProfile, out)
	}
}

// TestHostStarting: no collection while the host starts, under a memory
// limit, and the collector as it was once done (or Host's settle) runs;
// a GOGC or GOMEMLIMIT the user set is left alone.
func TestHostStarting(t *testing.T) {
	for _, tt := range []struct {
		name, gogc, gomemlimit string
		off                    bool
	}{
		{"defaults", "", "", true},
		{"GOGC set", "100", "", false},
		{"GOMEMLIMIT set", "", "1GiB", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			keepRuntime(t)
			t.Setenv("GOGC", tt.gogc)
			t.Setenv("GOMEMLIMIT", tt.gomemlimit)
			debug.SetGCPercent(150)
			limit := debug.SetMemoryLimit(-1)
			done := tuning.HostStarting()
			got, gotLimit := gcPercent(), debug.SetMemoryLimit(-1)
			if tt.off && (got != -1 || gotLimit == limit) {
				t.Errorf("while starting: GC percent %d, memory limit %d; want off under a limit", got, gotLimit)
			}
			if !tt.off && (got != 150 || gotLimit != limit) {
				t.Errorf("while starting with %s: GC percent %d, memory limit %d; want 150, %d", tt.name, got, gotLimit, limit)
			}
			done()
			done() // twice is once
			if got, gotLimit := gcPercent(), debug.SetMemoryLimit(-1); got != 150 || gotLimit != limit {
				t.Errorf("once started: GC percent %d, memory limit %d; want 150, %d", got, gotLimit, limit)
			}
		})
	}
}

// TestGCHeadroom: after each collection the GC percent lets the heap grow
// by max(live, GCHeadroom), so a host with little live collects far less
// often than at Go's default, and one with more live runs at the default.
func TestGCHeadroom(t *testing.T) {
	keepRuntime(t)
	before := gcPercent()
	t.Cleanup(tuning.StopHeadroom)
	// waitFor collects until the percent satisfies ok: the tuner runs
	// after a collection. With churn the test allocates fast between
	// collections, as a host with many calls does; without, it hardly
	// allocates, as a host whose calls come slowly.
	var sink []byte
	waitFor := func(what string, churn bool, ok func(int) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok(gcPercent()) {
			if time.Now().After(deadline) {
				t.Fatalf("GC percent %d: never %s", gcPercent(), what)
			}
			if churn {
				for range 64 {
					sink = make([]byte, 64<<10)
				}
			} else {
				time.Sleep(20 * time.Millisecond)
			}
			runtime.GC()
			time.Sleep(time.Millisecond)
		}
	}
	tuning.SetGCBusy(true)
	t.Cleanup(func() { tuning.SetGCBusy(false) })
	tuning.StartHeadroom()
	tuning.StartHeadroom() // twice is once
	waitFor("above 100 with a small live heap", true, func(p int) bool { return p > 100 })
	// Calls that come slowly allocate slowly: Go's default.
	waitFor("100 while the allocation rate is low", false, func(p int) bool { return p == 100 })
	waitFor("above 100 once allocation is fast again", true, func(p int) bool { return p > 100 })
	// Quiet (no calls): Go's default, and the headroom again with calls.
	tuning.SetGCBusy(false)
	waitFor("100 while the host is quiet", true, func(p int) bool { return p == 100 })
	tuning.SetGCBusy(true)
	waitFor("above 100 once calls come again", true, func(p int) bool { return p > 100 })
	keep := make([]byte, 3*tuning.GCHeadroom)
	for i := range keep {
		keep[i] = byte(i)
	}
	waitFor("100 with a live heap larger than the headroom", true, func(p int) bool { return p == 100 })
	runtime.KeepAlive(keep) // from here on keep is garbage
	waitFor("above 100 once the heap is small again", true, func(p int) bool { return p > 100 })
	runtime.KeepAlive(sink)
	tuning.StopHeadroom()
	if got := gcPercent(); got != before {
		t.Errorf("GC percent %d after stop, want %d as before", got, before)
	}
	runtime.GC()
	if got := gcPercent(); got != before {
		t.Errorf("GC percent %d after stop and a collection, want %d: a stopped tuner tunes nothing", got, before)
	}
}

func TestGCPercentFor(t *testing.T) {
	for _, tt := range []struct {
		live uint64
		want int
	}{
		{0, 1000},
		{1 << 20, 1000},
		{4 << 20, 400},
		{8 << 20, 200},
		{tuning.GCHeadroom, 100},
		{1 << 30, 100},
	} {
		if got := tuning.GCPercentFor(tt.live); got != tt.want {
			t.Errorf("GCPercentFor(%d) = %d, want %d", tt.live, got, tt.want)
		}
	}
}

// Package tuning holds the runtime settings of Switchboard's own processes
// in one place: the host (`switchboard serve`) and every plugin served by
// the SDK. Each setting yields to the environment variable a user would set
// to choose otherwise, and each was kept because it moved an end-to-end
// figure (README, PERFORMANCE).
//
// The host, once its servers have started (Host):
//   - unmaps the start-up pages of its binary (MADV_DONTNEED)
//     in the background, a moment after it starts serving (SettleDelay):
//     most were touched only while starting (package initialisation, config
//     decoding, launching). They are clean file pages, faulted back in on
//     demand, so its resident size stays near its working set. Done before
//     serving, the kernel's reclaim (some 30 ms for this binary) delayed
//     the host's first answer;
//   - gives memory back once it has had no calls for QuietDelay (Quiet,
//     which serve tells of every call): the heap the calls freed, and the
//     pages of its binary they touched, unmapped as after start-up, and
//     again a second after each health check while it stays idle
//     (Quiet.Background). (It
//     used to collect garbage at GOGC=50 to keep its resident size small;
//     with Quiet doing that when it matters, Go's default GOGC=100 serves
//     10-13 % more calls a second at 32 callers: README, Ablation.)
//   - collects garbage when its heap has grown by GCHeadroom past what the
//     last collection left live, or by as much as was live if that is
//     more (Go's default), unless GOGC or GOMEMLIMIT is set: a host keeps
//     little live and its calls' garbage dies young, so at Go's default it
//     collected every few hundred calls, each collection scanning the same
//     roots, a fifth of its CPU per call over HTTP. Only while calls come
//     fast (gcHotRate): at an agent's pace it collects at Go's default;
//   - collects no garbage while it starts (HostStarting, from the start
//     of serve until SettleDelay after Host), unless GOGC or GOMEMLIMIT is
//     set: a start allocates its config, manifests and tool list once
//     and keeps most of it, so collections then found little to free and
//     took a sixth of the CPU a lazy host with 100 plugins spends before
//     its first tools/list is answered. A memory limit
//     (startMemoryLimit) bounds the heap meanwhile (the runtime collects
//     near it), and at the settle the host collects once and returns the
//     freed pages (debug.FreeOSMemory) before running at Go's default;
//   - runs with one scheduler slot (GOMAXPROCS=1) unless GOMAXPROCS is set:
//     a host routes while plugins do the work, one slot serves some 20,000
//     calls a second, and it spares each call the wake-up of an idle thread
//     (and the spinning that follows), which on a small machine costs more
//     than the call itself.
//
// A plugin (Plugin):
//   - runs with one scheduler slot unless GOMAXPROCS is set in its
//     environment, for the same reason: a plugin answers one host. It is
//     set in the process, not in the environment, so the processes a tool
//     starts keep Go's default; a plugin whose tools do parallel CPU work
//     gets more with env = { GOMAXPROCS = "4" } in its block. Not applied
//     when the plugin is served inside a test binary (go-plugin's test
//     mode): that process's scheduler belongs to the test;
//   - unmaps the start-up pages of its binary SettleDelay after it starts,
//     as the host does (a built-in's process held 16 MB of its binary's
//     pages, most touched only by package initialisation), also not in a
//     test binary.
//
// Both sample no allocations for heap profiles unless they write a
// profile (noAllocationSampling), and both write a CPU profile, from start
// to shutdown, to the file named by
// EnvHostCPUProfile (the host) or EnvPluginCPUProfile (a plugin, set in its
// block's env), to see where the time goes (go tool pprof).
//
// Host plumbing, not a plugin author's API: this package belongs to the
// wire protocol and launch core that the SDK and the host share (see
// package [github.com/switchboard-mcp/switchboard/sdk/protocol]). It is
// exported only because the host is another module; its Go API may change
// in any release, and the only compatibility promise is the protocol
// version. Plugins use package sdk and sdktest.
package tuning

import (
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// EnvHostCPUProfile names the file `switchboard serve` writes its CPU
// profile to.
const EnvHostCPUProfile = "SWITCHBOARD_CPUPROFILE"

// EnvPluginCPUProfile names the file a plugin writes its CPU profile to.
const EnvPluginCPUProfile = "SWITCHBOARD_PLUGIN_CPUPROFILE"

// StartHostProfile starts the host's CPU profile when EnvHostCPUProfile
// names a file; stop ends it (a no-op when there is none). Call it first
// thing in serve, so start-up is profiled too.
func StartHostProfile() (stop func(), err error) {
	if os.Getenv(EnvHostCPUProfile) == "" {
		noAllocationSampling()
	}
	return startProfileFromEnv(EnvHostCPUProfile)
}

// noAllocationSampling turns off the runtime's sampling of allocations
// for heap profiles (runtime.MemProfileRate = 0) in a process that will
// write none: the profiles above write the allocations beside the CPU
// profile, so they keep it, and so does GODEBUG=memprofilerate=N. Each
// allocation site sampled gets a record in the runtime's 1.4 MB table of
// them, and the few hundred sites a burst of calls samples fall on most
// of its pages: some 1 MB of a host's 15 MB that stayed resident once it
// was quiet (README, PERFORMANCE: "As a gateway").
func noAllocationSampling() {
	if !strings.Contains(os.Getenv("GODEBUG"), "memprofilerate=") {
		runtime.MemProfileRate = 0
	}
}

// SettleDelay is how long after Host the host's start-up pages are
// released: long enough for the first requests of a client that connects
// at start (initialize, tools/list) to be answered first. A measure of the
// idle host's resident size waits longer than this.
const SettleDelay = 500 * time.Millisecond

// startMemoryLimit bounds the heap while the host starts without
// collecting (HostStarting): far above a start's own needs (some 40 MB
// allocated for 100 plugins with 1,900 tools), it only stops a start
// that allocates without end from growing without end.
const startMemoryLimit = 256 << 20

// startGC restores the collector HostStarting turned off (nil: it did
// not).
var startGC struct {
	sync.Mutex
	restore func()
}

// HostStarting turns garbage collection off while the host starts (see
// the package doc), unless GOGC or GOMEMLIMIT is set. Call it first thing
// in serve; Host turns it back on SettleDelay later, and so does done
// (for a serve that ends before: defer it).
func HostStarting() (done func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	startGC.Lock()
	defer startGC.Unlock()
	if startGC.restore != nil {
		return hostStarted
	}
	percent := debug.SetGCPercent(-1)
	limit := debug.SetMemoryLimit(startMemoryLimit)
	startGC.restore = func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
		debug.FreeOSMemory()
	}
	return hostStarted
}

// hostStarted turns garbage collection back on if HostStarting turned it
// off.
func hostStarted() {
	startGC.Lock()
	restore := startGC.restore
	startGC.restore = nil
	startGC.Unlock()
	if restore != nil {
		restore()
	}
}

// Host applies the host's settings (see the package doc). Call it once,
// after the host has started its servers and before it serves.
func Host() {
	userGC := os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != ""
	time.AfterFunc(SettleDelay, func() {
		hostStarted()
		if !userGC {
			startHeadroom()
		}
		releaseStartupPages()
	})
	oneSchedulerSlot()
}

// Plugin applies a plugin process's settings (see the package doc) and
// starts its CPU profile when EnvPluginCPUProfile names a file, warning on
// log when it cannot. inProcess is set when the plugin is served inside a
// test binary. Call stop when the plugin stops serving.
func Plugin(log hclog.Logger, inProcess bool) (stop func()) {
	stop, err := startProfileFromEnv(EnvPluginCPUProfile)
	if err != nil {
		log.Warn("no CPU profile", "error", err)
	}
	if !inProcess {
		oneSchedulerSlot()
		if os.Getenv(EnvPluginCPUProfile) == "" {
			noAllocationSampling()
		}
		time.AfterFunc(SettleDelay, releaseStartupPages)
	}
	return stop
}

// oneSchedulerSlot sets GOMAXPROCS to 1 unless the environment sets it.
func oneSchedulerSlot() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}

// startProfileFromEnv profiles into the file named by the variable env,
// when it is set. stop is never nil.
func startProfileFromEnv(env string) (stop func(), err error) {
	path := os.Getenv(env)
	if path == "" {
		return func() {}, nil
	}
	stop, err = startProfile(path)
	if err != nil {
		return func() {}, err
	}
	return stop, nil
}

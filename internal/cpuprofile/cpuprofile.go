// Package cpuprofile writes a process's CPU profile to a file, for the
// profiling switches of the host (SWITCHBOARD_CPUPROFILE) and of plugins
// (SWITCHBOARD_PLUGIN_CPUPROFILE).
package cpuprofile

import (
	"os"
	"runtime/pprof"
)

// Start profiles the process into path until stop is called.
func Start(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

package tuning

import (
	"os"
	"runtime/pprof"
)

// startProfile profiles the process into path until stop is called, and
// then writes the allocations made until then beside it (path + ".allocs"),
// to see what the garbage collector has to collect.
func startProfile(path string) (stop func(), err error) {
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
		if a, err := os.Create(path + ".allocs"); err == nil {
			_ = pprof.Lookup("allocs").WriteTo(a, 0)
			_ = a.Close()
		}
	}, nil
}

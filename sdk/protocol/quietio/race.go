//go:build linux && race

package quietio

import (
	"runtime"
	"unsafe"
)

// ioSync orders, for the race detector, every quiet write before the
// quiet reads that follow it, as package syscall's annotations order its
// reads and writes: two goroutines of one process (sdktest's in-process
// plugin and its test) that hand each other data through a connection
// are synchronised by it.
var ioSync int64

func raceBeforeWrite(p []byte) {
	runtime.RaceReleaseMerge(unsafe.Pointer(&ioSync))
	if len(p) > 0 {
		runtime.RaceReadRange(unsafe.Pointer(&p[0]), len(p))
	}
}

func raceAfterRead(p []byte) {
	if len(p) > 0 {
		runtime.RaceWriteRange(unsafe.Pointer(&p[0]), len(p))
	}
	runtime.RaceAcquire(unsafe.Pointer(&ioSync))
}

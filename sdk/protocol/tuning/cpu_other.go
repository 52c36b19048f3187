//go:build !unix

package tuning

import "time"

// processCPU is not read here: the host keeps one scheduler slot
// (slotController never sees load).
func processCPU() time.Duration { return 0 }

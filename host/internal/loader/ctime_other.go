//go:build !linux && !darwin

package loader

import "syscall"

// ctimeNS is 0 where the host does not know the status change time: the
// manifest then relies on the rest of the file's identity.
func ctimeNS(*syscall.Stat_t) int64 { return 0 }

package loader

import "syscall"

// ctimeNS is a file's status change time, in nanoseconds.
func ctimeNS(st *syscall.Stat_t) int64 { return st.Ctimespec.Sec*1e9 + st.Ctimespec.Nsec }

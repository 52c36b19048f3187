//go:build !linux

package tuning

// releaseStartupPages does nothing here: the madvise this needs is Linux's.
func releaseStartupPages() {}

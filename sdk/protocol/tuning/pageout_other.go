//go:build !linux

package tuning

// releaseStartupPages does nothing here: MADV_PAGEOUT is Linux's.
func releaseStartupPages() {}

//go:build !linux

package pluginserve

// hideMemory does nothing here: PR_SET_DUMPABLE is Linux's.
func hideMemory() error { return nil }

//go:build !linux

package cli

func releaseStartupPages() {}

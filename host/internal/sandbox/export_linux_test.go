//go:build linux

package sandbox

// LastWinsForTest is lastWins.
var LastWinsForTest = lastWins

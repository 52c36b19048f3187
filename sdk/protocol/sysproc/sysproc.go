// Package sysproc holds the few process settings that differ between
// operating systems: a child in its own process group that also dies with
// its parent where the system can arrange it (Linux).
package sysproc

//go:build !linux

package external

// waitExit has no pidfds to wait on here: watchProcess polls.
func waitExit(int, <-chan struct{}) (exited, ok bool) { return false, false }

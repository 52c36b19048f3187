//go:build !linux

package git

import "os/exec"

// runNarrowed runs cmd: Landlock, which narrows what git may change on
// Linux, is not here (see narrow_linux.go).
func runNarrowed(cmd *exec.Cmd, _ []string) error { return cmd.Run() }

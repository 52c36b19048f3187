package pluginserve

import "golang.org/x/sys/unix"

// hideMemory makes the plugin process non-dumpable: the processes its tools
// start (bash's commands, git) run as the same user in the same sandbox,
// and could otherwise attach to it with ptrace or read /proc/PID/mem and
// environ, where other callers' arguments and results pass (found from
// outside: a command of one HTTP session read another session's command
// line out of the bash plugin's memory). A program they exec is dumpable
// again, so this reaches the plugin only.
func hideMemory() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}

package bash

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/sysproc"
)

// reapOrphans ends the processes that escaped the command or job that
// started them (`setsid -f`, a double fork): reparented to the sandbox's
// init, they would live until the plugin stops (found from outside: a
// `setsid -f` loop kept writing after its call had returned). It runs
// when no command and no job is running, since a running one's own
// children could be among them, and only where the plugin is the first
// child of its own PID namespace (sysproc.EnvOwnPIDNamespace): elsewhere
// PID 1's children are the system's.
func (p *plugin) reapOrphans() {
	if os.Getenv(sysproc.EnvOwnPIDNamespace) != "1" || os.Getppid() != 1 {
		return
	}
	if p.running.Load() > 0 || p.jobs.anyRunning() {
		return
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	self := os.Getpid()
	for _, f := range stats {
		pid, ppid, ok := readStat(f)
		if !ok || pid == self || pid == 1 || ppid != 1 {
			continue
		}
		// Its whole group (a setsid'd process leads one), then itself.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// readStat returns the pid and parent pid in a /proc/PID/stat file.
func readStat(file string) (pid, ppid int, ok bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, 0, false
	}
	s := string(b)
	// "pid (comm) state ppid …": comm may hold spaces and parentheses.
	end := strings.LastIndexByte(s, ')')
	open := strings.IndexByte(s, '(')
	if end < 0 || open < 0 {
		return 0, 0, false
	}
	pid, err = strconv.Atoi(strings.TrimSpace(s[:open]))
	if err != nil {
		return 0, 0, false
	}
	fields := strings.Fields(s[end+1:])
	if len(fields) < 2 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(fields[1])
	return pid, ppid, err == nil
}

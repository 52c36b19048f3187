package git

import (
	"os"
	"os/exec"
	"runtime"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// writeRights are the Landlock rights runNarrowed handles: everything that
// changes the file system, none that reads it (the server's own sandbox
// decides what git reads and runs).
const writeRights = landlock.AccessFSSet(ll.AccessFSWriteFile | ll.AccessFSTruncate |
	ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeChar | ll.AccessFSMakeDir |
	ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo | ll.AccessFSMakeBlock |
	ll.AccessFSMakeSym | ll.AccessFSRefer)

// runNarrowed runs cmd where it may change files only beneath the folders
// of writable (and in /dev/null and its kind): a Landlock domain on a thread of its own,
// which the git process is forked from and inherits (a Landlock domain
// belongs to a thread's credentials), stacked on the server's sandbox.
// git follows links where it writes some of a repository's files
// (COMMIT_EDITMSG, logs/): a repository of the agent's inside the project,
// with COMMIT_EDITMSG linked to the project repository's .git/commondir,
// had a git_commit in it write the agent's path there, and the person's
// next `git status` ran a config of the agent's (red team round 11). The
// thread is never given back: it ends with its goroutine, and its domain
// with it. Where Landlock is missing the command runs as it is (the
// server's sandbox says what confines it).
func runNarrowed(cmd *exec.Cmd, writable []string) error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		if err := narrow(writable); err != nil {
			started <- err
			return
		}
		started <- cmd.Start()
	}()
	if err := <-started; err != nil {
		return err
	}
	return cmd.Wait()
}

// narrow applies the domain to the calling thread.
func narrow(writable []string) error {
	var dirs []string
	for _, p := range writable {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			dirs = append(dirs, p)
		}
	}
	cfg := landlock.Config{HandledAccessFS: writeRights}.BestEffort()
	fd, flags, err := cfg.NewRulesetFD(
		landlock.PathAccess(writeRights, dirs...),
		landlock.PathAccess(ll.AccessFSWriteFile|ll.AccessFSTruncate, "/dev/null", "/dev/tty", "/dev/full", "/dev/zero").IgnoreIfMissing(),
	)
	if err != nil || fd < 0 {
		return err // fd < 0: no Landlock on this kernel
	}
	defer func() { _ = unix.Close(fd) }()
	// Set already by the sandbox's helper; needed by a server run
	// without one (sandbox off).
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	return ll.LandlockRestrictSelf(fd, flags)
}

package loader

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/switchboard-mcp/switchboard/host/internal/config"

	"github.com/switchboard-mcp/switchboard/host/internal/sandbox"
	"github.com/switchboard-mcp/switchboard/host/internal/supervisor"
)

// fileID is a file's identity: replacing the file (as editors save) gives
// the path a new one.
type fileID struct{ dev, ino uint64 }

func idOf(path string) (fileID, bool) {
	st, err := os.Stat(path)
	if err != nil {
		return fileID{}, false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{uint64(sys.Dev), uint64(sys.Ino)}, true
}

// hiddenIDs records the files a sandbox covers with a mount: the config,
// an imported .mcp.json (hidden), the lock file and plugin binaries
// (read-only).
func hiddenIDs(cfg *config.Config) map[string]fileID {
	ids := map[string]fileID{}
	for _, p := range append([]string{cfg.File, cfg.MCPJSON, cfg.LockFile()}, cfg.Binaries()...) {
		if id, ok := idOf(p); ok && p != "" {
			ids[p] = id
		}
	}
	return ids
}

// Rehide restarts the confined servers when a hidden file was replaced on
// disk. A sandbox hides the config by mounting an empty file over it; a
// file renamed over the path (an editor's save) is a new file that mount
// does not cover, so sandboxes started before the save could read and
// write it. A fresh start covers the new file. It returns the servers it
// restarted.
func (h *Host) Rehide() []string {
	h.mu.Lock()
	var changed []string
	for p, old := range h.hidden {
		if id, ok := idOf(p); ok && id != old {
			changed = append(changed, p)
			h.hidden[p] = id
		}
	}
	h.mu.Unlock()
	if len(changed) == 0 {
		return nil
	}
	// Landlock keeps the file out of reach of the others anyway.
	return h.restartConfined(func(sb *sandbox.Sandbox) bool { return sees(sb.Policy, changed) })
}

// restartConfined restarts the running servers confined in namespaces
// whose policy matches, and returns their names.
func (h *Host) restartConfined(match func(*sandbox.Sandbox) bool) []string {
	h.mu.Lock()
	cfg := h.cfg
	jobs := make([]job, 0, len(h.jobs))
	for _, j := range h.jobs {
		jobs = append(jobs, j)
	}
	h.mu.Unlock()
	if cfg == nil {
		return nil
	}
	var restarted []string
	for _, j := range jobs {
		sb := sandboxOf(j)
		if sb == nil || !sb.Report().Namespaces || sb.Policy.Mode == sandbox.ModeOff || !match(sb) {
			continue
		}
		e := h.reg.Entry(j.spec.Name)
		if e == nil {
			continue
		}
		// A server with no process (lazy, idle-stopped) gets a fresh
		// sandbox at its next start anyway.
		if srv, ok := e.Server.(*supervisor.Server); ok && srv.Restart() {
			restarted = append(restarted, j.spec.Name)
		}
	}
	return restarted
}

// sees reports whether a policy grants a path that holds one of files.
func sees(p sandbox.Policy, files []string) bool {
	for _, f := range files {
		for _, g := range append(append([]string{p.State}, p.Write...), p.Read...) {
			if g != "" && (f == g || strings.HasPrefix(f, strings.TrimSuffix(g, "/")+"/")) {
				return true
			}
		}
	}
	return false
}

// PlaceholdersMoved reports whether a .git placeholder this host's
// sandboxes bind is no longer as the host made it (RestorePlaceholders).
func PlaceholdersMoved() bool { return len(movedPlaceholders(false)) > 0 }

// RestorePlaceholders restarts the confined servers that may write a
// folder whose .git placeholder is no longer as the host made it, and
// says which. Only a person can have moved it (it is a mount point in
// every sandbox of this host), to make a repository there (rm .git && git
// init) or just removing it, or a server of another host whose folders
// hold it before that host's sandboxes covered it. The sandboxes then lose their read-only
// bind of it (the kernel takes a mount away with the file under it), so a
// server could make the repository the placeholder is there to prevent. A
// fresh start binds the person's repository read-only (the policy names
// the path whatever it holds), or makes the placeholder again.
func (h *Host) RestorePlaceholders() []MovedPlaceholder {
	var out []MovedPlaceholder
	for _, m := range movedPlaceholders(true) {
		out = append(out, MovedPlaceholder{
			Path: m,
			Servers: h.restartConfined(func(sb *sandbox.Sandbox) bool {
				return bindsPath(sb, m)
			}),
			// Another host's servers may write the folder (one project
			// inside another's): one of them may have moved it (red team
			// round 12).
			OtherHost: otherHostReaches(m),
		})
	}
	return out
}

// MovedPlaceholder is a .git placeholder RestorePlaceholders acted on.
type MovedPlaceholder struct {
	Path      string
	Servers   []string // restarted
	OtherHost string   // how another running host's servers may write it ("" when none can)
}

// CoverOtherHosts restarts the running confined servers whose sandboxes
// do not cover a control-plane file or .git placeholder of another running
// host inside their writable folders (a host started after them, on a
// project inside theirs), and returns their names (othersFiles).
func (h *Host) CoverOtherHosts() []string {
	recs := otherHosts()
	if len(recs) == 0 {
		return nil
	}
	return h.restartConfined(func(sb *sandbox.Sandbox) bool {
		c, ok := sb.Preparer.(*cover)
		return ok && c.uncovered(recs, sb.Policy)
	})
}

// ReprotectGit restarts the running confined servers whose writable
// folders now hold something the person's git runs programs from that
// their sandboxes did not bind when they started: a submodule added, a
// linked work tree, a core.hooksPath set, an include (red team round 13:
// the person's `git submodule add` while the host ran left the new
// submodule's .git file writable, and the agent pointed it at a
// repository of its own). A fresh start binds them (cover.Prepare). It
// returns their names.
func (h *Host) ReprotectGit() []string {
	memo := map[string][]string{}
	protection := func(write []string, gitBuiltin bool) []string {
		key := fmt.Sprint(gitBuiltin, write)
		if ro, ok := memo[key]; ok {
			return ro
		}
		ro, _, _, _ := gitProtection(write, gitBuiltin, false)
		memo[key] = ro
		return ro
	}
	return h.restartConfined(func(sb *sandbox.Sandbox) bool {
		c, ok := sb.Preparer.(*cover)
		return ok && c.gitStale(sb.Policy, protection)
	})
}

// GitFolders lists the git folders of the work trees the confined servers
// may write (each repository's own and common folder, with its modules
// and worktrees folders, and the same of a work tree around a writable
// folder), for a watcher: a change there may add what the person's git
// runs from (ReprotectGit). Folders that do not exist are listed too.
func (h *Host) GitFolders() []string {
	h.mu.Lock()
	jobs := make([]job, 0, len(h.jobs))
	for _, j := range h.jobs {
		jobs = append(jobs, j)
	}
	h.mu.Unlock()
	var out []string
	add := func(top string) {
		gitDir, common := repoDirs(top)
		if gitDir == "" {
			return
		}
		dirs := []string{gitDir, common, filepath.Join(common, "modules"), filepath.Join(common, "worktrees")}
		for _, wt := range linkedWorkTrees(common) {
			dirs = append(dirs, wt.gitDir) // its config.worktree
		}
		for _, d := range dirs {
			if !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	seen := map[string]bool{}
	for _, j := range jobs {
		sb := sandboxOf(j)
		if sb == nil || sb.Policy.Mode == sandbox.ModeOff {
			continue
		}
		for _, w := range sb.Policy.Write {
			if w == "" || seen[w] {
				continue
			}
			seen[w] = true
			add(w)
			if top := outerWorkTree(w); top != "" {
				add(top)
			}
		}
	}
	return out
}

// StopForPlaceholder kills at once the running confined servers whose
// sandboxes bind the .git placeholder at path, which was just removed or
// renamed (a file event): with it went their read-only mount of it, and
// a command waiting for that wrote an fsmonitor into the repository the
// person made next, in the seconds before the restart (red team round
// 12). Killing a sandbox's helper, its PID namespace's init, ends every
// process in it; the supervisor starts the servers again, and
// RestorePlaceholders restarts them once more when it runs. It returns
// their names.
func (h *Host) StopForPlaceholder(path string) []string {
	h.mu.Lock()
	jobs := make([]job, 0, len(h.jobs))
	for _, j := range h.jobs {
		jobs = append(jobs, j)
	}
	h.mu.Unlock()
	var killed []string
	for _, j := range jobs {
		sb := sandboxOf(j)
		if sb == nil || !bindsPath(sb, path) {
			continue
		}
		e := h.reg.Entry(j.spec.Name)
		if e == nil {
			continue
		}
		if srv, ok := e.Server.(*supervisor.Server); ok {
			if pid := srv.PID(); pid > 0 && syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed = append(killed, j.spec.Name)
			}
		}
	}
	return killed
}

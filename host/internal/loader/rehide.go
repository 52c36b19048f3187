package loader

import (
	"os"
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
	cfg := h.cfg
	var changed []string
	for p, old := range h.hidden {
		if id, ok := idOf(p); ok && id != old {
			changed = append(changed, p)
			h.hidden[p] = id
		}
	}
	jobs := make([]job, 0, len(h.jobs))
	for _, j := range h.jobs {
		jobs = append(jobs, j)
	}
	h.mu.Unlock()
	if len(changed) == 0 || cfg == nil {
		return nil
	}
	var restarted []string
	for _, j := range jobs {
		sb := sandboxOf(j)
		if sb == nil || !sb.Report().Namespaces || sb.Policy.Mode == sandbox.ModeOff || !sees(sb.Policy, changed) {
			continue // Landlock keeps the file out of its reach anyway
		}
		e := h.reg.Entry(j.spec.Name)
		if e == nil {
			continue
		}
		if srv, ok := e.Server.(*supervisor.Server); ok {
			srv.Restart()
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

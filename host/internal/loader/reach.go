package loader

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/pluginstore"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/host/internal/sandbox"
)

// ConfigOutOfReach reports whether no running server can have written the
// config file, so that a change to it came from a person and may be
// applied without one (the file watcher). When it is not, reason says
// which server could write it and why, for `status` and the log.
//
// A server is out of reach when it cannot write files at all (a built-in
// whose sandbox policy grants no folder: web), when it runs elsewhere (an
// external server reached over HTTP), or when Landlock confines it and the
// config lies under none of the folders it may write. Hiding the file (the
// sandbox's mount over it) is not enough on its own: replacing the file,
// as editors and `switchboard`'s own tests do, detaches that mount in every
// running sandbox, after which a server that may write the folder sees and
// writes the new file. An external stdio server with its sandbox off is in
// reach when the config lies under its working folder (project_dir).
func (h *Host) ConfigOutOfReach() (ok bool, reason string) {
	h.mu.Lock()
	cfg := h.cfg
	jobs := make([]job, 0, len(h.jobs))
	for _, j := range h.jobs {
		jobs = append(jobs, j)
	}
	h.mu.Unlock()
	slices.SortFunc(jobs, func(a, b job) int { return strings.Compare(a.spec.Name, b.spec.Name) })

	file := cfg.File
	if r, err := filepath.EvalSymlinks(file); err == nil {
		file = r
	}
	for _, j := range jobs {
		if why := reaches(j, file, cfg.ProjectDir); why != "" {
			return false, why
		}
	}
	if why := otherHostReaches(file); why != "" {
		return false, why
	}
	return true, ""
}

// reaches says how the server of job j could write file ("" when it
// cannot).
func reaches(j job, file, projectDir string) string {
	name := j.spec.Name
	if j.ext != nil && j.ext.Command == "" {
		return "" // runs elsewhere
	}
	sb := sandboxOf(j)
	if sb == nil {
		return fmt.Sprintf("%s runs without a sandbox", name)
	}
	p := sb.Policy
	if j.kind == registry.KindBuiltin && len(p.Write) == 0 {
		return "" // web: no file-writing tool, and no folder to write
	}
	// A required sandbox runs in namespaces with Landlock or not at all
	// (its start is refused): what it may write is its policy's, and this
	// machine need not be probed to know it (a namespaced start of a
	// program, while a host with lazy servers starts).
	namespaces := true
	if p.Mode != sandbox.ModeRequired {
		r := sb.Report()
		if r.Mode == sandbox.ModeOff {
			if j.ext != nil {
				if dir := resolved(projectDir); !within(file, dir) {
					return ""
				}
				return fmt.Sprintf("%s runs with sandbox mode \"off\" in %s, which holds %s", name, projectDir, file)
			}
			return fmt.Sprintf("%s runs with sandbox mode \"off\"", name)
		}
		if !r.Confined() || r.Landlock == 0 {
			return fmt.Sprintf("%s is not confined by Landlock here (%s)", name, r)
		}
		namespaces = r.Namespaces
	}
	if namespaces {
		for _, ro := range p.ReadOnly {
			// Bound read-only (configFolderInReach, a plugin binary) when
			// it exists: nothing is bound over a path that does not.
			if _, err := os.Lstat(ro); err == nil && within(file, ro) {
				return ""
			}
		}
	}
	for _, w := range append(slices.Clone(p.Write), p.State) {
		if w != "" && within(file, w) {
			return fmt.Sprintf("%s may write %s, which holds %s", name, w, file)
		}
	}
	return ""
}

func resolved(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

// within reports whether p is at or under dir.
func within(p, dir string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}

// placeholdLock writes an empty lock file beside the config when there is
// none and a server about to start could write one there: a sandbox covers
// only the control-plane files that exist when it starts, so a tool could
// otherwise create a lock file that pins what it likes (a tool surface a
// quarantine would hold back, a binary's hash) for the host's next read
// (found from outside). The empty lock pins nothing, so it changes no
// verdict; `switchboard plugin lock` fills it in. It returns the file it
// made ("" for none), for hide.
func (h *Host) placeholdLock(cfg *config.Config, jobs []job) string {
	return h.placehold(cfg, jobs, cfg.LockFile(), "lock file", func(path string) error {
		return (&pluginstore.Lock{Path: path, Plugins: map[string]*pluginstore.Entry{}}).Write()
	})
}

// placeholdMCPJSON writes an empty .mcp.json (no servers) where the config
// imports one and there is none, when a server about to start could write
// it, as placeholdLock does for the lock file: a .mcp.json a tool created
// would offer its own servers at the next start (found from outside: bash
// wrote one under a computed name, and the server it named ran after one
// approval).
func (h *Host) placeholdMCPJSON(cfg *config.Config, jobs []job) string {
	if cfg.MCPJSON == "" {
		return ""
	}
	return h.placehold(cfg, jobs, cfg.MCPJSON, ".mcp.json", func(path string) error {
		//nolint:gosec // a project file that other tools read, like the .mcp.json a person writes
		return os.WriteFile(path, []byte("{\"mcpServers\": {}}\n"), 0o644)
	})
}

// placehold makes the control-plane file at path with write when it does
// not exist and one of jobs could write it, so that every sandbox covers
// it, and returns it ("" when it made none).
func (h *Host) placehold(cfg *config.Config, jobs []job, path, what string, write func(string) error) string {
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	file := filepath.Join(resolved(filepath.Dir(path)), filepath.Base(path))
	why := ""
	for _, j := range jobs {
		if why = reaches(j, file, cfg.ProjectDir); why != "" {
			break
		}
	}
	if why == "" {
		return ""
	}
	if err := write(path); err != nil {
		h.log.Warn("no "+what+", and an empty one could not be made: a tool could create one", "file", path, "because", why, "error", err)
		return ""
	}
	h.log.Info("made an empty "+what+" so that no tool can create one", "file", path, "because", why)
	return path
}

// hide watches the control-plane files made by placehold like the others
// (h.hidden, Rehide). The caller holds h.mu.
func (h *Host) hide(paths ...string) {
	for _, p := range paths {
		if id, ok := idOf(p); ok && p != "" {
			h.hidden[p] = id
		}
	}
}

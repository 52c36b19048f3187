package loader

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"github.com/switchboard-mcp/switchboard/host/internal/config"
)

// Every running host records, in the state folders (hidden in every
// sandbox), the folders its servers may write. A host applies a changed
// config file without a person only when no server can have written it,
// and its own servers are not the only ones: another host's, on the same
// project with another config, rewrote the file and this host applied it
// by itself (red team round 5). ConfigOutOfReach reads the records.

// hostRecord is one running host's record.
type hostRecord struct {
	PID      int      `json:"pid"`
	Config   string   `json:"config"`
	Writable []string `json:"writable"`
}

func recordPaths() []string {
	var out []string
	for _, r := range config.StateRoots() {
		out = append(out, filepath.Join(r, "hosts", strconv.Itoa(os.Getpid())+".json"))
	}
	return out
}

// publish writes this host's record (at start and after a reload): in
// every state folder, so that hosts with another XDG_STATE_HOME read it.
func (h *Host) publish() {
	h.mu.Lock()
	cfg := h.cfg
	rec := hostRecord{PID: os.Getpid(), Config: cfg.File}
	for _, j := range h.jobs {
		if j.ext != nil && j.ext.Command == "" {
			continue // runs elsewhere
		}
		if sb := sandboxOf(j); sb != nil {
			for _, w := range append(slices.Clone(sb.Policy.Write), sb.Policy.State) {
				if w != "" && !slices.Contains(rec.Writable, resolved(w)) {
					rec.Writable = append(rec.Writable, resolved(w))
				}
			}
		}
	}
	h.mu.Unlock()
	slices.Sort(rec.Writable)
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	for _, p := range recordPaths() {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			continue
		}
		tmp := p + ".tmp"
		if os.WriteFile(tmp, b, 0o600) == nil {
			_ = os.Rename(tmp, p)
		}
	}
}

// ForgetHost removes this host's record: at its exit.
func ForgetHost() {
	for _, p := range recordPaths() {
		_ = os.Remove(p)
	}
}

// otherHosts reads the records of the other hosts that still run,
// removing those of hosts that are gone.
func otherHosts() []hostRecord {
	var out []hostRecord
	seen := map[int]bool{os.Getpid(): true}
	for _, root := range config.StateRoots() {
		dir := filepath.Join(root, "hosts")
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			b, err := os.ReadFile(p)
			if err != nil || len(b) > 1<<20 {
				continue
			}
			var r hostRecord
			if json.Unmarshal(b, &r) != nil || r.PID <= 0 || seen[r.PID] {
				continue
			}
			if err := syscall.Kill(r.PID, 0); err == syscall.ESRCH {
				_ = os.Remove(p)
				continue
			}
			seen[r.PID] = true
			out = append(out, r)
		}
	}
	return out
}

// otherHostReaches says how another running host's servers could write
// file ("" when none can).
func otherHostReaches(file string) string {
	for _, r := range otherHosts() {
		for _, w := range r.Writable {
			if within(file, w) {
				return fmt.Sprintf("the servers of another host on this machine (pid %d, config %s) may write %s, which holds %s", r.PID, r.Config, w, file)
			}
		}
	}
	return ""
}

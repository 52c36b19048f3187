package loader

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

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
	// Control lists the host's control-plane files (its config, lock
	// file, imported .mcp.json), and Placeholders its .git placeholders:
	// another host's sandboxes hide the first and bind the second
	// read-only where they fall inside its writable folders (othersFiles).
	Control      []string `json:"control,omitempty"`
	Placeholders []string `json:"placeholders,omitempty"`
	// Binaries lists what the host runs: its own binary, its plugins'
	// (and their folders, plugin_dirs), bound read-only likewise (the
	// outer host's bash renamed the inner host's plugin binary aside and
	// put its own in place, which ran at that host's next start: red team
	// round 12).
	Binaries []string  `json:"binaries,omitempty"`
	Gone     time.Time `json:"gone,omitzero"` // when the host stopped
}

// recordLinger is how long a stopped host's record still counts: a
// server's last write, made while its host stopped (a job's SIGTERM trap),
// reached another host's watcher after the record was gone, and that host
// applied it (red team round 6).
const recordLinger = 10 * time.Second

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
	for _, f := range []string{cfg.File, cfg.LockFile(), cfg.MCPJSON} {
		if f != "" {
			rec.Control = append(rec.Control, resolved(f))
		}
	}
	rec.Binaries = cfg.Binaries()
	if self, err := os.Executable(); err == nil {
		rec.Binaries = append(rec.Binaries, resolved(self))
	}
	h.mu.Unlock()
	placeholders.Lock()
	for p, ph := range placeholders.paths {
		if !ph.foreign {
			rec.Placeholders = append(rec.Placeholders, p)
		}
	}
	placeholders.Unlock()
	slices.Sort(rec.Writable)
	slices.Sort(rec.Placeholders)
	h.writeRecord(rec)
}

// othersFiles lists the other running hosts' control-plane files (hide)
// and .git placeholders and binaries (readOnly) inside the folders of write: a server
// of this host that may write another host's project wrote that host's
// config (applied at its next start) and filled its placeholder (red team
// round 11, with one project inside the other). They are covered at each
// start of a sandbox (sandbox.Sandbox.Prepare), and a change of them
// restarts the servers that may write them (CoverOtherHosts).
func othersFiles(write []string) (hide, readOnly, placeholders []string) {
	return filesOf(otherHosts(), write)
}

// filesOf is othersFiles for the hosts of recs; placeholders are the
// .git placeholders among readOnly.
func filesOf(recs []hostRecord, write []string) (hide, readOnly, placeholders []string) {
	in := func(f string) bool {
		for _, w := range write {
			if w != "" && within(f, w) {
				return true
			}
		}
		return false
	}
	for _, r := range recs {
		for _, f := range r.Control {
			if in(f) && !slices.Contains(hide, f) {
				hide = append(hide, f)
			}
		}
		for _, f := range append(slices.Clone(r.Placeholders), r.Binaries...) {
			if in(f) && !slices.Contains(readOnly, f) {
				readOnly = append(readOnly, f)
			}
		}
		for _, f := range r.Placeholders {
			if in(f) && !slices.Contains(placeholders, f) {
				placeholders = append(placeholders, f)
			}
		}
	}
	slices.Sort(hide)
	slices.Sort(readOnly)
	return hide, readOnly, placeholders
}

// ownRecord is this process's record as last written; stopped is set once
// the host has stopped (its record is not published again).
var ownRecord struct {
	sync.Mutex
	rec     hostRecord
	stopped bool
}

func (h *Host) writeRecord(rec hostRecord) {
	ownRecord.Lock()
	defer ownRecord.Unlock()
	if ownRecord.stopped {
		return
	}
	ownRecord.rec = rec
	writeRecordFiles(rec)
}

func writeRecordFiles(rec hostRecord) {
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

// ForgetHost marks this host's record as that of a stopped host (at its
// exit, once its servers have stopped): it counts for recordLinger more,
// then the next host to read it removes it.
func ForgetHost() {
	ownRecord.Lock()
	defer ownRecord.Unlock()
	if ownRecord.stopped || ownRecord.rec.PID == 0 {
		ownRecord.stopped = true
		return
	}
	ownRecord.stopped = true
	rec := ownRecord.rec
	rec.Gone = time.Now()
	writeRecordFiles(rec)
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
			switch {
			case !r.Gone.IsZero():
				if time.Since(r.Gone) > recordLinger {
					_ = os.Remove(p)
					continue
				}
			case syscall.Kill(r.PID, 0) == syscall.ESRCH:
				// Killed: its servers died with it (their parent-death
				// signal).
				_ = os.Remove(p)
				continue
			}
			seen[r.PID] = true
			out = append(out, r)
		}
	}
	return out
}

// OtherHostReaches says how another running host's servers could write
// file ("" when none can).
func OtherHostReaches(file string) string { return otherHostReaches(resolved(file)) }

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

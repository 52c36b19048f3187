package pluginstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/switchboard-mcp/switchboard/host/internal/approvals"
)

// KindSurface is the approvals kind of a server's tool surface approved
// by a person (or first seen) when the lock file does not pin it.
const KindSurface approvals.Kind = "surface"

// SurfacesDir is the folder in data_dir that keeps each server's approved
// surface (NAME.json) and the one waiting for approval
// (NAME.pending.json), so `switchboard approve` can show the difference.
const SurfacesDir = "surfaces"

// gateMu serialises the gate's read-modify-write of the approvals and
// surface files within this process.
var gateMu sync.Mutex

// ErrQuarantined is wrapped by every QuarantineError.
var ErrQuarantined = errors.New("pluginstore: quarantined")

// QuarantineError is a server held back because its tool surface differs
// from the one locked or approved.
type QuarantineError struct {
	Name string
	// Against is what it was compared with: the lock file, or "the surface
	// approved in DATA_DIR".
	Against   string
	Want, Got string
}

func (e *QuarantineError) Error() string {
	return fmt.Sprintf("quarantined: its surface changed (tool names, descriptions, schemas or annotations, or its instructions) since %s (%s, now %s); its tools are hidden until a person runs `switchboard approve %s`, which shows the difference",
		e.Against, e.Want, e.Got, e.Name)
}

// Is makes errors.Is(err, ErrQuarantined) true.
func (e *QuarantineError) Is(target error) bool { return target == ErrQuarantined }

// HeldBack says a person must act before the server runs again (see
// supervisor.HeldBack): a restart does not retry it.
func (e *QuarantineError) HeldBack() bool { return true }

// Gate decides whether a server's tool surface may be served: the one the
// lock file pins, else the one a person approved, else (the first time a
// server is seen) the one it has now, which is recorded as approved.
type Gate struct {
	LockFile string
	DataDir  string
}

func (g Gate) surfacePath(name string, pending bool) string {
	if pending {
		return filepath.Join(g.DataDir, SurfacesDir, name+".pending.json")
	}
	return filepath.Join(g.DataDir, SurfacesDir, name+".json")
}

// Snapshot is what a Gate holds surfaces to, read once: the lock's
// surfaces and the approved ones. A host listing many servers from their
// cached manifests asks it about each without reading the files again.
type Snapshot struct {
	locked   map[string]string // server name -> locked surface hash
	approved map[string]string // server name -> approved surface hash
}

// Snapshot reads the lock file and the approvals once. An unreadable file
// is an error (it lets nothing through).
func (g Gate) Snapshot() (*Snapshot, error) {
	lock, _, err := ReadLock(g.LockFile)
	if err != nil {
		return nil, err
	}
	sn := &Snapshot{locked: map[string]string{}}
	for name, e := range lock.Plugins {
		if e != nil && e.Surface != "" {
			sn.locked[name] = e.Surface
		}
	}
	if sn.approved, err = approvals.Open(g.DataDir).Granted(KindSurface); err != nil {
		return nil, err
	}
	return sn, nil
}

// Holds reports whether s would be held back (Check would quarantine it):
// the lock names another surface for the server, or, when the lock names
// none, another was approved. A server neither knows is not held (its
// start records it, as Check does). It records nothing.
func (sn *Snapshot) Holds(name string, s Surface) bool { return sn.HoldsHash(name, s.Hash()) }

// HoldsHash is Holds for a surface known by its hash (Surface.Hash).
func (sn *Snapshot) HoldsHash(name, got string) bool {
	if want, ok := sn.locked[name]; ok {
		return want != got
	}
	if want, ok := sn.approved[name]; ok {
		return want != got
	}
	return false
}

// Check compares a server's surface with the locked or approved one. It
// returns a *QuarantineError when they differ (and keeps the new surface
// for `approve`), another error when the lock or approvals file cannot be
// read (which lets nothing through).
func (g Gate) Check(name string, s Surface) error {
	// Servers start in parallel: one first-sight record must not overwrite
	// another's.
	gateMu.Lock()
	defer gateMu.Unlock()
	got := s.Hash()
	lock, _, err := ReadLock(g.LockFile)
	if err != nil {
		return err
	}
	if e := lock.Plugins[name]; e != nil && e.Surface != "" {
		if e.Surface == got {
			_ = g.save(name, s, false)
			_ = os.Remove(g.surfacePath(name, true))
			return nil
		}
		_ = g.save(name, s, true)
		return &QuarantineError{Name: name, Against: "it was locked in " + g.LockFile, Want: e.Surface, Got: got}
	}
	store := approvals.Open(g.DataDir)
	err = store.Check(KindSurface, name, got)
	var pe *approvals.PendingError
	switch {
	case err == nil:
		_ = os.Remove(g.surfacePath(name, true))
		if _, serr := os.Stat(g.surfacePath(name, false)); serr != nil {
			_ = g.save(name, s, false)
		}
		return nil
	case errors.As(err, &pe) && !pe.Changed:
		// First sight: this surface is the one later ones are held to.
		if _, err := store.Approve(KindSurface, name, got); err != nil {
			return err
		}
		return g.save(name, s, false)
	case errors.As(err, &pe):
		_ = g.save(name, s, true)
		return &QuarantineError{Name: name, Against: "it was first approved (" + store.Path() + ")", Want: g.approvedHash(name), Got: got}
	default:
		return err
	}
}

func (g Gate) approvedHash(name string) string {
	if s, err := g.Saved(name, false); err == nil {
		return s.Hash()
	}
	return "an earlier surface"
}

func (g Gate) save(name string, s Surface, pending bool) error {
	if err := os.MkdirAll(filepath.Join(g.DataDir, SurfacesDir), 0o700); err != nil {
		return err
	}
	return writeAtomic(g.surfacePath(name, pending), s.JSON(), 0o600)
}

// Record keeps s as the approved surface of name in data_dir (so a later
// change can be shown as a difference), as `plugin lock` does for what it
// locks.
func (g Gate) Record(name string, s Surface) error {
	_ = os.Remove(g.surfacePath(name, true))
	return g.save(name, s, false)
}

// Saved reads a server's approved (or pending) surface from data_dir.
func (g Gate) Saved(name string, pending bool) (Surface, error) {
	b, err := os.ReadFile(g.surfacePath(name, pending))
	if err != nil {
		return nil, err
	}
	return ParseSurface(b)
}

// Approval is what Approve did.
type Approval struct {
	Name string
	// Diff is the unified diff from the approved to the new surface ("" when
	// the approved one is not kept here).
	Diff string
	// Locked is set when the lock file was updated (else the approvals
	// file in data_dir).
	Locked bool
	Hash   string
}

// ErrNothingPending is returned by Approve for a server with no
// quarantined surface.
var ErrNothingPending = errors.New("pluginstore: no quarantined surface")

// Approve releases a quarantined server: its pending surface becomes the
// approved one, in the lock file when the lock pins the server's surface,
// else in data_dir.
func (g Gate) Approve(name string) (*Approval, error) {
	gateMu.Lock()
	defer gateMu.Unlock()
	cur, err := g.Saved(name, true)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s has no quarantined tool surface in %s", ErrNothingPending, name, filepath.Join(g.DataDir, SurfacesDir))
	}
	if err != nil {
		return nil, err
	}
	a := &Approval{Name: name, Hash: cur.Hash()}
	if old, err := g.Saved(name, false); err == nil {
		a.Diff = Diff("approved", old, "now", cur)
	}
	lock, _, err := ReadLock(g.LockFile)
	if err != nil {
		return nil, err
	}
	if e := lock.Plugins[name]; e != nil && e.Surface != "" {
		e.Surface = a.Hash
		if err := lock.Write(); err != nil {
			return nil, err
		}
		a.Locked = true
	} else if _, err := approvals.Open(g.DataDir).Approve(KindSurface, name, a.Hash); err != nil {
		return nil, err
	}
	if err := g.save(name, cur, false); err != nil {
		return nil, err
	}
	_ = os.Remove(g.surfacePath(name, true))
	return a, nil
}

// Package approvals is where the host asks a person, and remembers what
// they said. It holds the two kinds of approval the host needs:
//
// Calls. A call whose verdict is Ask (registry.Policy) runs only after a
// person approved it. The registry evaluates the policy once per call and
// hands such a call to the registry.Approver in the call's context; the
// front ends put an *Approver there (NewApprover), which asks through an
// Asker (Elicitation for MCP clients, Terminal or Fixed for the CLI),
// stores "always" answers through the policy (Remember, which saves them
// to data_dir/permissions.json beside the rules they extend), and refuses
// the call when nobody can be asked.
//
// Servers. A thing an agent could have written (a server entry in
// .mcp.json) runs only after a person approved it, and again only after a
// person approved its changes. These approvals live in
// data_dir/approvals.json (0600, written atomically, refused when another
// user owns it or could write it), keyed by kind and name, each holding the
// SHA-256 of what was approved. A Store reads the file on every question,
// so an approval given by `switchboard approve` counts in every host on the
// data directory at its next reload. A client that can elicit is asked
// about them too (ServerQuestion, ServerApproved).
package approvals

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/switchboard-mcp/switchboard/host/internal/strictmode"
)

// File is the approvals file in data_dir.
const File = "approvals.json"

// Kind names what an approval is for.
type Kind string

// Kinds.
const (
	// KindMCPJSON is a server entry of an imported .mcp.json.
	KindMCPJSON Kind = "mcp_json"
)

// Errors.
var (
	// ErrPending is wrapped by every PendingError, for errors.Is.
	ErrPending = errors.New("approvals: awaiting approval")
)

// PendingError says that a server waits for a person's approval and how
// to give it.
type PendingError struct {
	Name string
	// Changed is set when an earlier version was approved.
	Changed bool
}

func (e *PendingError) Error() string {
	if e.Changed {
		return fmt.Sprintf("awaiting approval: changed since it was approved; run `switchboard approve %s`", e.Name)
	}
	return fmt.Sprintf("awaiting approval: run `switchboard approve %s`", e.Name)
}

// Is makes errors.Is(err, ErrPending) true.
func (e *PendingError) Is(target error) bool { return target == ErrPending }

// Entry is what an approval of a .mcp.json server covers: everything that
// decides what runs and where it connects.
type Entry struct {
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// Files are the SHA-256 of the files in the project its command line
	// names (the command, a script it runs): editing one is a change.
	Files map[string]string `json:"files,omitempty"`
}

// Hash is the SHA-256 (hex) of the entry's canonical JSON: fixed field
// order, map keys sorted (encoding/json sorts them), nil and empty alike.
func (e Entry) Hash() string {
	if len(e.Args) == 0 {
		e.Args = nil
	}
	if len(e.Env) == 0 {
		e.Env = nil
	}
	if len(e.Headers) == 0 {
		e.Headers = nil
	}
	if len(e.Files) == 0 {
		e.Files = nil
	}
	b, err := json.Marshal(e)
	if err != nil {
		panic(err) // strings only: cannot fail
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// stored is the file's shape.
type stored struct {
	Version int                        `json:"version"`
	Granted map[Kind]map[string]string `json:"granted"`
}

// Store is the approvals of one data directory. It is safe for
// concurrent use; writes from several processes merge (last writer of a
// name wins).
type Store struct {
	mu   sync.Mutex
	path string
}

// Open returns the store of dataDir (the file need not exist).
func Open(dataDir string) *Store {
	return &Store{path: filepath.Join(dataDir, File)}
}

// Path is the file the store reads and writes.
func (s *Store) Path() string { return s.path }

func (s *Store) read() (stored, error) {
	st := stored{Version: 1, Granted: map[Kind]map[string]string{}}
	b, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("approvals: %w", err)
	}
	// Another user able to write the file could approve anything.
	if err := strictmode.Check(s.path); err != nil {
		return st, fmt.Errorf("approvals: %s refused: %w", s.path, err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("approvals: %s is not valid JSON (%v); fix or delete the file", s.path, err)
	}
	if st.Granted == nil {
		st.Granted = map[Kind]map[string]string{}
	}
	return st, nil
}

// Granted returns the hashes approved for kind, by name (a copy; empty
// when the file does not exist). It changes nothing.
func (s *Store) Granted(kind Kind) (map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.read()
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(st.Granted[kind]))
	for name, hash := range st.Granted[kind] {
		out[name] = hash
	}
	return out, nil
}

// Check reports whether name (of kind) is approved with this hash. A name
// approved with another hash is a *PendingError with Changed set; an
// unreadable or unsafe file approves nothing and is returned as is.
func (s *Store) Check(kind Kind, name, hash string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.read()
	if err != nil {
		return err
	}
	got, ok := st.Granted[kind][name]
	switch {
	case ok && got == hash:
		return nil
	case ok:
		return &PendingError{Name: name, Changed: true}
	default:
		return &PendingError{Name: name}
	}
}

// Approve records that name (of kind) is approved with hash, replacing an
// earlier approval of the name. It reports whether that was news.
func (s *Store) Approve(kind Kind, name, hash string) (changed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return false, fmt.Errorf("approvals: %w", err)
	}
	st, err := s.read()
	if err != nil {
		return false, err
	}
	if st.Granted[kind][name] == hash {
		return false, nil
	}
	if st.Granted[kind] == nil {
		st.Granted[kind] = map[string]string{}
	}
	st.Granted[kind][name] = hash
	st.Version = 1
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return false, err
	}
	return true, writeAtomic(s.path, append(b, '\n'))
}

// writeAtomic replaces path with b (mode 0600) through a temporary file
// in the same folder.
func writeAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".approvals-*.json")
	if err != nil {
		return fmt.Errorf("approvals: saving: %w", err)
	}
	name := tmp.Name()
	fail := func(err error) error {
		_ = tmp.Close()
		_ = os.Remove(name)
		return fmt.Errorf("approvals: saving: %w", err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		return fail(err)
	}
	if _, err := tmp.Write(b); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		_ = os.Remove(name)
		return fmt.Errorf("approvals: saving: %w", err)
	}
	if err := os.Rename(name, path); err != nil {
		_ = os.Remove(name)
		return fmt.Errorf("approvals: saving: %w", err)
	}
	return nil
}

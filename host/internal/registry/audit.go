package registry

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// AuditRecord is one line of audit.jsonl.
type AuditRecord struct {
	Time       time.Time `json:"time"`
	Client     string    `json:"client"`
	Tool       string    `json:"tool"`
	ArgsSHA256 string    `json:"args_sha256"`
	ArgsSize   int       `json:"args_size"`
	// Decision is allow, deny, ask, approved, invalid, unknown or duplicate.
	Decision   string  `json:"decision"`
	Rule       string  `json:"rule,omitempty"`
	DurationMS float64 `json:"duration_ms"`
	// Outcome is ok, tool_error, refused, or error.
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
}

// Audit appends records to a file, one JSON line each, written with a
// single write so a clean shutdown loses nothing. The file is rotated to
// FILE.1 … FILE.keep when it grows past maxBytes.
type Audit struct {
	mu       sync.Mutex
	path     string
	f        *os.File
	size     int64
	maxBytes int64
	keep     int
}

// OpenAudit opens (appends to) the audit log at path.
func OpenAudit(path string, maxBytes int64, keep int) (*Audit, error) {
	a := &Audit{path: path, maxBytes: maxBytes, keep: keep}
	if err := a.open(); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Audit) open() error {
	f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("registry: opening audit log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	a.f, a.size = f, st.Size()
	return nil
}

// Write appends one record.
func (a *Audit) Write(r AuditRecord) error {
	if a == nil {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return fmt.Errorf("registry: audit log is closed")
	}
	if a.maxBytes > 0 && a.size+int64(len(b)) > a.maxBytes && a.size > 0 {
		if err := a.rotate(); err != nil {
			return err
		}
	}
	n, err := a.f.Write(b)
	a.size += int64(n)
	return err
}

func (a *Audit) rotate() error {
	if err := a.f.Close(); err != nil {
		return err
	}
	for i := a.keep; i >= 1; i-- {
		src := a.path
		if i > 1 {
			src = fmt.Sprintf("%s.%d", a.path, i-1)
		}
		_ = os.Rename(src, fmt.Sprintf("%s.%d", a.path, i))
	}
	if a.keep <= 0 {
		_ = os.Remove(a.path)
	}
	return a.open()
}

// Close syncs and closes the log; it may be called more than once.
func (a *Audit) Close() error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	err := a.f.Sync()
	if cerr := a.f.Close(); err == nil {
		err = cerr
	}
	a.f = nil
	return err
}

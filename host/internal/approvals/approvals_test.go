package approvals

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestHashCoversEveryField(t *testing.T) {
	base := Entry{Command: "npx", Args: []string{"-y", "srv"}, Env: map[string]string{"A": "1"}}
	tests := []struct {
		name string
		e    Entry
		same bool
	}{
		{"identical", Entry{Command: "npx", Args: []string{"-y", "srv"}, Env: map[string]string{"A": "1"}}, true},
		{"command", Entry{Command: "npm", Args: []string{"-y", "srv"}, Env: map[string]string{"A": "1"}}, false},
		{"args", Entry{Command: "npx", Args: []string{"-y", "srv2"}, Env: map[string]string{"A": "1"}}, false},
		{"args split differently", Entry{Command: "npx", Args: []string{"-y srv"}, Env: map[string]string{"A": "1"}}, false},
		{"env", Entry{Command: "npx", Args: []string{"-y", "srv"}, Env: map[string]string{"A": "2"}}, false},
		{"headers", Entry{Command: "npx", Args: []string{"-y", "srv"}, Env: map[string]string{"A": "1"}, Headers: map[string]string{"X": "y"}}, false},
		{"url", Entry{Command: "npx", Args: []string{"-y", "srv"}, Env: map[string]string{"A": "1"}, URL: "http://x"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.e.Hash() == base.Hash(); got != tt.same {
				t.Errorf("Hash(%+v) == Hash(%+v) is %v, want %v", tt.e, base, got, tt.same)
			}
		})
	}
	if (Entry{Command: "x", Args: []string{}}).Hash() != (Entry{Command: "x"}).Hash() {
		t.Error("empty and nil args hash differently")
	}
}

func TestStoreApproveAndCheck(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := Open(dir)
	var pending *PendingError
	if err := s.Check(KindMCPJSON, "srv", "h1"); !errors.As(err, &pending) || pending.Changed || !errors.Is(err, ErrPending) {
		t.Fatalf("Check before approval = %v, want a new PendingError", err)
	}
	if changed, err := s.Approve(KindMCPJSON, "srv", "h1"); err != nil || !changed {
		t.Fatalf("Approve = %v, %v", changed, err)
	}
	if changed, err := s.Approve(KindMCPJSON, "srv", "h1"); err != nil || changed {
		t.Fatalf("second Approve = %v, %v, want no change", changed, err)
	}
	// Another process (a second Store) sees it.
	if err := Open(dir).Check(KindMCPJSON, "srv", "h1"); err != nil {
		t.Errorf("Check after approval = %v", err)
	}
	if err := s.Check(KindMCPJSON, "srv", "h2"); !errors.As(err, &pending) || !pending.Changed {
		t.Errorf("Check of a changed entry = %v, want a changed PendingError", err)
	}
	st, err := os.Stat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", s.Path(), st.Mode().Perm())
	}
}

func TestStoreRefusesAFileOthersCanWrite(t *testing.T) {
	dir := t.TempDir()
	s := Open(dir)
	if _, err := s.Approve(KindMCPJSON, "srv", "h1"); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(s.Path(), 0o666); err != nil {
		t.Fatal(err)
	}
	err := s.Check(KindMCPJSON, "srv", "h1")
	if err == nil || errors.Is(err, ErrPending) {
		t.Errorf("Check of a world-writable file = %v, want a refusal", err)
	}
}

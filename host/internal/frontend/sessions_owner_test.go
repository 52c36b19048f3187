package frontend

import "testing"

// TestCallerCannotEvictAnothersSessions: with authenticated callers, a full
// host ends only the asking caller's own idle sessions, and one caller may
// hold at most half the cap (found from outside: a read-only caller's
// flood of initializes ended every other caller's sessions).
func TestCallerCannotEvictAnothersSessions(t *testing.T) {
	s := &sessionIDs{max: 4}
	alice := s.Generate()
	s.claim(alice, "alice")
	var mallory []string
	for i := 0; i < 3; i++ {
		id := s.Generate()
		s.claim(id, "mallory")
		mallory = append(mallory, id)
	}
	// Full: mallory may only end its own.
	full, victim := s.full("mallory")
	if !full || victim == alice || victim == "" {
		t.Fatalf("full(mallory) = %v, %q; want full, one of mallory's own %v", full, victim, mallory)
	}
	// Control: without authentication the oldest idle session goes,
	// whoever started it (alice's, the oldest).
	if _, v := s.full(""); v != alice {
		t.Errorf("control: full(\"\") victim %q, want alice's %q (the oldest)", v, alice)
	}
	// Half the cap: with room left, mallory (3 of 4... over half) is full
	// for itself while alice is not.
	s.Terminate(mallory[0])
	if full, _ := s.full("mallory"); !full {
		t.Error("mallory holds 2 of 4 sessions (half the cap) and may open another")
	}
	if full, _ := s.full("alice"); full {
		t.Error("alice, with one session, may not open another though the host has room")
	}
}

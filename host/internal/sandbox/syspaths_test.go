//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// resetSystemPaths empties the cache of systemPaths.
func resetSystemPaths() {
	sysPaths.Lock()
	sysPaths.parents, sysPaths.paths = nil, nil
	sysPaths.Unlock()
}

// The system paths are resolved once, and again when a folder that holds
// one of them changes: a file created there, or replaced by a link.
func TestSystemPathsFollowTheirFolders(t *testing.T) {
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	for _, f := range []string{a, c} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	saved := systemReadPaths
	systemReadPaths = []string{a, b}
	resetSystemPaths()
	t.Cleanup(func() { systemReadPaths = saved; resetSystemPaths() })
	// A change shows as the folder's new times; set them apart from the
	// cached ones, whatever the clock's granularity.
	touched := time.Unix(1_000_000_000, 0)
	touch := func() {
		touched = touched.Add(time.Hour)
		if err := os.Chtimes(dir, touched, touched); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string, want ...string) {
		t.Helper()
		if got := systemPaths(); !slices.Equal(got, want) {
			t.Errorf("%s: systemPaths() = %q, want %q", when, got, want)
		}
	}
	check("at first", a)
	if err := os.WriteFile(b, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	touch()
	check("once b exists", a, b)
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(c, a); err != nil {
		t.Fatal(err)
	}
	touch()
	check("once a links to c", c, b)
	// Unchanged folders: the cached list, even when a file's content
	// changes (a grant is a path, not what it holds).
	if err := os.WriteFile(b, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	check("unchanged", c, b)
}

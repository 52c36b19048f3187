package confine

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// TestDirEntries: a Dir lists what os.ReadDir lists, names and types
// (directory, file, symlink, FIFO), in name order, less the protected
// entries; Sub opens a subdirectory and refuses a symlink to one and a
// protected folder.
func TestDirEntries(t *testing.T) {
	l := newLayout(t)
	for _, d := range []string{"sub", "sub/inner", "b-dir"} {
		if err := os.MkdirAll(filepath.Join(l.root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("sub", filepath.Join(l.root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(l.root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := l.r.OpenDir(l.osRoot, ".")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got, err := d.Entries()
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(l.root)
	if err != nil {
		t.Fatal(err)
	}
	var want []Entry
	for _, e := range ents {
		if e.Name() == "config.hcl" { // protected
			continue
		}
		want = append(want, Entry{Name: e.Name(), Type: e.Type()})
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Entries = %v, want %v", got, want)
	}
	sub, err := d.Sub("sub")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if inner, err := sub.Entries(); err != nil || len(inner) != 1 || inner[0] != (Entry{Name: "inner", Type: os.ModeDir}) {
		t.Errorf("sub's entries = %v, %v; want inner/", inner, err)
	}
	if _, err := d.Sub("link"); err == nil {
		t.Error("Sub followed a symlink")
	}
	if s, err := d.Sub("state"); err != nil {
		t.Fatal(err)
	} else {
		defer s.Close()
		if _, err := s.Sub("data"); err == nil {
			t.Error("Sub opened the protected data dir")
		}
		if ents, _ := s.Entries(); len(ents) != 0 {
			t.Errorf("the protected data dir is listed: %v", ents)
		}
	}
}

// TestDirUseAfterClose: once closed, a Dir refuses every use instead of
// acting on a descriptor whose number the process may have reused.
func TestDirUseAfterClose(t *testing.T) {
	l := newLayout(t)
	d, err := l.r.OpenDir(l.osRoot, "state")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := d.Sub("data")
	if err == nil {
		sub.Close()
		t.Fatal("Sub opened the protected data dir")
	}
	if err := os.Mkdir(filepath.Join(l.root, "state", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	sub, err = d.Sub("x")
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	// The number is free again: something else takes it.
	f, err := os.Open(l.root)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := sub.Entries(); !errors.Is(err, errDirClosed) {
		t.Errorf("Entries after Close: %v", err)
	}
	if _, err := sub.Sub("state"); !errors.Is(err, errDirClosed) {
		t.Errorf("Sub after Close: %v", err)
	}
	if _, err := sub.OpenFile("open.txt"); !errors.Is(err, errDirClosed) {
		t.Errorf("OpenFile after Close: %v", err)
	}
	if err := sub.Close(); !errors.Is(err, errDirClosed) {
		t.Errorf("a second Close: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

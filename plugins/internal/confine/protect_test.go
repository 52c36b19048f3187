package confine

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// layout is a root holding the host's control plane, as in the default
// layout: a config file at the top and a data dir two folders down.
type layout struct {
	root, config, data, perms string
	r                         *Roots
	osRoot                    *os.Root
}

func newLayout(t testing.TB) layout {
	t.Helper()
	base, _ := filepath.EvalSymlinks(t.TempDir())
	l := layout{root: filepath.Join(base, "project")}
	l.config = filepath.Join(l.root, "config.hcl")
	l.data = filepath.Join(l.root, "state", "data")
	l.perms = filepath.Join(l.data, "permissions.json")
	for p, content := range map[string]string{l.config: "config", l.perms: "perms", filepath.Join(l.root, "open.txt"): "open"} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if l.r, err = New(l.root); err != nil {
		t.Fatal(err)
	}
	l.r.Protect(l.config, l.data, filepath.Join(l.root, "missing.lock"))
	if l.osRoot, err = os.OpenRoot(l.root); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.osRoot.Close() })
	return l
}

// open opens rel through the root as the plugins do and reports the
// verdict.
func (l layout) open(rel string) error {
	f, err := l.r.OpenFile(l.osRoot, rel, os.O_RDONLY, 0)
	if err == nil {
		f.Close()
	}
	return err
}

func TestProtectResolveAndCovers(t *testing.T) {
	l := newLayout(t)
	for _, p := range []string{"config.hcl", "state/data", "state/data/permissions.json", "state/data/new", "missing.lock", "./state/../config.hcl"} {
		_, err := l.r.Resolve(p)
		if !errors.Is(err, ErrProtected) || !errors.Is(err, ErrOutside) {
			t.Errorf("Resolve(%q) = %v, want ErrProtected (and ErrOutside)", p, err)
		}
	}
	for _, p := range []string{".", "state", "open.txt", "config.hcl.bak"} {
		if _, err := l.r.Resolve(p); err != nil {
			t.Errorf("Resolve(%q) = %v, want allowed", p, err)
		}
	}
	for _, tt := range []struct {
		rel     string
		refused bool
	}{
		{"state", true}, {"state/data", true}, {".", true}, {"missing.lock", true}, {"open.txt", false}, {"stat", false},
	} {
		err := l.r.Covers(filepath.Join(l.root, tt.rel))
		if got := err != nil; got != tt.refused || (err != nil && !errors.Is(err, ErrProtected)) {
			t.Errorf("Covers(%q) = %v, want refused %v", tt.rel, err, tt.refused)
		}
	}
}

func TestVerify(t *testing.T) {
	l := newLayout(t)
	mustLink := func(fn func(string, string) error, target, name string) {
		t.Helper()
		if err := fn(target, filepath.Join(l.root, name)); err != nil {
			t.Fatal(err)
		}
	}
	mustLink(os.Symlink, "config.hcl", "config-sym")
	mustLink(os.Symlink, "state/data", "data-sym")
	mustLink(os.Link, l.config, "config-hard")
	mustLink(os.Link, l.perms, "perms-hard")
	mustLink(os.Link, filepath.Join(l.root, "open.txt"), "open-hard")
	for _, tt := range []struct {
		rel     string
		refused bool
	}{
		{"config-sym", true},
		{"data-sym", true},
		{"data-sym/permissions.json", true},
		{"config-hard", true},
		{"perms-hard", true},
		{"open.txt", false},
		{"open-hard", false},
		{"state", false},
		{".", false},
	} {
		err := l.open(tt.rel)
		if got := err != nil; got != tt.refused || (err != nil && !errors.Is(err, ErrProtected)) {
			t.Errorf("OpenFile(%q) = %v, want refused %v", tt.rel, err, tt.refused)
		}
	}
}

// TestVerifyAfterChanges: identities are re-read, so a protected file
// replaced by rename, a new file in a protected folder and a protected
// folder moved aside (by something other than the tools) stay protected.
func TestVerifyAfterChanges(t *testing.T) {
	l := newLayout(t)
	// Build the hard-link index once (a link to an open file needs it).
	if err := os.Link(filepath.Join(l.root, "open.txt"), filepath.Join(l.root, "open-hard")); err != nil {
		t.Fatal(err)
	}
	if err := l.open("open-hard"); err != nil {
		t.Fatalf("open-hard: %v", err)
	}
	// The host rewrites its config by rename: a new inode.
	tmp := filepath.Join(l.root, "config.hcl.tmp")
	if err := os.WriteFile(tmp, []byte("config v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, l.config); err != nil {
		t.Fatal(err)
	}
	// The host saves a new file in its data dir.
	saved := filepath.Join(l.data, "saved.txt")
	if err := os.WriteFile(saved, []byte("saved"), 0o644); err != nil {
		t.Fatal(err)
	}
	for target, name := range map[string]string{l.config: "config-hard2", saved: "saved-hard"} {
		if err := os.Link(target, filepath.Join(l.root, name)); err != nil {
			t.Fatal(err)
		}
		if err := l.open(name); !errors.Is(err, ErrProtected) {
			t.Errorf("OpenFile(%s, a hard link made after the change) = %v, want ErrProtected", name, err)
		}
	}
	// The data dir's parent moved aside: the folder keeps its identity.
	if err := os.Rename(filepath.Join(l.root, "state"), filepath.Join(l.root, "aside")); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"aside/data/permissions.json", "aside/data"} {
		if err := l.open(rel); !errors.Is(err, ErrProtected) {
			t.Errorf("OpenFile(%s) after the move = %v, want ErrProtected", rel, err)
		}
	}
	if err := l.open("aside"); err != nil {
		t.Errorf("OpenFile(aside) = %v, want allowed (it holds, but is not, protected)", err)
	}
}

func TestCheckEntry(t *testing.T) {
	l := newLayout(t)
	for _, tt := range []struct {
		rel           string
		tree, refused bool
	}{
		{"config.hcl", false, true},
		{"state/data", false, true},
		{"state", true, true},   // holds the data dir
		{"state", false, false}, // acting on the entry alone
		{"open.txt", true, false},
	} {
		fi, err := os.Lstat(filepath.Join(l.root, tt.rel))
		if err != nil {
			t.Fatal(err)
		}
		err = l.r.CheckEntry(tt.rel, fi, tt.tree)
		if got := err != nil; got != tt.refused {
			t.Errorf("CheckEntry(%q, tree %v) = %v, want refused %v", tt.rel, tt.tree, err, tt.refused)
		}
	}
}

func TestFilter(t *testing.T) {
	l := newLayout(t)
	if err := os.Link(l.config, filepath.Join(l.root, "config-hard")); err != nil {
		t.Fatal(err)
	}
	// The hard link keeps its name (reading it is refused, see TestVerify).
	for dir, want := range map[string][]string{".": {"config-hard", "open.txt", "state"}, "state": nil} {
		f, err := l.r.OpenFile(l.osRoot, dir, os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		ents, err := f.ReadDir(-1)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range l.r.Filter(f, ents) {
			got = append(got, e.Name())
		}
		f.Close()
		if len(got) != len(want) {
			t.Errorf("Filter(%s) = %v, want %v", dir, got, want)
		}
	}
}

func TestOpenFIFO(t *testing.T) {
	l := newLayout(t)
	if err := syscall.Mkfifo(filepath.Join(l.root, "pipe"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- l.open("pipe") }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("OpenFile(pipe) = %v, want ErrNotRegular", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OpenFile(pipe) blocked") // leaks the goroutine: the failure is the point
	}
}

// BenchmarkVerify measures what every open pays: re-stat'ing the protected
// paths, reading the descriptor's path and stat'ing the folders above it.
func BenchmarkVerify(b *testing.B) {
	l := newLayout(b)
	deep := filepath.Join("a", "b", "c", "d", "e")
	if err := os.MkdirAll(filepath.Join(l.root, deep), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.root, deep, "f.txt"), []byte("x"), 0o644); err != nil {
		b.Fatal(err)
	}
	f, err := l.osRoot.Open(filepath.Join(deep, "f.txt"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.Run("Verify", func(b *testing.B) {
		for b.Loop() {
			if err := l.r.Verify(f); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("plain open", func(b *testing.B) {
		for b.Loop() {
			g, err := l.osRoot.Open(filepath.Join(deep, "f.txt"))
			if err != nil {
				b.Fatal(err)
			}
			g.Close()
		}
	})
}

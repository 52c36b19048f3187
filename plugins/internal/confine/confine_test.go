package confine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "proj")
	sibling := filepath.Join(base, "proj-evil") // shares a string prefix
	for _, d := range []string{root, sibling, filepath.Join(root, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustLink := func(target, link string) {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	mustLink("/etc", filepath.Join(root, "etc-link"))
	mustLink(sibling, filepath.Join(root, "sibling-link"))
	mustLink(filepath.Join(root, "sub"), filepath.Join(root, "inner-link"))
	mustLink("/tmp/definitely-not-here/x", filepath.Join(root, "dangling"))

	r, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	realRoot, _ := filepath.EvalSymlinks(root)
	tests := []struct {
		path string
		want string // "" = refused
	}{
		{"a.txt", filepath.Join(realRoot, "a.txt")},
		{"sub/new/file", filepath.Join(realRoot, "sub/new/file")},
		{"inner-link/x", filepath.Join(realRoot, "sub/x")},
		{".", realRoot},
		{"../proj-evil/x", ""},
		{sibling + "/x", ""},
		{"/etc/passwd", ""},
		{"etc-link/passwd", ""},
		{"sibling-link/x", ""},
		{"dangling", ""},
		{"sub/../../proj-evil", ""},
		{"a\x00b", ""},
		{"~/x", ""},
	}
	for _, tt := range tests {
		got, err := r.Resolve(tt.path)
		if tt.want == "" {
			if err == nil || !errors.Is(err, ErrOutside) {
				t.Errorf("Resolve(%q) = %q, %v; want refused with ErrOutside", tt.path, got, err)
			}
			// Where a link leads outside is not told (red team round 18).
			if target, isLink := map[string]string{"etc-link/passwd": "/etc/passwd", "sibling-link/x": "proj-evil", "dangling": "definitely-not-here"}[tt.path]; isLink && err != nil && strings.Contains(err.Error(), target) {
				t.Errorf("Resolve(%q): %v names where the link leads", tt.path, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tt.path, got, err, tt.want)
		}
	}
}

func TestWithin(t *testing.T) {
	tests := []struct {
		p, root string
		want    bool
	}{
		{"/a/b", "/a/b", true},
		{"/a/b/c", "/a/b", true},
		{"/a/bc", "/a/b", false},
		{"/a", "/a/b", false},
		{"/x", "/", true},
	}
	for _, tt := range tests {
		if got := Within(tt.p, tt.root); got != tt.want {
			t.Errorf("Within(%q, %q) = %v, want %v", tt.p, tt.root, got, tt.want)
		}
	}
}

func FuzzResolve(f *testing.F) {
	root := f.TempDir()
	r, err := New(root)
	if err != nil {
		f.Fatal(err)
	}
	realRoot, _ := filepath.EvalSymlinks(root)
	for _, s := range []string{"a", "../a", "/etc", "a/../../b", "./././", "a\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := r.Resolve(p)
		if err == nil && !Within(got, realRoot) {
			t.Fatalf("Resolve(%q) = %q, outside %q", p, got, realRoot)
		}
	})
}

func TestExclude(t *testing.T) {
	base := t.TempDir()
	state := filepath.Join(base, "home", ".local", "state", "switchboard")
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := New(filepath.Join(base, "home"))
	if err != nil {
		t.Fatal(err)
	}
	r.Exclude(state)
	for _, p := range []string{state, filepath.Join(state, "permissions.json"), ".local/state/switchboard/audit.jsonl"} {
		if _, err := r.Resolve(p); !errors.Is(err, ErrOutside) {
			t.Errorf("Resolve(%q) = %v, want refused (host state)", p, err)
		}
	}
	if _, err := r.Resolve(".local/state/other"); err != nil {
		t.Errorf("Resolve(sibling of the state dir) = %v", err)
	}
}

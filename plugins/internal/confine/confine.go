// Package confine keeps built-in plugins inside their roots and away from
// the host's protected paths. A path is inside a root only by whole path
// components, after every symlink is resolved; a path that does not exist
// yet is judged by its deepest existing ancestor. NUL bytes are refused
// outright.
//
// Lifecycle: New at configure time, then Protect with the host's protected
// paths (its config, lock file, plugins, data dir), each resolved and its
// identity (device, inode) recorded. Every operation then runs in two
// steps: Resolve (or Locate, or Covers for a whole tree) judges the path by
// name before anything is opened; OpenFile (or FS, for walks) opens it
// through an os.Root without blocking and Verifies the descriptor itself,
// so symlinks swapped in, hard links and folders moved aside are caught on
// what was actually opened. Writes, renames and mkdir act by name inside a
// folder that was opened and Verified, after CheckName. Filter leaves
// protected entries out of listings.
package confine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
)

// ErrOutside is wrapped by every refusal of a path outside the roots.
var ErrOutside = errors.New("path is outside the allowed directories")

// Roots is a set of directories, the first of which relative paths resolve
// against, less the protected paths inside them. Protect must be called
// before the Roots is used from several goroutines; after that every method
// is safe for concurrent use.
type Roots struct {
	dirs     []string // absolute, symlinks resolved
	excluded []string // protected paths: never allowed, even under a root
	// excludedIn is each protected path split into its folder and name.
	excludedIn [][2]string
	guards     []guard
	ancestors  map[fileID]struct{} // directories above a protected path
	links      *linkIndex
	// recent is the latest snapshot a walk took, shared by the folders
	// every walk opens within snapshotReuse of it (see Dir.Sub).
	recent atomic.Pointer[timedSnapshot]
}

// New resolves each directory; it fails if one does not exist.
func New(dirs ...string) (*Roots, error) {
	r := &Roots{ancestors: map[fileID]struct{}{}, links: &linkIndex{}}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, err
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return nil, fmt.Errorf("root %s: %w", d, err)
		}
		if st, err := os.Stat(real); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("root %s is not a directory", d)
		}
		r.dirs = append(r.dirs, real)
	}
	if len(r.dirs) == 0 {
		return nil, errors.New("no root directory given")
	}
	return r, nil
}

// Dirs returns the resolved root directories.
func (r *Roots) Dirs() []string { return append([]string(nil), r.dirs...) }

// Resolve returns the real absolute path for p (relative paths resolve
// against the first root), or an error wrapping ErrOutside when it lies
// outside every root. The path need not exist.
func (r *Roots) Resolve(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%w: %q contains a NUL byte", ErrOutside, p)
	}
	if p == "" {
		p = "."
	}
	if strings.HasPrefix(p, "~") {
		return "", fmt.Errorf("%w: %q: '~' is not expanded; use a path relative to %s", ErrOutside, p, r.dirs[0])
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(r.dirs[0], p)
	}
	real, err := realPath(filepath.Clean(p))
	if err != nil {
		return "", err
	}
	if x := r.protectedAt(real); x != "" {
		return "", &ProtectedError{Path: p, Why: "is inside", Protected: x}
	}
	for _, d := range r.dirs {
		if Within(real, d) {
			return real, nil
		}
	}
	for _, d := range r.dirs {
		if Within(filepath.Clean(p), d) {
			// Where the link leads is not said: outside the roots, it is
			// nothing the tools may show (red team round 18 read link
			// targets from these errors).
			return "", fmt.Errorf("%w: %s leads outside %s through a symbolic link", ErrOutside, p, strings.Join(r.dirs, " or "))
		}
	}
	return "", fmt.Errorf("%w: %s is not inside %s", ErrOutside, p, strings.Join(r.dirs, " or "))
}

// realPath resolves symlinks in p; for a path that does not exist, it
// resolves the deepest existing ancestor and appends the rest.
func realPath(p string) (string, error) {
	var rest []string
	cur := p
	for {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			for i := len(rest) - 1; i >= 0; i-- {
				real = filepath.Join(real, rest[i])
			}
			return real, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		// A dangling symlink must not be judged by its own location: its
		// target is where a write would land.
		if fi, lerr := os.Lstat(cur); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
			target, rerr := os.Readlink(cur)
			if rerr != nil {
				return "", rerr
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(cur), target)
			}
			return realPath(filepath.Join(append([]string{filepath.Clean(target)}, reverse(rest)...)...))
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p, nil
		}
		rest = append(rest, filepath.Base(cur))
		cur = parent
	}
}

func reverse(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

// Within reports whether p equals root or lies under it, by whole
// components ("/a/bc" is not within "/a/b").
func Within(p, root string) bool {
	if p == root {
		return true
	}
	if root == string(filepath.Separator) {
		return strings.HasPrefix(p, root)
	}
	return strings.HasPrefix(p, root+string(filepath.Separator))
}

// Open opens the file at the resolved path p for reading and Verifies the
// opened descriptor, so a symlink swapped in between Resolve and Open can
// lead neither outside the roots nor to a protected path.
func (r *Roots) Open(p string) (*os.File, error) {
	real, err := r.Resolve(p)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := r.verify(f)
	if err == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
		err = fmt.Errorf("%w: %s is a %s", ErrNotRegular, p, kind(fi.Mode()))
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Location is a resolved path: the root it lies in, its path relative to
// that root (for os.Root operations), and its real absolute path.
type Location struct {
	Root string
	Rel  string
	Real string
}

// Locate resolves p like Resolve and says which root holds it.
func (r *Roots) Locate(p string) (Location, error) {
	real, err := r.Resolve(p)
	if err != nil {
		return Location{}, err
	}
	for _, d := range r.dirs {
		if Within(real, d) {
			rel, err := filepath.Rel(d, real)
			if err != nil {
				return Location{}, err
			}
			return Location{Root: d, Rel: rel, Real: real}, nil
		}
	}
	return Location{}, fmt.Errorf("%w: %s", ErrOutside, p)
}

// Display is how a path is shown to the model: relative to the first root
// (the project directory) when inside it, else absolute.
func (r *Roots) Display(real string) string {
	if Within(real, r.dirs[0]) {
		if rel, err := filepath.Rel(r.dirs[0], real); err == nil {
			return rel
		}
	}
	return real
}

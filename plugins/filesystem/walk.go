package filesystem

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/switchboard-mcp/switchboard/plugins/internal/confine"
)

// walker walks a located path depth first in name order (the order of
// fs.WalkDir), skipping .git, what .gitignore files ignore (unless told
// not to) and exclude patterns. Directories are opened by confine.Dir:
// each is checked once, and everything below it is opened relative to its
// descriptor without following symlinks, so walks neither show nor read
// protected entries and never leave the roots. Symlinks are listed, not
// followed.
type walker struct {
	p              *plugin
	l              loc
	start          string // FS path of the walk's start
	exclude        []string
	includeIgnored bool
	maxDepth       int           // 0: all
	above          []ignoreLevel // .gitignores above the start
}

// ignoreLevel is a .gitignore and the FS path of the folder holding it.
type ignoreLevel struct {
	dir string
	set *ignoreSet
}

// walkDir is a directory being walked. refs counts its users (the walk,
// and jobs reading its files); the last one closes it.
type walkDir struct {
	d       *confine.Dir
	fsPath  string
	depth   int           // the start is 0
	ignores []ignoreLevel // root first
	refs    atomic.Int32
}

func (d *walkDir) hold() { d.refs.Add(1) }

func (d *walkDir) release() {
	if d.refs.Add(-1) == 0 {
		_ = d.d.Close()
	}
}

// walkEntry is an entry the walk visits.
type walkEntry struct {
	dir    *walkDir // the folder it is in
	name   string
	fsPath string
	rel    string // relative to the start
	typ    fs.FileMode
	depth  int // the start's children are 1
}

func (e walkEntry) isDir() bool { return e.typ.IsDir() }

// errSkipDir, returned by a visit for a directory, leaves it unopened.
var errSkipDir = errors.New("skip this directory")

func (p *plugin) newWalker(l loc, exclude []string, includeIgnored bool) (*walker, error) {
	for _, pat := range exclude {
		if !doublestar.ValidatePattern(pat) {
			return nil, fmt.Errorf("exclude pattern %q is not a valid glob", pat)
		}
	}
	w := &walker{p: p, l: l, start: filepathToFS(l.Rel), exclude: exclude, includeIgnored: includeIgnored}
	// .gitignore files above the start (up to the root) apply too.
	if !includeIgnored && w.start != "." {
		for dir := path.Dir(w.start); ; dir = path.Dir(dir) {
			if set := w.readIgnoreByPath(dir); set != nil {
				w.above = append([]ignoreLevel{{dir, set}}, w.above...)
			}
			if dir == "." {
				break
			}
		}
	}
	return w, nil
}

func filepathToFS(p string) string { return strings.ReplaceAll(p, "\\", "/") }

// readIgnoreByPath reads dir's .gitignore through the os.Root (following
// symlinks inside it, checked by confine).
func (w *walker) readIgnoreByPath(dir string) *ignoreSet {
	f, err := w.p.roots.OpenFile(w.l.root, path.Join(dir, ".gitignore"), os.O_RDONLY, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil
	}
	return compileIgnore(string(b))
}

// readIgnore reads the .gitignore listed in d.
func (w *walker) readIgnore(d *walkDir, e fs.DirEntry) *ignoreSet {
	if !e.Type().IsRegular() {
		return w.readIgnoreByPath(d.fsPath)
	}
	f, err := d.d.OpenFile(".gitignore")
	if err != nil {
		return nil
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil
	}
	return compileIgnore(string(b))
}

// skip reports whether an entry is left out (and, for a directory, its
// whole subtree).
func (w *walker) skip(d *walkDir, name, fsPath, rel string, isDir bool) bool {
	if name == ".git" {
		return true
	}
	for _, pat := range w.exclude {
		if m, _ := doublestar.Match(pat, rel); m {
			return true
		}
		if m, _ := doublestar.Match(pat, name); m {
			return true
		}
	}
	if w.includeIgnored {
		return false
	}
	// Every .gitignore from the root down to the entry's folder.
	for i := len(d.ignores) - 1; i >= 0; i-- {
		lv := d.ignores[i]
		sub := fsPath
		if lv.dir != "." {
			sub = fsPath[len(lv.dir)+1:]
		}
		if isDir {
			sub += "/"
		}
		if lv.set.matches(sub) {
			return true
		}
	}
	return false
}

// open opens the walk's start as a directory.
func (w *walker) open() (*walkDir, error) {
	d, err := w.p.roots.OpenDir(w.l.root, w.l.Rel)
	if err != nil {
		return nil, err
	}
	wd := &walkDir{d: d, fsPath: w.start, ignores: w.above}
	wd.hold()
	return wd, nil
}

// walk visits every entry below the start that is not skipped, depth
// first in name order, on the calling goroutine. visit returns errSkipDir
// to leave a directory unopened, or another error to stop the walk (which
// walk returns). Directories that cannot be opened or read are skipped
// after their visit, as fs.WalkDir's callers here did.
func (w *walker) walk(ctx context.Context, root *walkDir, visit func(e walkEntry) error) error {
	defer root.release()
	return w.walkIn(ctx, root, visit)
}

func (w *walker) walkIn(ctx context.Context, d *walkDir, visit func(e walkEntry) error) error {
	ents, _ := d.d.Entries()
	if !w.includeIgnored {
		for _, e := range ents {
			if e.Name() == ".gitignore" {
				if set := w.readIgnore(d, e); set != nil {
					d.ignores = append(d.ignores[:len(d.ignores):len(d.ignores)], ignoreLevel{d.fsPath, set})
				}
				break
			}
		}
	}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		name := e.Name()
		fsPath := name
		if d.fsPath != "." {
			fsPath = d.fsPath + "/" + name
		}
		rel := fsPath
		if w.start != "." {
			rel = fsPath[len(w.start)+1:]
		}
		isDir := e.IsDir()
		if w.skip(d, name, fsPath, rel, isDir) {
			continue
		}
		err := visit(walkEntry{dir: d, name: name, fsPath: fsPath, rel: rel, typ: e.Type(), depth: d.depth + 1})
		if errors.Is(err, errSkipDir) {
			continue
		}
		if err != nil {
			return err
		}
		if !isDir || (w.maxDepth > 0 && d.depth+1 >= w.maxDepth) {
			continue
		}
		sub, err := d.d.Sub(name)
		if err != nil {
			continue // unreadable or refused: skipped
		}
		child := &walkDir{d: sub, fsPath: fsPath, depth: d.depth + 1, ignores: d.ignores}
		child.hold()
		err = w.walkIn(ctx, child, visit)
		child.release()
		if err != nil {
			return err
		}
	}
	return nil
}

// wide lets a search use every CPU: the SDK runs a plugin with one
// scheduler slot (GOMAXPROCS=1), which serves single calls best; a search
// reads many files on several goroutines at once. The first search raises
// GOMAXPROCS to the number of CPUs (at most 8) and the last one to finish
// sets it back. An explicit GOMAXPROCS in the environment is left alone.
var wide struct {
	sync.Mutex
	n, prev int
}

func widen() (restore func()) {
	if os.Getenv("GOMAXPROCS") != "" {
		return func() {}
	}
	wide.Lock()
	if wide.n == 0 {
		wide.prev = 0
		if want := min(runtime.NumCPU(), 8); runtime.GOMAXPROCS(0) < want {
			wide.prev = runtime.GOMAXPROCS(want)
		}
	}
	wide.n++
	wide.Unlock()
	return func() {
		wide.Lock()
		wide.n--
		if wide.n == 0 && wide.prev > 0 {
			runtime.GOMAXPROCS(wide.prev)
		}
		wide.Unlock()
	}
}

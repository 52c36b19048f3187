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
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil
	}
	return compileIgnore(string(b))
}

// readIgnore reads the .gitignore listed in d.
func (w *walker) readIgnore(d *walkDir, e confine.Entry) *ignoreSet {
	if !e.Type.IsRegular() {
		return w.readIgnoreByPath(d.fsPath)
	}
	f, err := d.d.OpenFile(".gitignore")
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
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
// after their visit, as fs.WalkDir's callers here did. Subdirectories are
// opened and listed ahead of the visit by a few goroutines (see
// prefetcher), so listing runs on several CPUs; the visits stay in order.
func (w *walker) walk(ctx context.Context, root *walkDir, visit func(e walkEntry) error) error {
	defer root.release()
	pf := newPrefetcher(max(2, runtime.GOMAXPROCS(0)))
	defer pf.close()
	return w.walkIn(ctx, pf, root, w.list(root), visit)
}

// list reads a directory's entries, adds its .gitignore to its ignores,
// and prepares each entry (its paths, and whether it is skipped), so that
// a prefetching goroutine does that work too.
func (w *walker) list(d *walkDir) []walkItem {
	ents, _ := d.d.Entries()
	if !w.includeIgnored {
		for _, e := range ents {
			if e.Name == ".gitignore" {
				if set := w.readIgnore(d, e); set != nil {
					d.ignores = append(d.ignores[:len(d.ignores):len(d.ignores)], ignoreLevel{d.fsPath, set})
				}
				break
			}
		}
	}
	items := make([]walkItem, len(ents))
	for i, e := range ents {
		name := e.Name
		fsPath := name
		if d.fsPath != "." {
			fsPath = d.fsPath + "/" + name
		}
		rel := fsPath
		if w.start != "." {
			rel = fsPath[len(w.start)+1:]
		}
		it := &items[i]
		it.isDir = e.IsDir()
		it.skip = w.skip(d, name, fsPath, rel, it.isDir)
		it.e = walkEntry{dir: d, name: name, fsPath: fsPath, rel: rel, typ: e.Type, depth: d.depth + 1}
	}
	return items
}

// walkItem is a listed entry, prepared.
type walkItem struct {
	e           walkEntry
	isDir, skip bool
	job         *listJob
}

func (w *walker) walkIn(ctx context.Context, pf *prefetcher, d *walkDir, items []walkItem, visit func(e walkEntry) error) error {
	descend := w.maxDepth == 0 || d.depth+1 < w.maxDepth
	for i := range items {
		if it := &items[i]; it.isDir && !it.skip && descend {
			it.job = pf.submit(w, d, it.e.name, it.e.fsPath)
		}
	}
	// Jobs not consumed (the walk stopped) are finished and closed.
	next := 0
	defer func() {
		for _, it := range items[next:] {
			if it.job != nil {
				pf.discard(it.job)
			}
		}
	}()
	for ; next < len(items); next++ {
		it := items[next]
		if err := ctx.Err(); err != nil {
			return err
		}
		if it.skip {
			continue
		}
		err := visit(it.e)
		if errors.Is(err, errSkipDir) || err != nil || !it.isDir || !descend {
			if it.job != nil {
				pf.discard(it.job)
				items[next].job = nil
			}
			if errors.Is(err, errSkipDir) {
				continue
			}
			if err != nil {
				return err
			}
			continue
		}
		var child *walkDir
		var childEnts []walkItem
		if it.job != nil {
			child, childEnts = pf.take(it.job)
			items[next].job = nil
		} else if sub, err := d.d.Sub(it.e.name); err == nil {
			child = &walkDir{d: sub, fsPath: it.e.fsPath, depth: d.depth + 1, ignores: d.ignores}
			child.hold()
			childEnts = w.list(child)
		}
		if child == nil {
			continue // unreadable or refused: skipped
		}
		err = w.walkIn(ctx, pf, child, childEnts, visit)
		child.release()
		if err != nil {
			return err
		}
	}
	return nil
}

// prefetcher opens and lists subdirectories ahead of a walk on a few
// goroutines, latest submitted first (the walk wants the children of the
// folder it just entered before the folder's later siblings), at most
// prefetchMax at a time; past that the walk opens them itself.
type prefetcher struct {
	mu      sync.Mutex
	cond    *sync.Cond
	stack   []*listJob
	pending int // submitted, not yet taken by the walk
	closed  bool
	wg      sync.WaitGroup
}

const prefetchMax = 64

// listJob is a subdirectory to open and list.
type listJob struct {
	parent *walkDir
	name   string
	fsPath string
	w      *walker
	state  atomic.Int32 // 0 queued, 1 claimed
	done   chan struct{}
	child  *walkDir
	items  []walkItem
}

func newPrefetcher(workers int) *prefetcher {
	pf := &prefetcher{}
	pf.cond = sync.NewCond(&pf.mu)
	return pf.start(workers)
}

func (pf *prefetcher) start(workers int) *prefetcher {
	for range workers {
		pf.wg.Add(1)
		go func() {
			defer pf.wg.Done()
			for {
				pf.mu.Lock()
				for len(pf.stack) == 0 && !pf.closed {
					pf.cond.Wait()
				}
				if len(pf.stack) == 0 {
					pf.mu.Unlock()
					return
				}
				j := pf.stack[len(pf.stack)-1]
				pf.stack = pf.stack[:len(pf.stack)-1]
				pf.mu.Unlock()
				if j.state.CompareAndSwap(0, 1) {
					j.run()
				}
			}
		}()
	}
	return pf
}

// submit queues the listing of parent's subdirectory name, or returns nil
// when enough are pending.
func (pf *prefetcher) submit(w *walker, parent *walkDir, name, fsPath string) *listJob {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	if pf.pending >= prefetchMax || pf.closed {
		return nil
	}
	pf.pending++
	j := &listJob{parent: parent, name: name, fsPath: fsPath, done: make(chan struct{})}
	j.parent.hold()
	j.w = w
	pf.stack = append(pf.stack, j)
	pf.cond.Signal()
	return j
}

// run opens and lists the job's directory.
func (j *listJob) run() {
	defer close(j.done)
	defer j.parent.release()
	sub, err := j.parent.d.Sub(j.name)
	if err != nil {
		return
	}
	j.child = &walkDir{d: sub, fsPath: j.fsPath, depth: j.parent.depth + 1, ignores: j.parent.ignores}
	j.child.hold()
	j.items = j.w.list(j.child)
}

// take returns a job's directory and entries, listing it here if no
// worker has started on it, else waiting for the worker.
func (pf *prefetcher) take(j *listJob) (*walkDir, []walkItem) {
	if j.state.CompareAndSwap(0, 1) {
		j.run()
	}
	<-j.done
	pf.mu.Lock()
	pf.pending--
	pf.mu.Unlock()
	return j.child, j.items
}

// discard drops a job the walk will not use: unstarted, it is not run;
// started, its directory is closed once listed.
func (pf *prefetcher) discard(j *listJob) {
	if j.state.CompareAndSwap(0, 1) {
		j.parent.release()
		close(j.done)
	}
	<-j.done
	if j.child != nil {
		j.child.release()
	}
	pf.mu.Lock()
	pf.pending--
	pf.mu.Unlock()
}

// close stops the workers once the queue is drained (every job left is
// claimed by take, or by a worker and run).
func (pf *prefetcher) close() {
	pf.mu.Lock()
	pf.closed = true
	pf.cond.Broadcast()
	pf.mu.Unlock()
	pf.wg.Wait()
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

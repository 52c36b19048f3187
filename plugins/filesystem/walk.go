package filesystem

import (
	"container/heap"
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
	"github.com/switchboard-mcp/switchboard/sdk"
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
	// req is the call: what its host's deny rules match is left out
	// (sdk.Request.DeniedPath), as a call naming it would be refused.
	req *sdk.Request
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
}

func (e walkEntry) isDir() bool { return e.typ.IsDir() }

// errSkipDir, returned by a visit for a directory, leaves it unopened.
var errSkipDir = errors.New("skip this directory")

func (p *plugin) newWalker(req *sdk.Request, l loc, exclude []string, includeIgnored bool) (*walker, error) {
	for _, pat := range exclude {
		if !doublestar.ValidatePattern(pat) {
			return nil, fmt.Errorf("exclude pattern %q is not a valid glob", pat)
		}
	}
	w := &walker{p: p, l: l, start: filepathToFS(l.Rel), exclude: exclude, includeIgnored: includeIgnored, req: req}
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
	if w.p.denied(w.req, w.l.root, fsPath) {
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
	pf := newPrefetcher(w, max(2, runtime.GOMAXPROCS(0)))
	defer pf.close()
	items := w.list(root)
	pf.submitChildren(root, items)
	return w.walkIn(ctx, pf, root, items, visit)
}

// descends reports whether the walk opens d's subdirectories.
func (w *walker) descends(d *walkDir) bool { return w.maxDepth == 0 || d.depth+1 < w.maxDepth }

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
	// Every entry's path is cut from one string (one allocation per
	// folder, not one per entry).
	var prefix, paths string
	if d.fsPath != "." {
		prefix = d.fsPath + "/"
		var b strings.Builder
		b.Grow(len(ents) * len(prefix))
		for _, e := range ents {
			b.WriteString(prefix)
			b.WriteString(e.Name)
		}
		paths = b.String()
	}
	off := 0
	for i, e := range ents {
		name := e.Name
		fsPath := name
		if prefix != "" {
			fsPath = paths[off : off+len(prefix)+len(name)]
			off += len(fsPath)
		}
		rel := fsPath
		if w.start != "." {
			rel = fsPath[len(w.start)+1:]
		}
		it := &items[i]
		it.isDir = e.IsDir()
		it.skip = w.skip(d, name, fsPath, rel, it.isDir)
		it.e = walkEntry{dir: d, name: name, fsPath: fsPath, rel: rel, typ: e.Type}
	}
	return items
}

// walkItem is a listed entry, prepared.
type walkItem struct {
	e           walkEntry
	isDir, skip bool
	job         *listJob // its listing ahead, for a directory the walk enters
}

func (w *walker) walkIn(ctx context.Context, pf *prefetcher, d *walkDir, items []walkItem, visit func(e walkEntry) error) error {
	descend := w.descends(d)
	// Jobs not consumed (the walk stopped) are finished and closed.
	next := 0
	defer func() {
		for i := next; i < len(items); i++ {
			if j := items[i].job; j != nil {
				items[i].job = nil
				pf.discard(j)
			}
		}
	}()
	for ; next < len(items); next++ {
		it := &items[next]
		if err := ctx.Err(); err != nil {
			return err
		}
		if it.skip {
			continue
		}
		err := visit(it.e)
		if err != nil || !it.isDir || !descend {
			if j := it.job; j != nil {
				it.job = nil
				pf.discard(j)
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
		var childItems []walkItem
		if j := it.job; j != nil {
			it.job = nil
			child, childItems = pf.take(j)
		} else if sub, err := d.d.Sub(it.e.name); err == nil {
			child = &walkDir{d: sub, fsPath: it.e.fsPath, depth: d.depth + 1, ignores: d.ignores}
			child.hold()
			childItems = w.list(child)
			pf.submitChildren(child, childItems)
		}
		if child == nil {
			continue // unreadable or refused: skipped
		}
		err = w.walkIn(ctx, pf, child, childItems, visit)
		child.release()
		if err != nil {
			return err
		}
	}
	return nil
}

// prefetcher opens and lists subdirectories ahead of a walk on a few
// goroutines. Listing a directory queues its subdirectories, so the
// workers run ahead through the whole tree; they always take the queued
// directory that comes first in the walk's order (a heap by path), so
// what they list is what the walk wants next, and they stop while
// prefetchMax listed directories wait for the walk (each holds a
// descriptor open). The walk lists a directory itself when no worker has
// started on it.
type prefetcher struct {
	w      *walker
	mu     sync.Mutex
	cond   *sync.Cond
	queue  jobHeap
	ahead  int // listed by a worker, not yet taken or discarded by the walk
	closed bool
	wg     sync.WaitGroup
}

const prefetchMax = 128

// listJob is a subdirectory to open and list.
type listJob struct {
	parent *walkDir
	name   string
	fsPath string
	state  atomic.Int32 // 0 queued, 1 claimed
	ahead  bool         // run by a worker (counted in prefetcher.ahead)
	done   chan struct{}
	child  *walkDir
	items  []walkItem
}

// jobHeap is the queued jobs, first in walk order on top. Jobs claimed
// meanwhile (by the walk) stay in it until popped.
type jobHeap []*listJob

func (h jobHeap) Len() int           { return len(h) }
func (h jobHeap) Less(i, j int) bool { return walkOrder(h[i].fsPath, h[j].fsPath) < 0 }
func (h jobHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *jobHeap) Push(x any)        { *h = append(*h, x.(*listJob)) }
func (h *jobHeap) Pop() any {
	old := *h
	j := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return j
}

// walkOrder compares two slash-separated paths in the walk's order (depth
// first, names in byte order): component by component, so "a/b" comes
// before "a-c" ('/' sorts before every byte a name can hold).
func walkOrder(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		ca, cb := a[i], b[i]
		if ca == cb {
			continue
		}
		if ca == '/' {
			return -1
		}
		if cb == '/' {
			return 1
		}
		if ca < cb {
			return -1
		}
		return 1
	}
	return len(a) - len(b)
}

func newPrefetcher(w *walker, workers int) *prefetcher {
	pf := &prefetcher{w: w}
	pf.cond = sync.NewCond(&pf.mu)
	for range workers {
		pf.wg.Add(1)
		go pf.work()
	}
	return pf
}

func (pf *prefetcher) work() {
	defer pf.wg.Done()
	for {
		pf.mu.Lock()
		for !pf.closed && (len(pf.queue) == 0 || pf.ahead >= prefetchMax) {
			pf.cond.Wait()
		}
		if pf.closed {
			pf.mu.Unlock()
			return
		}
		j := heap.Pop(&pf.queue).(*listJob)
		claimed := j.state.CompareAndSwap(0, 1)
		if claimed {
			j.ahead = true
			pf.ahead++
		}
		pf.mu.Unlock()
		if claimed {
			pf.run(j)
		}
	}
}

// submitChildren queues the listing of d's subdirectories that the walk
// will enter (not skipped, within max_depth), recording each job in its
// item.
func (pf *prefetcher) submitChildren(d *walkDir, items []walkItem) {
	if !pf.w.descends(d) {
		return
	}
	pf.mu.Lock()
	defer pf.mu.Unlock()
	if pf.closed {
		return
	}
	n := 0
	for i := range items {
		it := &items[i]
		if !it.isDir || it.skip {
			continue
		}
		j := &listJob{parent: d, name: it.e.name, fsPath: it.e.fsPath, done: make(chan struct{})}
		d.hold()
		it.job = j
		heap.Push(&pf.queue, j)
		n++
	}
	if n > 0 {
		pf.cond.Broadcast()
	}
}

// run opens and lists the job's directory and queues its subdirectories.
func (pf *prefetcher) run(j *listJob) {
	defer close(j.done)
	defer j.parent.release()
	sub, err := j.parent.d.Sub(j.name)
	if err != nil {
		return
	}
	j.child = &walkDir{d: sub, fsPath: j.fsPath, depth: j.parent.depth + 1, ignores: j.parent.ignores}
	j.child.hold()
	j.items = pf.w.list(j.child)
	pf.submitChildren(j.child, j.items)
}

// taken counts a job the walk is done waiting for out of those ahead.
func (pf *prefetcher) taken(j *listJob) {
	if !j.ahead {
		return
	}
	pf.mu.Lock()
	pf.ahead--
	pf.cond.Signal()
	pf.mu.Unlock()
}

// take returns a job's directory and entries, listing it here if no
// worker has started on it, else waiting for the worker.
func (pf *prefetcher) take(j *listJob) (*walkDir, []walkItem) {
	if j.state.CompareAndSwap(0, 1) {
		pf.run(j)
	}
	<-j.done
	pf.taken(j)
	return j.child, j.items
}

// discard drops a job the walk will not use, and the jobs queued for its
// subdirectories: unstarted, it is not run; started, its directory is
// closed once listed.
func (pf *prefetcher) discard(j *listJob) {
	if j.state.CompareAndSwap(0, 1) {
		j.parent.release()
		close(j.done)
		return
	}
	<-j.done
	pf.taken(j)
	if j.child == nil {
		return
	}
	for i := range j.items {
		if c := j.items[i].job; c != nil {
			j.items[i].job = nil
			pf.discard(c)
		}
	}
	j.child.release()
}

// close stops the workers. Every job still queued was claimed by the walk
// (taken or discarded); one that was not is dropped here, so no directory
// is left open.
func (pf *prefetcher) close() {
	pf.mu.Lock()
	pf.closed = true
	pf.cond.Broadcast()
	pf.mu.Unlock()
	pf.wg.Wait()
	for _, j := range pf.queue {
		if j.state.CompareAndSwap(0, 1) {
			j.parent.release()
			close(j.done)
		}
	}
	pf.queue = nil
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

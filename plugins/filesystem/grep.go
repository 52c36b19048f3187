package filesystem

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"regexp/syntax"
	"runtime"
	"strings"
	"sync"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/switchboard-mcp/switchboard/plugins/internal/confine"
	"github.com/switchboard-mcp/switchboard/sdk"
)

// wholeReader is a file that reads itself whole into a buffer in one go
// (a confine.File knows its size); other readers are read in steps.
type wholeReader interface {
	ReadAll(buf []byte) ([]byte, error)
}

var _ wholeReader = (*confine.File)(nil)

func (p *plugin) grep(ctx context.Context, req *sdk.Request, in grepArgs) (*sdk.Result, error) {
	defer p.trim.Later()
	expr := in.Pattern
	if in.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return sdk.ErrorResult("pattern is not a valid regular expression: %v", err), nil
	}
	if in.Glob != "" && !doublestar.ValidatePattern(in.Glob) {
		return sdk.ErrorResult("glob %q is not valid", in.Glob), nil
	}
	maxResults := in.MaxResults
	if maxResults <= 0 {
		maxResults = defaultGrepMax
	}
	maxResults = min(maxResults, 10000)
	l, err := p.locate(orDot(in.Path))
	if err != nil {
		return sdk.ErrorResult("cannot search %s: %v", in.Path, err), nil
	}
	w, err := p.newWalker(req, l, nil, in.IncludeIgnored)
	if err != nil {
		return sdk.ErrorResult("%v", err), nil
	}
	m := newMatcher(re, expr, in.Pattern)
	s := &grepSearch{p: p, l: l, m: m, max: maxResults, maxFile: p.maxRead}
	globByPath := strings.Contains(in.Glob, "/")
	globOK := func(name, rel string) bool {
		if in.Glob == "" {
			return true
		}
		target := name
		if globByPath {
			target = rel
		}
		ok, _ := doublestar.Match(in.Glob, target)
		return ok
	}
	start, err := w.open()
	if err != nil {
		// A file: search it alone.
		f, ferr := p.roots.OpenFile(l.root, l.Rel, os.O_RDONLY, 0)
		if ferr != nil {
			return sdk.ErrorResult("cannot search %s: %v", in.Path, err), nil
		}
		defer f.Close()
		st, serr := f.Stat()
		if serr != nil || st.IsDir() {
			return sdk.ErrorResult("cannot search %s: %v", in.Path, err), nil
		}
		j := &grepJob{}
		if globOK(path.Base(w.start), "") {
			buf := make([]byte, 0, 256<<10)
			s.file(j, f, st.Size(), &buf, w.start)
		}
		s.cut = len(j.lines) > s.max
		s.lines = j.lines[:min(len(j.lines), s.max)]
		return s.result(), nil
	}
	defer widen()()
	err = s.run(ctx, w, start, globOK)
	if err != nil && !errors.Is(err, errLimit) {
		return sdk.ErrorResult("cannot search %s: %v", in.Path, err), nil
	}
	return s.result(), nil
}

// grepSearch is one grep call: a walk in order on the calling goroutine,
// which hands the files of each folder, in batches, to workers that read
// and match them, and a consumer that takes the batches' results in the
// walk's order until max_results. So results are those of a sequential
// search, in the same order, and at most a window of batches is read
// ahead of what is returned.
type grepSearch struct {
	p       *plugin
	l       loc
	m       *matcher
	max     int
	maxFile int64

	lines [][]byte // the result, in order
	cut   bool     // more matched than max
}

// grepJob is a batch of files of one folder.
type grepJob struct {
	dir     *walkDir
	names   []string
	fsPaths []string
	lines   [][]byte // formatted "path:line:text"
	done    chan struct{}
}

// Bounds of the read-ahead.
const (
	grepBatch  = 32  // files per job
	grepWindow = 256 // jobs handed out and not yet consumed
)

func (s *grepSearch) display(fsPath string) string {
	return s.p.roots.Display(path.Join(s.l.Root, fsPath))
}

func (s *grepSearch) run(ctx context.Context, w *walker, start *walkDir, globOK func(name, rel string) bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		cond     = sync.NewCond(&mu)
		inflight int // jobs handed out, not consumed
		buffered int // result lines done, not consumed
		stopped  bool
	)
	work := make(chan *grepJob, grepWindow)
	ordered := make(chan *grepJob, grepWindow)
	var wg sync.WaitGroup
	workers := max(2, runtime.GOMAXPROCS(0))
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, 256<<10)
			for j := range work {
				if ctx.Err() == nil {
					s.batch(j, &buf)
				}
				j.dir.release()
				mu.Lock()
				buffered += len(j.lines)
				mu.Unlock()
				close(j.done)
			}
		}()
	}
	// Hand out a job, waiting while the window is full or more lines wait
	// than the consumer can take.
	send := func(j *grepJob) bool {
		mu.Lock()
		for !stopped && (inflight >= grepWindow || buffered > 2*(s.max+1)) {
			cond.Wait()
		}
		if stopped {
			mu.Unlock()
			j.dir.release()
			return false
		}
		inflight++
		mu.Unlock()
		j.done = make(chan struct{})
		ordered <- j
		work <- j
		return true
	}
	var walkErr error
	go func() {
		defer close(work)
		defer close(ordered)
		var cur *grepJob
		flush := func() bool {
			if cur == nil {
				return true
			}
			j := cur
			cur = nil
			return send(j)
		}
		walkErr = w.walk(ctx, start, func(e walkEntry) error {
			if e.isDir() {
				if !flush() {
					return context.Canceled
				}
				return nil
			}
			if !e.typ.IsRegular() || !globOK(e.name, e.rel) {
				return nil
			}
			if cur != nil && (cur.dir != e.dir || len(cur.names) == grepBatch) {
				if !flush() {
					return context.Canceled
				}
			}
			if cur == nil {
				e.dir.hold()
				cur = &grepJob{dir: e.dir}
			}
			cur.names = append(cur.names, e.name)
			cur.fsPaths = append(cur.fsPaths, e.fsPath)
			return nil
		})
		if walkErr == nil {
			if !flush() {
				walkErr = context.Canceled
			}
		} else if cur != nil {
			cur.dir.release()
		}
	}()
	// Consume in order.
	for j := range ordered {
		<-j.done
		if !s.cut {
			for _, line := range j.lines {
				if len(s.lines) >= s.max {
					s.cut = true
					break
				}
				s.lines = append(s.lines, line)
			}
			if s.cut {
				cancel()
				mu.Lock()
				stopped = true
				cond.Broadcast()
				mu.Unlock()
			}
		}
		mu.Lock()
		inflight--
		buffered -= len(j.lines)
		cond.Broadcast()
		mu.Unlock()
	}
	wg.Wait()
	if s.cut {
		return errLimit
	}
	return walkErr
}

// batch reads and matches a job's files, then checks that their folder is
// still where it was: if it moved out of the roots (or under a protected
// path) meanwhile, nothing read from it is returned.
func (s *grepSearch) batch(j *grepJob, buf *[]byte) {
	for i, name := range j.names {
		f, err := j.dir.d.OpenFile(name)
		if err != nil {
			continue // refused or gone: skipped, as in a listing
		}
		s.file(j, f, f.Size(), buf, j.fsPaths[i])
		_ = f.Close()
		if len(j.lines) > s.max {
			break // enough for any consumer
		}
	}
	if j.dir.d.Recheck() != nil {
		j.lines = nil
	}
}

// file matches one opened file: read whole (into the reused buffer) when
// within the read limit, else streamed line by line. Binary files (a NUL
// in the first 8 KB) are skipped.
func (s *grepSearch) file(j *grepJob, r io.Reader, size int64, buf *[]byte, fsPath string) {
	display := ""
	emit := func(line int, text []byte) bool {
		if display == "" {
			display = s.display(fsPath)
		}
		if len(text) > maxGrepLine {
			text = append(text[:maxGrepLine:maxGrepLine], "…"...)
		}
		j.lines = append(j.lines, fmt.Appendf(nil, "%s:%d:%s\n", display, line, text))
		return len(j.lines) <= s.max
	}
	if size > s.maxFile {
		s.m.stream(r, emit)
		return
	}
	var data []byte
	var err error
	if ra, ok := r.(wholeReader); ok {
		data, err = ra.ReadAll(*buf)
	} else {
		data, err = readAllInto(r, *buf)
	}
	*buf = data[:0]
	if err != nil {
		return
	}
	if bytes.IndexByte(data[:min(len(data), 8192)], 0) >= 0 {
		return
	}
	s.m.each(data, emit)
}

func readAllInto(r io.Reader, buf []byte) ([]byte, error) {
	b := bytes.NewBuffer(buf[:0])
	_, err := b.ReadFrom(r)
	return b.Bytes(), err
}

// result renders the matches.
func (s *grepSearch) result() *sdk.Result {
	if len(s.lines) == 0 {
		return sdk.Text("No matches found")
	}
	var b strings.Builder
	for _, l := range s.lines {
		b.Write(l)
	}
	res := sdk.Text(b.String())
	if s.cut {
		res = withTruncation(res, truncation{
			Returned: len(s.lines), OmittedAtLeast: 1, Limit: s.max, LimitArgument: "max_results",
			Next: "the search stopped at max_results matching lines; raise max_results (at most 10000) or narrow the pattern, path or glob",
		})
	}
	return res
}

// matcher finds the lines of a text that match a regular expression, as a
// line-by-line search would, without running the expression on every
// line. When every match must contain a literal (the whole pattern, or a
// part of it such as "_needle" in `\w+_needle`), only the lines holding
// that literal, found with bytes.Index, are tested. Otherwise the
// expression runs once over the rest of the text in multi-line mode to
// find the next line that can match (a line that matches alone matches
// there too, at the same place, so no line before that match can; \A and
// \z, whose meaning differs, make it test every line).
type matcher struct {
	re    *regexp.Regexp
	multi *regexp.Regexp
	lit   []byte // every matching line contains it
	exact bool   // the pattern is lit itself
}

func newMatcher(re *regexp.Regexp, expr, pattern string) *matcher {
	m := &matcher{re: re}
	if lit, complete := re.LiteralPrefix(); complete && lit != "" {
		m.lit, m.exact = []byte(lit), true
		return m
	}
	if lit := requiredRegexpLiteral(expr); len(lit) >= 3 && !strings.ContainsRune(lit, '\n') {
		m.lit = []byte(lit)
		return m
	}
	if !strings.Contains(pattern, `\A`) && !strings.Contains(pattern, `\z`) {
		m.multi, _ = regexp.Compile("(?m)" + expr)
	}
	return m
}

// requiredRegexpLiteral returns a string every match of expr contains
// (case-sensitively), or "": the longest run of literal text in the
// concatenation at its top, looking through groups and repetitions that
// occur at least once.
func requiredRegexpLiteral(expr string) string {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return ""
	}
	var req func(*syntax.Regexp) string
	req = func(r *syntax.Regexp) string {
		switch r.Op {
		case syntax.OpLiteral:
			if r.Flags&syntax.FoldCase != 0 {
				return ""
			}
			return string(r.Rune)
		case syntax.OpCapture, syntax.OpPlus:
			return req(r.Sub[0])
		case syntax.OpRepeat:
			if r.Min >= 1 {
				return req(r.Sub[0])
			}
		case syntax.OpConcat:
			best, run := "", ""
			for _, sub := range r.Sub {
				if sub.Op == syntax.OpLiteral && sub.Flags&syntax.FoldCase == 0 {
					run += string(sub.Rune)
					if len(run) > len(best) {
						best = run
					}
					continue
				}
				run = ""
				if l := req(sub); len(l) > len(best) {
					best = l
				}
			}
			return best
		}
		return ""
	}
	return req(re.Simplify())
}

// each calls emit for every matching line (1-based number, text without
// its line ending), until emit returns false.
func (m *matcher) each(data []byte, emit func(int, []byte) bool) {
	// A line's "\r\n" ending is not a line end to the multi-line search
	// ("one$" would miss "one\r"): such text is tested line by line.
	multi := m.multi
	if multi != nil && bytes.IndexByte(data, '\r') >= 0 {
		multi = nil
	}
	line, pos := 1, 0
	for pos < len(data) {
		at := pos
		switch {
		case m.lit != nil:
			i := bytes.Index(data[pos:], m.lit)
			if i < 0 {
				return
			}
			at = pos + i
		case multi != nil:
			loc := multi.FindIndex(data[pos:])
			if loc == nil {
				return
			}
			at = pos + loc[0]
		}
		ls := pos
		if i := bytes.LastIndexByte(data[pos:at], '\n'); i >= 0 {
			ls = pos + i + 1
			line += bytes.Count(data[pos:ls], []byte{'\n'})
		}
		if ls == len(data) {
			return // after the last line's newline: no line
		}
		end, next := len(data), len(data)
		if i := bytes.IndexByte(data[ls:], '\n'); i >= 0 {
			end, next = ls+i, ls+i+1
		}
		text := bytes.TrimSuffix(data[ls:end], []byte{'\r'})
		var ok bool
		if m.exact {
			ok = bytes.Contains(text, m.lit)
		} else {
			ok = m.re.Match(text)
		}
		if ok && !emit(line, text) {
			return
		}
		pos = next
		line++
	}
}

// stream matches a file too large to read whole, line by line.
func (m *matcher) stream(r io.Reader, emit func(int, []byte) bool) {
	br := bufio.NewReaderSize(r, 64*1024)
	head, _ := br.Peek(8192)
	if bytes.IndexByte(head, 0) >= 0 {
		return
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 64*1024), maxLineBytes)
	for line := 1; sc.Scan(); line++ {
		if m.re.Match(sc.Bytes()) {
			if !emit(line, sc.Bytes()) {
				return
			}
		}
	}
}

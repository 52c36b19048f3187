package filesystem

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	ignore "github.com/sabhiram/go-gitignore"

	"github.com/switchboard-mcp/switchboard/sdk"
)

// Walk limits.
const (
	maxTreeEntries   = 10000
	maxSearchResults = 1000
	defaultGrepMax   = 100
	maxGrepLine      = 500
)

var errLimit = errors.New("limit reached")

func (p *plugin) addSearchTools(s *sdk.Server) {
	t := readTool("directory_tree", "Directory tree", "A recursive JSON tree of a directory ({name, type, children}). Skips .git and what .gitignore ignores (include_ignored to list those too) and anything matching excludePatterns.")
	t.PermissionPattern = p.pathPatterns("path")
	sdk.AddTool(s, t, p.directoryTree)

	t = readTool("search_files", "Find files by name", "Find files and directories under path whose path matches a glob (** for any depth, e.g. **/*.go; a pattern without / matches names at any depth). Skips .git and .gitignored paths by default.")
	t.PermissionPattern = p.pathPatterns("path")
	sdk.AddTool(s, t, p.searchFiles)

	t = readTool("grep", "Search file contents", "Search text files under path (default: the project) for a regular expression (RE2 syntax). Returns file:line:text. glob limits which files are searched; .git and .gitignored files are skipped by default.")
	t.PermissionPattern = p.pathPatterns("path")
	sdk.AddTool(s, t, p.grep)
}

// walker walks a located directory through its os.Root, skipping .git,
// what .gitignore files ignore (unless told not to) and exclude patterns.
// Every directory and file it opens is checked by confine, and protected
// entries are left out of every listing, so walks neither show nor read
// them.
type walker struct {
	fsys           fs.FS
	start          string // FS path of the walk's root
	exclude        []string
	includeIgnored bool
	ignores        map[string]*ignore.GitIgnore // FS dir -> its .gitignore
}

func (p *plugin) newWalker(l loc, exclude []string, includeIgnored bool) (*walker, error) {
	for _, pat := range exclude {
		if !doublestar.ValidatePattern(pat) {
			return nil, fmt.Errorf("exclude pattern %q is not a valid glob", pat)
		}
	}
	w := &walker{fsys: p.roots.FS(l.root), start: filepathToFS(l.Rel), exclude: exclude, includeIgnored: includeIgnored, ignores: map[string]*ignore.GitIgnore{}}
	// .gitignore files above the start (up to the root) apply too.
	for dir := path.Dir(w.start); w.start != "."; dir = path.Dir(dir) {
		w.enter(dir)
		if dir == "." {
			break
		}
	}
	return w, nil
}

func filepathToFS(p string) string { return strings.ReplaceAll(p, "\\", "/") }

// rel is an FS path relative to the walk's root.
func (w *walker) rel(fsPath string) string {
	if w.start == "." {
		return fsPath
	}
	r := strings.TrimPrefix(fsPath, w.start)
	return strings.TrimPrefix(r, "/")
}

// skip reports whether an entry is left out (and, for a directory, its
// whole subtree).
func (w *walker) skip(fsPath string, d fs.DirEntry) bool {
	if fsPath == w.start {
		return false
	}
	if d.Name() == ".git" {
		return true
	}
	rel := w.rel(fsPath)
	for _, pat := range w.exclude {
		if m, _ := doublestar.Match(pat, rel); m {
			return true
		}
		if m, _ := doublestar.Match(pat, d.Name()); m {
			return true
		}
	}
	if w.includeIgnored {
		return false
	}
	// Every .gitignore from the walk's root down to the entry's folder.
	for dir := path.Dir(fsPath); ; dir = path.Dir(dir) {
		if gi := w.ignores[dir]; gi != nil {
			sub := strings.TrimPrefix(strings.TrimPrefix(fsPath, dir), "/")
			if dir == "." {
				sub = fsPath
			}
			if d.IsDir() {
				sub += "/"
			}
			if gi.MatchesPath(sub) {
				return true
			}
		}
		if dir == "." || dir == "/" {
			break
		}
	}
	return false
}

// enter loads a directory's .gitignore.
func (w *walker) enter(fsPath string) {
	if w.includeIgnored {
		return
	}
	b, err := fs.ReadFile(w.fsys, path.Join(fsPath, ".gitignore"))
	if err != nil {
		return
	}
	w.ignores[fsPath] = ignore.CompileIgnoreLines(strings.Split(string(b), "\n")...)
}

// walk calls fn for every entry that is not skipped.
func (w *walker) walk(ctx context.Context, fn func(fsPath string, d fs.DirEntry) error) error {
	return fs.WalkDir(w.fsys, w.start, func(fsPath string, d fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			if fsPath == w.start {
				return err
			}
			return nil // unreadable entries are skipped
		}
		if w.skip(fsPath, d) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			w.enter(fsPath)
		}
		return fn(fsPath, d)
	})
}

type treeArgs struct {
	Path            string   `json:"path" jsonschema:"description=Directory to describe"`
	ExcludePatterns []string `json:"excludePatterns,omitempty" jsonschema:"description=Globs of paths to leave out"`
	MaxDepth        int      `json:"max_depth,omitempty" jsonschema:"description=How many levels to descend (default: all),minimum=1"`
	IncludeIgnored  bool     `json:"include_ignored,omitempty" jsonschema:"description=Also list what .gitignore ignores"`
}

type treeNode struct {
	Name     string      `json:"name"`
	Type     string      `json:"type"`
	Children []*treeNode `json:"children,omitempty"`
}

func (p *plugin) directoryTree(ctx context.Context, _ *sdk.Request, in treeArgs) (*sdk.Result, error) {
	l, err := p.locate(orDot(in.Path))
	if err != nil {
		return sdk.ErrorResult("cannot read %s: %v", in.Path, err), nil
	}
	w, err := p.newWalker(l, in.ExcludePatterns, in.IncludeIgnored)
	if err != nil {
		return sdk.ErrorResult("%v", err), nil
	}
	root := &treeNode{Name: path.Base(l.Real), Type: "directory", Children: []*treeNode{}}
	nodes := map[string]*treeNode{l.Rel: root}
	count := 0
	err = w.walk(ctx, func(fsPath string, d fs.DirEntry) error {
		if fsPath == w.start {
			if !d.IsDir() {
				return fmt.Errorf("%s is not a directory", in.Path)
			}
			return nil
		}
		depth := strings.Count(w.rel(fsPath), "/") + 1
		if in.MaxDepth > 0 && depth > in.MaxDepth {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if count++; count > maxTreeEntries {
			return errLimit
		}
		n := &treeNode{Name: d.Name(), Type: "file"}
		if d.IsDir() {
			n.Type, n.Children = "directory", []*treeNode{}
			nodes[fsPath] = n
		}
		if parent := nodes[path.Dir(fsPath)]; parent != nil {
			parent.Children = append(parent.Children, n)
		}
		return nil
	})
	note := ""
	switch {
	case errors.Is(err, errLimit):
		note = fmt.Sprintf("\n[tree cut at %d entries; narrow path or add excludePatterns]", maxTreeEntries)
	case err != nil:
		return sdk.ErrorResult("cannot read %s: %v", in.Path, err), nil
	}
	b, _ := json.MarshalIndent(root.Children, "", "  ")
	return sdk.Text(string(b) + note), nil
}

func orDot(p string) string {
	if p == "" {
		return "."
	}
	return p
}

type searchArgs struct {
	Path            string   `json:"path" jsonschema:"description=Directory to search under"`
	Pattern         string   `json:"pattern" jsonschema:"description=Glob such as *.go or **/test_*.py or docs/**/*.md"`
	ExcludePatterns []string `json:"excludePatterns,omitempty" jsonschema:"description=Globs of paths to leave out"`
	IncludeIgnored  bool     `json:"include_ignored,omitempty" jsonschema:"description=Also search what .gitignore ignores"`
}

func (p *plugin) searchFiles(ctx context.Context, _ *sdk.Request, in searchArgs) (*sdk.Result, error) {
	if !doublestar.ValidatePattern(in.Pattern) || in.Pattern == "" {
		return sdk.ErrorResult("pattern %q is not a valid glob", in.Pattern), nil
	}
	l, err := p.locate(orDot(in.Path))
	if err != nil {
		return sdk.ErrorResult("cannot search %s: %v", in.Path, err), nil
	}
	w, err := p.newWalker(l, in.ExcludePatterns, in.IncludeIgnored)
	if err != nil {
		return sdk.ErrorResult("%v", err), nil
	}
	byName := !strings.Contains(in.Pattern, "/")
	var out []string
	err = w.walk(ctx, func(fsPath string, d fs.DirEntry) error {
		if fsPath == w.start {
			return nil
		}
		target := w.rel(fsPath)
		if byName {
			target = d.Name()
		}
		if m, _ := doublestar.Match(in.Pattern, target); m {
			if len(out) >= maxSearchResults {
				return errLimit
			}
			out = append(out, p.roots.Display(path.Join(l.Root, fsPath)))
		}
		return nil
	})
	if err != nil && !errors.Is(err, errLimit) {
		return sdk.ErrorResult("cannot search %s: %v", in.Path, err), nil
	}
	if len(out) == 0 {
		return sdk.Text("No matches found"), nil
	}
	text := strings.Join(out, "\n")
	if errors.Is(err, errLimit) {
		text += fmt.Sprintf("\n[stopped at %d results; narrow the pattern]", maxSearchResults)
	}
	return sdk.Text(text), nil
}

type grepArgs struct {
	Pattern        string `json:"pattern" jsonschema:"description=Regular expression (RE2 syntax)"`
	Path           string `json:"path,omitempty" jsonschema:"description=File or directory to search (default: the project directory)"`
	Glob           string `json:"glob,omitempty" jsonschema:"description=Only search files whose name (or path, if it has a /) matches this glob"`
	MaxResults     int    `json:"max_results,omitempty" jsonschema:"description=Stop after this many matching lines (default 100),minimum=1,maximum=10000"`
	IgnoreCase     bool   `json:"ignore_case,omitempty" jsonschema:"description=Match case-insensitively"`
	IncludeIgnored bool   `json:"include_ignored,omitempty" jsonschema:"description=Also search what .gitignore ignores"`
}

func (p *plugin) grep(ctx context.Context, _ *sdk.Request, in grepArgs) (*sdk.Result, error) {
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
	w, err := p.newWalker(l, nil, in.IncludeIgnored)
	if err != nil {
		return sdk.ErrorResult("%v", err), nil
	}
	g := &grepper{re: re, buf: make([]byte, 0, 256<<10), maxFile: p.maxRead}
	// A whole-file pass finds files with no match at once. In multi-line
	// mode it can only over-match a per-line search, except with \A or \z,
	// whose meaning differs, so those skip the shortcut.
	if !strings.Contains(in.Pattern, `\A`) && !strings.Contains(in.Pattern, `\z`) {
		g.prefilter, _ = regexp.Compile("(?m)" + expr)
	}
	var b strings.Builder
	n := 0
	err = w.walk(ctx, func(fsPath string, d fs.DirEntry) error {
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		if in.Glob != "" {
			target := d.Name()
			if strings.Contains(in.Glob, "/") {
				target = w.rel(fsPath)
			}
			if m, _ := doublestar.Match(in.Glob, target); !m {
				return nil
			}
		}
		return g.file(w.fsys, fsPath, func(line int, text []byte) error {
			if n >= maxResults {
				return errLimit
			}
			n++
			if len(text) > maxGrepLine {
				text = append(text[:maxGrepLine:maxGrepLine], "…"...)
			}
			fmt.Fprintf(&b, "%s:%d:%s\n", p.roots.Display(path.Join(l.Root, fsPath)), line, text)
			return nil
		})
	})
	if err != nil && !errors.Is(err, errLimit) {
		return sdk.ErrorResult("cannot search %s: %v", in.Path, err), nil
	}
	if n == 0 {
		return sdk.Text("No matches found"), nil
	}
	if errors.Is(err, errLimit) {
		fmt.Fprintf(&b, "[stopped at %d matches; raise max_results or narrow the search]\n", maxResults)
	}
	return sdk.Text(b.String()), nil
}

// grepper searches files with one reused buffer.
type grepper struct {
	re, prefilter *regexp.Regexp
	buf           []byte
	maxFile       int64
}

// file reports the matching lines of a text file; binary files (a NUL in
// the first 8 KB) are skipped, and files larger than maxFile are streamed
// line by line.
func (g *grepper) file(fsys fs.FS, name string, emit func(int, []byte) error) error {
	f, err := fsys.Open(name)
	if err != nil {
		return nil
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > g.maxFile {
		return g.stream(f, emit)
	}
	g.buf = g.buf[:0]
	for {
		if len(g.buf) == cap(g.buf) {
			g.buf = append(g.buf, 0)[:len(g.buf)]
		}
		n, err := f.Read(g.buf[len(g.buf):cap(g.buf)])
		g.buf = g.buf[:len(g.buf)+n]
		if err != nil {
			break
		}
	}
	data := g.buf
	if bytes.IndexByte(data[:min(len(data), 8192)], 0) >= 0 {
		return nil
	}
	if g.prefilter != nil && !g.prefilter.Match(data) {
		return nil
	}
	for line := 1; len(data) > 0; line++ {
		end := bytes.IndexByte(data, '\n')
		text := data
		if end >= 0 {
			text, data = data[:end], data[end+1:]
		} else {
			data = nil
		}
		text = bytes.TrimSuffix(text, []byte{'\r'})
		if g.re.Match(text) {
			if err := emit(line, text); err != nil {
				return err
			}
		}
	}
	return nil
}

func (g *grepper) stream(r io.Reader, emit func(int, []byte) error) error {
	br := bufio.NewReaderSize(r, 64*1024)
	head, _ := br.Peek(8192)
	if bytes.IndexByte(head, 0) >= 0 {
		return nil
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 64*1024), maxLineBytes)
	for line := 1; sc.Scan(); line++ {
		if g.re.Match(sc.Bytes()) {
			if err := emit(line, sc.Bytes()); err != nil {
				return err
			}
		}
	}
	return nil
}

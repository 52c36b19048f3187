package filesystem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/switchboard-mcp/switchboard/sdk"
)

// Walk limits.
const (
	maxTreeEntries = 10000
	// maxTreeDepth is the deepest directory_tree goes, asked or not: a
	// chain of thousands of nested folders made a result that grew with
	// the square of the depth and, past 5,000 levels, came back empty
	// (its indentation exceeded encoding/json's nesting limit; found from
	// outside).
	maxTreeDepth     = 256
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

func (p *plugin) directoryTree(ctx context.Context, req *sdk.Request, in treeArgs) (*sdk.Result, error) {
	defer p.trim.Later()
	l, err := p.locate(orDot(in.Path))
	if err != nil {
		return sdk.ErrorResult("cannot read %s: %v", in.Path, err), nil
	}
	w, err := p.newWalker(req, l, in.ExcludePatterns, in.IncludeIgnored)
	if err != nil {
		return sdk.ErrorResult("%v", err), nil
	}
	w.maxDepth = in.MaxDepth
	capped := w.maxDepth == 0 || w.maxDepth > maxTreeDepth
	if capped {
		w.maxDepth = maxTreeDepth
	}
	start, err := w.open()
	if err != nil {
		if st, serr := p.stat(l); serr == nil && !st.IsDir() {
			return sdk.ErrorResult("cannot read %s: %s is not a directory", in.Path, in.Path), nil
		}
		return sdk.ErrorResult("cannot read %s: %v", in.Path, err), nil
	}
	defer widen()()
	root := &treeNode{Name: path.Base(l.Real), Type: "directory", Children: []*treeNode{}}
	nodes := map[string]*treeNode{w.start: root}
	count := 0
	deepCut := false // a folder at maxTreeDepth was not entered
	err = w.walk(ctx, start, func(e walkEntry) error {
		if count++; count > maxTreeEntries {
			return errLimit
		}
		n := &treeNode{Name: e.name, Type: "file"}
		if e.isDir() {
			n.Type, n.Children = "directory", []*treeNode{}
			nodes[e.fsPath] = n
			if capped && !w.descends(&walkDir{depth: e.dir.depth + 1}) {
				deepCut = true
			}
		}
		if parent := nodes[e.dir.fsPath]; parent != nil {
			parent.Children = append(parent.Children, n)
		}
		return nil
	})
	switch {
	case errors.Is(err, errLimit):
		b, _ := json.MarshalIndent(struct {
			Entries   []*treeNode `json:"entries"`
			Truncated truncation  `json:"truncated"`
		}{root.Children, truncation{
			Returned: maxTreeEntries, OmittedAtLeast: 1, Limit: maxTreeEntries,
			Next: "the tree stopped at its limit of entries; describe a narrower path, set max_depth or add excludePatterns",
		}}, "", "  ")
		return sdk.Text(string(b)), nil
	case err != nil:
		return sdk.ErrorResult("cannot read %s: %v", in.Path, err), nil
	}
	if deepCut {
		b, err := json.MarshalIndent(struct {
			Entries   []*treeNode `json:"entries"`
			Truncated truncation  `json:"truncated"`
		}{root.Children, truncation{
			Returned: count, Limit: maxTreeDepth, LimitArgument: "max_depth",
			Next: fmt.Sprintf("folders deeper than %d levels were not entered; ask for a deeper path", maxTreeDepth),
		}}, "", "  ")
		if err != nil {
			return sdk.ErrorResult("the tree does not encode as JSON: %v", err), nil
		}
		return sdk.Text(string(b)), nil
	}
	b, err := json.MarshalIndent(root.Children, "", "  ")
	if err != nil {
		return sdk.ErrorResult("the tree does not encode as JSON: %v", err), nil
	}
	return sdk.Text(string(b)), nil
}

// truncation says, in JSON, that a result was cut: how much it holds, that
// more was left out, and how to get the rest. directory_tree carries it as
// the "truncated" member of its JSON; grep and search_files, whose results
// are lines, as a last text item {"truncated": {…}} of its own.
type truncation struct {
	Returned       int    `json:"returned"`
	OmittedAtLeast int    `json:"omitted_at_least"`
	Limit          int    `json:"limit"`
	LimitArgument  string `json:"limit_argument,omitempty"`
	Next           string `json:"next"`
}

// withTruncation adds the cut as a JSON text item of its own.
func withTruncation(r *sdk.Result, t truncation) *sdk.Result {
	b, _ := json.Marshal(struct {
		Truncated truncation `json:"truncated"`
	}{t})
	return r.WithText(string(b))
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

func (p *plugin) searchFiles(ctx context.Context, req *sdk.Request, in searchArgs) (*sdk.Result, error) {
	defer p.trim.Later()
	if !doublestar.ValidatePattern(in.Pattern) || in.Pattern == "" {
		return sdk.ErrorResult("pattern %q is not a valid glob", in.Pattern), nil
	}
	l, err := p.locate(orDot(in.Path))
	if err != nil {
		return sdk.ErrorResult("cannot search %s: %v", in.Path, err), nil
	}
	w, err := p.newWalker(req, l, in.ExcludePatterns, in.IncludeIgnored)
	if err != nil {
		return sdk.ErrorResult("%v", err), nil
	}
	start, err := w.open()
	if err != nil {
		if st, serr := p.stat(l); serr == nil && !st.IsDir() {
			return sdk.Text("No matches found"), nil // a file: nothing below it
		}
		return sdk.ErrorResult("cannot search %s: %v", in.Path, err), nil
	}
	defer widen()()
	byName := !strings.Contains(in.Pattern, "/")
	var out []string
	err = w.walk(ctx, start, func(e walkEntry) error {
		target := e.rel
		if byName {
			target = e.name
		}
		if m, _ := doublestar.Match(in.Pattern, target); m {
			if len(out) >= maxSearchResults {
				return errLimit
			}
			out = append(out, p.roots.Display(path.Join(l.Root, e.fsPath)))
		}
		return nil
	})
	if err != nil && !errors.Is(err, errLimit) {
		return sdk.ErrorResult("cannot search %s: %v", in.Path, err), nil
	}
	if len(out) == 0 {
		return sdk.Text("No matches found"), nil
	}
	res := sdk.Text(strings.Join(out, "\n"))
	if errors.Is(err, errLimit) {
		res = withTruncation(res, truncation{
			Returned: len(out), OmittedAtLeast: 1, Limit: maxSearchResults,
			Next: "the search stopped at its limit of results; narrow the pattern or path, or add excludePatterns",
		})
	}
	return res, nil
}

type grepArgs struct {
	Pattern        string `json:"pattern" jsonschema:"description=Regular expression (RE2 syntax)"`
	Path           string `json:"path,omitempty" jsonschema:"description=File or directory to search (default: the project directory)"`
	Glob           string `json:"glob,omitempty" jsonschema:"description=Only search files whose name (or path, if it has a /) matches this glob"`
	MaxResults     int    `json:"max_results,omitempty" jsonschema:"description=Stop after this many matching lines (default 100),minimum=1,maximum=10000"`
	IgnoreCase     bool   `json:"ignore_case,omitempty" jsonschema:"description=Match case-insensitively"`
	IncludeIgnored bool   `json:"include_ignored,omitempty" jsonschema:"description=Also search what .gitignore ignores"`
}

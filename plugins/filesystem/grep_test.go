package filesystem

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	ignore "github.com/sabhiram/go-gitignore"

	"github.com/switchboard-mcp/switchboard/internal/fixtures/srctree"
)

// sequentialGrep is the plain search grep's results must equal: fs.WalkDir
// in name order, .git and .gitignored paths skipped (every .gitignore from
// the root down, as go-gitignore matches it), regular text files only, each
// line matched alone.
func sequentialGrep(t *testing.T, dir, expr string, max int) string {
	t.Helper()
	return sequentialWalk(t, dir, expr, max, nil)
}

// sequentialWalk greps for expr, or with found collects the paths whose
// name matches the glob expr.
func sequentialWalk(t *testing.T, dir, expr string, max int, found *[]string) string {
	t.Helper()
	var re *regexp.Regexp
	if found == nil {
		re = regexp.MustCompile(expr)
	}
	fsys := os.DirFS(dir)
	ignores := map[string]*ignore.GitIgnore{}
	var b strings.Builder
	n := 0
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if p != "." {
			if d.Name() == ".git" {
				return fs.SkipDir
			}
			for gd := path.Dir(p); ; gd = path.Dir(gd) {
				if gi := ignores[gd]; gi != nil {
					sub := p
					if gd != "." {
						sub = p[len(gd)+1:]
					}
					if d.IsDir() {
						sub += "/"
					}
					if gi.MatchesPath(sub) {
						if d.IsDir() {
							return fs.SkipDir
						}
						return nil
					}
				}
				if gd == "." {
					break
				}
			}
		}
		if d.IsDir() {
			if b, err := fs.ReadFile(fsys, path.Join(p, ".gitignore")); err == nil {
				ignores[p] = ignore.CompileIgnoreLines(strings.Split(string(b), "\n")...)
			}
		}
		if found != nil {
			if m, _ := path.Match(expr, d.Name()); m && p != "." {
				*found = append(*found, p)
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil || bytes.IndexByte(data[:min(len(data), 8192)], 0) >= 0 {
			return nil
		}
		for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
			line = strings.TrimSuffix(line, "\r")
			if (len(data) > 0) && re.MatchString(line) {
				if n >= max {
					return fs.SkipAll
				}
				n++
				fmt.Fprintf(&b, "%s:%d:%s\n", p, i+1, line)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		return "No matches found"
	}
	return b.String()
}

// TestGrepEqualsSequentialSearch: the parallel, fast-pathed grep returns
// exactly what a plain sequential search returns, in the same order, for
// literal patterns, patterns holding a literal, patterns without one,
// case-insensitive ones, anchors, and at max_results.
func TestGrepEqualsSequentialSearch(t *testing.T) {
	dir := t.TempDir()
	dir, _ = filepath.EvalSymlinks(dir)
	if _, err := srctree.Write(dir, srctree.Spec{Files: 3000}); err != nil {
		t.Fatal(err)
	}
	extra := map[string]string{
		"crlf.txt":             "alpha one\r\nbeta quixotic_needle\r\n\r\nlast",
		"nonl.go":              "package x\nfunc F7_1() // quixotic_needle at the end",
		"a.go":                 "first quixotic_needle\nquixotic_needle quixotic_needle twice\n\n",
		"empty.txt":            "",
		"bin.dat":              "quixotic_needle\x00binary",
		"mod000/x/.gitignore":  "*.go\n!keep.go\n",
		"mod000/x/keep.go":     "quixotic_needle kept\n",
		"mod000/x/drop.go":     "quixotic_needle dropped\n",
		"mod000/x/sub/deep.go": "quixotic_needle deep and ignored\n",
		"Z/upper.txt":          "QUIXOTIC_NEEDLE upper\n",
	}
	for name, body := range extra {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a.go", filepath.Join(dir, "link.go")); err != nil {
		t.Fatal(err)
	}
	p := benchPlugin(t, dir)
	for _, tt := range []struct {
		pattern string
		max     int
	}{
		{srctree.Needle, 10000},
		{`\w+_needle`, 10000},
		{`(?i)quixotic_NEEDLE`, 10000},
		{`func F7_\d+\(`, 10000},
		{`func F7_\d+\(`, 37},
		{`[A-Z]{3}\d`, 10000},
		{`^$`, 200},
		{`\Apackage`, 50},
		{`one$`, 10},
		{`y \+ "q`, 10000},
	} {
		want := sequentialGrep(t, dir, tt.pattern, tt.max)
		res, err := p.grep(context.Background(), nil, grepArgs{Pattern: tt.pattern, MaxResults: tt.max})
		if err != nil || res.IsError() {
			t.Fatalf("grep(%q): %v %s", tt.pattern, err, resultText(res))
		}
		if got := res.Texts()[0]; got != want {
			t.Errorf("grep(%q, max %d) differs from a sequential search:\n got %d bytes: %.300q\nwant %d bytes: %.300q", tt.pattern, tt.max, len(got), got, len(want), want)
		}
	}
	// search_files lists in the same order.
	for _, glob := range []string{"*.txt", "pkg0*", "*.go"} {
		var found []string
		sequentialWalk(t, dir, glob, 0, &found)
		if len(found) > 1000 {
			found = found[:1000]
		}
		res, err := p.searchFiles(context.Background(), nil, searchArgs{Path: ".", Pattern: glob})
		if err != nil || res.IsError() {
			t.Fatalf("search_files(%q): %v %s", glob, err, resultText(res))
		}
		if got, want := res.Texts()[0], strings.Join(found, "\n"); got != want {
			t.Errorf("search_files(%q) differs from a sequential walk:\n got %.300q\nwant %.300q", glob, got, want)
		}
	}
}

package filesystem_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/plugins/filesystem"
	"github.com/switchboard-mcp/switchboard/sdk/sdktest"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction(sdktest.ReattachWaitFunction))
}

type env struct {
	base, project, outside string
	p                      *sdktest.Plugin
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func setup(t *testing.T, settings ...map[string]any) env {
	t.Helper()
	base := t.TempDir()
	base, _ = filepath.EvalSymlinks(base)
	e := env{base: base, project: filepath.Join(base, "project"), outside: filepath.Join(base, "outside")}
	write(t, filepath.Join(e.project, "f.txt"), "1\n2\n3\n4\n5\n")
	write(t, filepath.Join(e.outside, "secret.txt"), "top secret")
	write(t, filepath.Join(base, "project-evil", "x.txt"), "prefix sibling")
	opts := []sdktest.Option{sdktest.WithProjectDir(e.project)}
	if len(settings) > 0 {
		opts = append(opts, sdktest.WithSettings(settings[0]))
	}
	e.p = sdktest.StartInProcess(t, filesystem.New(), opts...)
	return e
}

func (e env) call(t *testing.T, tool string, args map[string]any) (string, bool) {
	t.Helper()
	res := e.p.Call(tool, args)
	return res.Text(), res.IsError
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestTools(t *testing.T) {
	e := setup(t)
	write(t, filepath.Join(e.project, "docs", "a.md"), "# A\nalpha\n")
	write(t, filepath.Join(e.project, "docs", "b.md"), "# B\nbeta\n")
	write(t, filepath.Join(e.project, "src", "main.go"), "package main\n\nfunc main() {}\n")
	write(t, filepath.Join(e.project, "build", "out.go"), "package out // alpha\n")
	write(t, filepath.Join(e.project, ".gitignore"), "build/\n")
	write(t, filepath.Join(e.project, ".git", "config"), "alpha in git dir\n")
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	if err := os.WriteFile(filepath.Join(e.project, "dot.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		tool    string
		args    map[string]any
		want    []string // substrings
		notWant []string
		isError bool
	}{
		{"read_text_file", map[string]any{"path": "f.txt"}, []string{"1\n2\n3\n4\n5\n", "sha256: " + sha("1\n2\n3\n4\n5\n")}, nil, false},
		{"read_text_file", map[string]any{"path": "f.txt", "head": 2}, []string{"1\n2\nsha256"}, []string{"3"}, false},
		{"read_text_file", map[string]any{"path": "f.txt", "tail": 2}, []string{"4\n5\nsha256"}, []string{"3"}, false},
		{"read_text_file", map[string]any{"path": "f.txt", "offset": 2, "limit": 2}, []string{"2\n3\nsha256"}, []string{"4"}, false},
		{"read_text_file", map[string]any{"path": "f.txt", "head": 1, "tail": 1}, []string{"not both"}, nil, true},
		{"read_text_file", map[string]any{"path": "dot.png"}, []string{"not UTF-8"}, nil, true},
		{"read_text_file", map[string]any{"path": "docs"}, []string{"is a directory"}, nil, true},
		{"read_media_file", map[string]any{"path": "f.txt"}, []string{"not an image or audio"}, nil, true},
		{"read_multiple_files", map[string]any{"paths": []string{"docs/a.md", "nope.txt", "docs/b.md"}}, []string{"docs/a.md:\n# A", "nope.txt: Error", "docs/b.md:\n# B"}, nil, false},
		{"get_file_info", map[string]any{"path": "f.txt"}, []string{"type: file", "size: 10", "permissions: 0644", "sha256: " + sha("1\n2\n3\n4\n5\n")}, nil, false},
		{"get_file_info", map[string]any{"path": "docs"}, []string{"type: directory"}, []string{"sha256"}, false},
		{"list_directory", map[string]any{"path": "."}, []string{"[DIR] docs", "[FILE] f.txt"}, nil, false},
		{"list_directory", map[string]any{"path": "f.txt"}, []string{"not a directory"}, nil, true},
		{"list_directory_with_sizes", map[string]any{"path": "docs", "sortBy": "size"}, []string{"a.md", "b.md", "Total: 2 files, 0 directories"}, nil, false},
		{"directory_tree", map[string]any{"path": "."}, []string{`"name": "docs"`, `"name": "main.go"`}, []string{`"name": "build"`, `".git"`}, false},
		{"directory_tree", map[string]any{"path": ".", "include_ignored": true, "excludePatterns": []string{"docs"}}, []string{`"name": "build"`}, []string{`"name": "docs"`}, false},
		{"directory_tree", map[string]any{"path": ".", "max_depth": 1}, []string{`"name": "src"`}, []string{"main.go"}, false},
		{"search_files", map[string]any{"path": ".", "pattern": "*.md"}, []string{"docs/a.md\ndocs/b.md"}, nil, false},
		{"search_files", map[string]any{"path": ".", "pattern": "**/*.go"}, []string{"src/main.go"}, []string{"build/out.go"}, false},
		{"search_files", map[string]any{"path": "docs", "pattern": "*.md", "excludePatterns": []string{"b.md"}}, []string{"docs/a.md"}, []string{"b.md"}, false},
		{"search_files", map[string]any{"path": ".", "pattern": "*.rs"}, []string{"No matches found"}, nil, false},
		{"grep", map[string]any{"pattern": "alpha"}, []string{"docs/a.md:2:alpha"}, []string{"build/out.go", ".git"}, false},
		{"grep", map[string]any{"pattern": "ALPHA", "ignore_case": true, "include_ignored": true}, []string{"docs/a.md:2:alpha", "build/out.go:1:"}, nil, false},
		{"grep", map[string]any{"pattern": "^#", "glob": "b.md"}, []string{"docs/b.md:1:# B"}, []string{"a.md"}, false},
		{"grep", map[string]any{"pattern": "[", "path": "docs"}, []string{"not a valid regular expression"}, nil, true},
		{"grep", map[string]any{"pattern": ".", "max_results": 1}, []string{`{"truncated":{"returned":1,"omitted_at_least":1,"limit":1,"limit_argument":"max_results"`}, nil, false},
		{"list_allowed_directories", nil, []string{e.project}, nil, false},
	}
	for _, tt := range tests {
		got, isErr := e.call(t, tt.tool, tt.args)
		if isErr != tt.isError {
			t.Errorf("%s(%v) isError = %v, want %v: %q", tt.tool, tt.args, isErr, tt.isError, got)
		}
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s(%v) = %q, want it to contain %q", tt.tool, tt.args, got, w)
			}
		}
		body, _, _ := strings.Cut(got, "sha256: ")
		for _, w := range tt.notWant {
			if strings.Contains(body, w) {
				t.Errorf("%s(%v) = %q, want it not to contain %q", tt.tool, tt.args, got, w)
			}
		}
	}

	res := e.p.Call("read_media_file", map[string]any{"path": "dot.png"})
	if img := res.Content[0]; img.Type != "image" || img.MimeType != "image/png" || len(img.Data) != len(png) {
		t.Errorf("read_media_file(dot.png) = %v", res)
	}
	var tree []map[string]any
	got, _ := e.call(t, "directory_tree", map[string]any{"path": "docs"})
	if err := json.Unmarshal([]byte(got), &tree); err != nil || len(tree) != 2 || tree[0]["type"] != "file" {
		t.Errorf("directory_tree(docs) = %q (%v)", got, err)
	}
}

func TestWriteTools(t *testing.T) {
	e := setup(t)
	steps := []struct {
		tool    string
		args    map[string]any
		want    string
		isError bool
	}{
		{"write_file", map[string]any{"path": "new.txt", "content": "hello\n"}, "Wrote 6 bytes to new.txt (sha256 " + sha("hello\n"), false},
		{"write_file", map[string]any{"path": "new.txt", "content": "x", "if_match": sha("stale")}, "changed since you read it", true},
		{"write_file", map[string]any{"path": "new.txt", "content": "hello again\n", "if_match": sha("hello\n")}, "Wrote 12 bytes", false},
		{"write_file", map[string]any{"path": "missing/dir/x.txt", "content": "x"}, "create it with create_directory", true},
		{"create_directory", map[string]any{"path": "missing/dir"}, "Directory missing/dir exists", false},
		{"write_file", map[string]any{"path": "missing/dir/x.txt", "content": "x"}, "Wrote 1 bytes", false},
		{"move_file", map[string]any{"source": "new.txt", "destination": "missing/moved.txt"}, "Moved new.txt to missing/moved.txt", false},
		{"move_file", map[string]any{"source": "f.txt", "destination": "missing/moved.txt"}, "exists already", true},
		{"move_file", map[string]any{"source": "nope.txt", "destination": "n2.txt"}, "no such file", true},
		{"edit_file", map[string]any{"path": "missing/moved.txt", "edits": []map[string]any{{"oldText": "again", "newText": "there"}}}, "+hello there", false},
		{"edit_file", map[string]any{"path": "missing/moved.txt", "edits": []map[string]any{{"oldText": "absent", "newText": "x"}}}, "edit 1: oldText was not found", true},
		{"edit_file", map[string]any{"path": "missing/moved.txt", "edits": []map[string]any{{"oldText": "hello", "newText": "bye"}}, "if_match": sha("old")}, "changed since", true},
	}
	for _, s := range steps {
		got, isErr := e.call(t, s.tool, s.args)
		if isErr != s.isError || !strings.Contains(got, s.want) {
			t.Errorf("%s(%v) = %q (isError %v), want %q (isError %v)", s.tool, s.args, got, isErr, s.want, s.isError)
		}
	}
	b, _ := os.ReadFile(filepath.Join(e.project, "missing", "moved.txt"))
	if string(b) != "hello there\n" {
		t.Errorf("moved.txt = %q", b)
	}
	// A failed if_match leaves the file alone.
	e.call(t, "write_file", map[string]any{"path": "missing/moved.txt", "content": "clobbered", "if_match": sha("nope")})
	if b, _ := os.ReadFile(filepath.Join(e.project, "missing", "moved.txt")); string(b) != "hello there\n" {
		t.Errorf("a refused write changed the file: %q", b)
	}
	// No temporary files are left behind.
	ents, _ := os.ReadDir(filepath.Join(e.project, "missing"))
	for _, en := range ents {
		if strings.HasPrefix(en.Name(), ".sb-") {
			t.Errorf("temporary file left: %s", en.Name())
		}
	}
}

func TestEditGolden(t *testing.T) {
	tests := []struct {
		name       string
		content    string
		edits      []filesystem.Edit
		replaceAll bool
	}{
		{"exact", "a\nb\nc\n", []filesystem.Edit{{OldText: "b", NewText: "B"}}, false},
		{"multiline", "func f() {\n\treturn 1\n}\n", []filesystem.Edit{{OldText: "\treturn 1\n", NewText: "\tx := 1\n\treturn x\n"}}, false},
		{"whitespace_tolerant_keeps_indent", "if x {\n        call(a)\n        call(b)\n}\n", []filesystem.Edit{{OldText: "call(a)\ncall(b)", NewText: "call(c)\n  nested(d)"}}, false},
		{"replace_all", "x = 1\ny = x\nz = x\n", []filesystem.Edit{{OldText: "x", NewText: "w"}}, true},
		{"sequence", "one\ntwo\nthree\n", []filesystem.Edit{{OldText: "one", NewText: "1"}, {OldText: "three", NewText: "3"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := filesystem.ApplyEdits(tt.content, tt.edits, tt.replaceAll)
			if err != nil {
				t.Fatal(err)
			}
			got := filesystem.UnifiedDiff("file.txt", tt.content, out) + "=== result ===\n" + out
			golden := filepath.Join("testdata", "edit", tt.name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if got != string(want) {
				t.Errorf("diff for %s:\n%s\nwant:\n%s", tt.name, got, want)
			}
		})
	}
	if _, err := filesystem.ApplyEdits("x x", []filesystem.Edit{{OldText: "x", NewText: "y"}}, false); err == nil || !strings.Contains(err.Error(), "edit 1: oldText matches 2 places") {
		t.Errorf("ambiguous edit err = %v", err)
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	e := setup(t)
	got, isErr := e.call(t, "edit_file", map[string]any{"path": "f.txt", "dryRun": true, "edits": []map[string]any{{"oldText": "3", "newText": "three"}}})
	if isErr || !strings.Contains(got, "-3\n+three") {
		t.Errorf("dry run = %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(e.project, "f.txt")); string(b) != "1\n2\n3\n4\n5\n" {
		t.Errorf("dry run wrote: %q", b)
	}
}

func TestReadCap(t *testing.T) {
	e := setup(t, map[string]any{"max_read_bytes": 20})
	write(t, filepath.Join(e.project, "big.txt"), strings.Repeat("line\n", 10))
	got, isErr := e.call(t, "read_text_file", map[string]any{"path": "big.txt"})
	if !isErr || !strings.Contains(got, "read limit") || !strings.Contains(got, "head") {
		t.Errorf("read over the cap = %q", got)
	}
	if got, isErr := e.call(t, "read_text_file", map[string]any{"path": "big.txt", "head": 2}); isErr || !strings.HasPrefix(got, "line\nline\nsha256") {
		t.Errorf("head under the cap = %q", got)
	}
}

// TestAdvisories has one case per advisory against the reference server.
func TestAdvisories(t *testing.T) {
	e := setup(t)
	mustLink := func(target, link string) {
		t.Helper()
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	mustLink(filepath.Join(e.outside, "secret.txt"), filepath.Join(e.project, "file-link"))
	mustLink(e.outside, filepath.Join(e.project, "dir-link"))
	mustLink(filepath.Join(e.project, "chain2"), filepath.Join(e.project, "chain1"))
	mustLink(filepath.Join(e.project, "dir-link"), filepath.Join(e.project, "chain2"))
	mustLink(filepath.Join(e.outside, "new.txt"), filepath.Join(e.project, "dangling"))

	paths := []struct {
		name, path string
	}{
		{"CVE-2025-53110 prefix bypass", "../project-evil/x.txt"},
		{"CVE-2025-53110 prefix bypass, absolute", filepath.Join(e.base, "project-evil", "x.txt")},
		{"CVE-2025-53109 symlinked file", "file-link"},
		{"CVE-2025-53109 symlinked directory", "dir-link/secret.txt"},
		{"CVE-2025-53109 symlink chain", "chain1/secret.txt"},
		{"dangling symlink to outside", "dangling"},
		{"dot-dot traversal", "../outside/secret.txt"},
		{"dot-dot inside a path", "docs/../../outside/secret.txt"},
		{"absolute path outside", filepath.Join(e.outside, "secret.txt")},
		{"NUL byte", "f.txt\x00/../../outside/secret.txt"},
		{"GHSA-7rgq-gccq-qphx trailing quote", "f.txt'"},
		{"GHSA-7rgq-gccq-qphx trailing space", "f.txt "},
		{"leading quote", "\"f.txt"},
	}
	for _, pc := range paths {
		t.Run(pc.name, func(t *testing.T) {
			for _, call := range []struct {
				tool string
				args map[string]any
			}{
				{"read_text_file", map[string]any{"path": pc.path}},
				{"get_file_info", map[string]any{"path": pc.path}},
				{"list_directory", map[string]any{"path": pc.path}},
				{"write_file", map[string]any{"path": pc.path, "content": "pwned"}},
				{"edit_file", map[string]any{"path": pc.path, "edits": []map[string]any{{"oldText": "top", "newText": "pwned"}}}},
				{"create_directory", map[string]any{"path": pc.path}},
				{"move_file", map[string]any{"source": "f.txt", "destination": pc.path}},
				{"move_file", map[string]any{"source": pc.path, "destination": "stolen.txt"}},
				{"grep", map[string]any{"pattern": "secret", "path": pc.path}},
				{"search_files", map[string]any{"path": pc.path, "pattern": "*"}},
				{"directory_tree", map[string]any{"path": pc.path}},
			} {
				got, isErr := e.call(t, call.tool, call.args)
				if !isErr {
					t.Errorf("%s(%q) = %q, want refused", call.tool, pc.path, got)
				}
				if strings.Contains(got, "top secret") || strings.Contains(got, "prefix sibling") {
					t.Errorf("%s(%q) leaked outside content: %q", call.tool, pc.path, got)
				}
			}
		})
	}
	// Nothing outside changed.
	if b, _ := os.ReadFile(filepath.Join(e.outside, "secret.txt")); string(b) != "top secret" {
		t.Errorf("outside file changed: %q", b)
	}
	if ents, _ := os.ReadDir(e.outside); len(ents) != 1 {
		t.Errorf("outside folder has %d entries, want only secret.txt", len(ents))
	}
	// Walks list symlinks but never follow them out.
	got, _ := e.call(t, "grep", map[string]any{"pattern": "secret", "include_ignored": true})
	if strings.Contains(got, "top secret") {
		t.Errorf("grep followed a symlink out: %q", got)
	}
}

// TestParentSwappedForSymlink is GHSA-53mr-w429-c597: a folder swapped for a
// symlink to the outside between the check and the write. A goroutine
// keeps moving the real folder away, planting a symlink to the outside in
// its place, and moving it back, while writes go on; no write may land
// outside.
func TestParentSwappedForSymlink(t *testing.T) {
	e := setup(t)
	sub := filepath.Join(e.project, "sub")
	away := filepath.Join(e.project, "sub.away")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if os.Rename(sub, away) != nil {
				continue
			}
			_ = os.Symlink(e.outside, sub)
			swaps.Add(1)
			_ = os.Remove(sub)
			_ = os.Rename(away, sub)
		}
	}()
	for i := 0; i < 500; i++ {
		e.p.Call("write_file", map[string]any{"path": "sub/planted.txt", "content": "pwned"})
		e.p.Call("create_directory", map[string]any{"path": "sub/planted-dir"})
		e.p.Call("edit_file", map[string]any{"path": "sub/planted.txt", "edits": []map[string]any{{"oldText": "pwned", "newText": "pwned2"}}})
	}
	stop.Store(true)
	wg.Wait()
	if swaps.Load() == 0 {
		t.Fatal("the folder was never swapped")
	}
	ents, _ := os.ReadDir(e.outside)
	for _, en := range ents {
		if en.Name() != "secret.txt" {
			t.Errorf("a write landed outside the project: %s", en.Name())
		}
	}
}

// TestNamesAndLinesNotUTF8: a file whose name or matching line is not
// UTF-8 (Latin-1 text, a stray byte) does not cost the whole result: it
// failed every grep and listing that met one ("string field contains
// invalid UTF-8", the connection reported lost; found from outside). The
// bytes that are not UTF-8 read as U+FFFD (one for each run of them).
func TestNamesAndLinesNotUTF8(t *testing.T) {
	e := setup(t)
	write(t, filepath.Join(e.project, "u8", "a.txt"), "needle in utf-8\n")
	write(t, filepath.Join(e.project, "u8", "latin1.txt"), "caf\xe9 needle\n")
	write(t, filepath.Join(e.project, "u8", "bad\xff\xfe.txt"), "needle in a badly named file\n")
	for _, c := range []struct {
		tool string
		args map[string]any
		want []string
	}{
		{"grep", map[string]any{"pattern": "needle", "path": "u8"}, []string{"u8/a.txt:1:needle in utf-8", "caf\uFFFD needle", "bad\uFFFD.txt:1:needle"}},
		{"search_files", map[string]any{"path": "u8", "pattern": "*.txt"}, []string{"u8/a.txt", "u8/bad\uFFFD.txt"}},
		{"list_directory", map[string]any{"path": "u8"}, []string{"[FILE] a.txt", "[FILE] bad\uFFFD.txt"}},
	} {
		out, isErr := e.call(t, c.tool, c.args)
		if isErr {
			t.Errorf("%s = error %q, want the results", c.tool, out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s result lacks %q:\n%s", c.tool, w, out)
			}
		}
	}
}

// TestDirectoryTreeDepthCap: a chain of nested folders deeper than the
// tree goes gives a tree cut at maxTreeDepth that says so in valid JSON
// (a chain of 5,000 came back as an empty text; found from outside).
func TestDirectoryTreeDepthCap(t *testing.T) {
	e := setup(t)
	dir := filepath.Join(e.project, "deep")
	for range 300 {
		dir = filepath.Join(dir, "d")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, isErr := e.call(t, "directory_tree", map[string]any{"path": "deep"})
	if isErr {
		t.Fatalf("directory_tree = error %q", out)
	}
	var got struct {
		Entries   []json.RawMessage `json:"entries"`
		Truncated *struct {
			Limit int `json:"limit"`
		} `json:"truncated"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("the cut tree is not valid JSON (%v): %.200s", err, out)
	}
	if got.Truncated == nil || got.Truncated.Limit != 256 || len(got.Entries) != 1 {
		t.Errorf("the tree of a 300-deep chain does not say it was cut at 256 levels: %.300s", out)
	}
	if n := strings.Count(out, `"name": "d"`); n < 200 || n > 256 {
		t.Errorf("the cut tree holds %d levels, want up to 256", n)
	}
	// A shallow tree is not marked.
	if err := os.MkdirAll(filepath.Join(e.project, "shallow", "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, _ := e.call(t, "directory_tree", map[string]any{"path": "shallow"}); strings.Contains(out, "truncated") || !strings.Contains(out, `"name": "b"`) {
		t.Errorf("a shallow tree is cut: %.200s", out)
	}
}

package filesystem_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestCutResultsParse: a result cut at a limit says so in JSON that
// parses: directory_tree's JSON carries a "truncated" member beside the
// entries it kept, and grep and search_files (whose results are lines)
// end with a text item of its own holding {"truncated": {…}}. The same
// calls under their limits have no such note.
func TestCutResultsParse(t *testing.T) {
	e := setup(t)
	dir := filepath.Join(e.project, "many")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 10001 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d.txt", i)), []byte("hit\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	type cut struct {
		Returned       int    `json:"returned"`
		OmittedAtLeast int    `json:"omitted_at_least"`
		Limit          int    `json:"limit"`
		Next           string `json:"next"`
	}
	lastItem := func(tool string, args map[string]any) (items int, note *cut) {
		t.Helper()
		res := e.p.Call(tool, args)
		if res.IsError {
			t.Fatalf("%s(%v) failed: %s", tool, args, res.Text())
		}
		var n struct {
			Truncated *cut `json:"truncated"`
		}
		last := res.Content[len(res.Content)-1].Text
		if err := json.Unmarshal([]byte(last), &n); err != nil {
			return len(res.Content), nil
		}
		return len(res.Content), n.Truncated
	}
	for _, tt := range []struct {
		tool      string
		args      map[string]any
		wantLimit int
	}{
		{"grep", map[string]any{"pattern": "hit", "max_results": 5}, 5},
		{"search_files", map[string]any{"path": ".", "pattern": "*.txt"}, 1000},
	} {
		items, note := lastItem(tt.tool, tt.args)
		if items != 2 || note == nil || note.Returned != tt.wantLimit || note.Limit != tt.wantLimit || note.OmittedAtLeast < 1 || note.Next == "" {
			t.Errorf("%s(%v): %d items, note %+v; want the lines and a JSON note of the cut at %d", tt.tool, tt.args, items, note, tt.wantLimit)
		}
	}
	// Under the limits: one item, no note.
	if items, note := lastItem("grep", map[string]any{"pattern": "hit", "path": "many/f00001.txt"}); items != 1 || note != nil {
		t.Errorf("grep of one file: %d items, note %+v; want one item", items, note)
	}

	res := e.p.Call("directory_tree", map[string]any{"path": "."})
	var tree struct {
		Entries   []map[string]any `json:"entries"`
		Truncated *cut             `json:"truncated"`
	}
	if err := json.Unmarshal([]byte(res.Text()), &tree); err != nil {
		t.Fatalf("directory_tree over its limit is not JSON: %v: %.200q", err, res.Text())
	}
	if tree.Truncated == nil || tree.Truncated.Returned != 10000 || len(tree.Entries) == 0 || tree.Truncated.Next == "" {
		t.Errorf("directory_tree over its limit: truncated %+v, %d entries", tree.Truncated, len(tree.Entries))
	}
	var whole []map[string]any
	res = e.p.Call("directory_tree", map[string]any{"path": ".", "excludePatterns": []string{"many"}})
	if err := json.Unmarshal([]byte(res.Text()), &whole); err != nil || len(whole) == 0 {
		t.Errorf("directory_tree under its limit = %.200q (%v), want a JSON array", res.Text(), err)
	}
}

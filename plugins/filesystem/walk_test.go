package filesystem

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/fixtures/srctree"
)

// TestWalkOrder: walkOrder sorts paths as the walk visits them, component
// by component, so a folder's contents come before a sibling whose name
// extends the folder's with a byte below '/' ('-', '.').
func TestWalkOrder(t *testing.T) {
	walked := []string{"a", "a/b", "a/b/c", "a/c", "a-b", "a-b/x", "a.b", "a0", "b", "b/a"}
	got := slices.Clone(walked)
	slices.Reverse(got)
	slices.SortFunc(got, walkOrder)
	if !slices.Equal(got, walked) {
		t.Errorf("walkOrder sorts %v, want %v", got, walked)
	}
	if walkOrder("a/b", "a/b") != 0 {
		t.Error("a path is not equal to itself")
	}
}

// openFDs counts the process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// TestWalksCloseEveryFolder: walks that stop early (search_files and
// directory_tree at their limits, grep at max_results, a cancelled call)
// and walks that finish leave no folder open, though folders were listed
// ahead on other goroutines.
func TestWalksCloseEveryFolder(t *testing.T) {
	dir := t.TempDir()
	dir, _ = filepath.EvalSymlinks(dir)
	if _, err := srctree.Write(dir, srctree.Spec{Files: 12000}); err != nil {
		t.Fatal(err)
	}
	p := benchPlugin(t, dir)
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	// The first call opens what stays open: the project's os.Root, and
	// /proc/self/fd for reading descriptors' paths.
	if r, _ := p.searchFiles(ctx, nil, searchArgs{Path: "mod000", Pattern: "*.md"}); r.IsError() {
		t.Fatal(resultText(r))
	}
	before := openFDs(t)
	for i, call := range []func() string{
		func() string { // stops at 1,000 results
			r, _ := p.searchFiles(ctx, nil, searchArgs{Path: ".", Pattern: "*.go"})
			return resultText(r)
		},
		func() string { // finishes
			r, _ := p.searchFiles(ctx, nil, searchArgs{Path: ".", Pattern: "*.md"})
			return resultText(r)
		},
		func() string { // stops at 10,000 entries
			r, _ := p.directoryTree(ctx, nil, treeArgs{Path: "."})
			return resultText(r)
		},
		func() string {
			r, _ := p.directoryTree(ctx, nil, treeArgs{Path: ".", MaxDepth: 2})
			return resultText(r)
		},
		func() string {
			r, _ := p.grep(ctx, nil, grepArgs{Pattern: "func", MaxResults: 3})
			return resultText(r)
		},
		func() string {
			r, _ := p.searchFiles(cancelled, nil, searchArgs{Path: ".", Pattern: "*.go"})
			return resultText(r)
		},
	} {
		out := call()
		if (i == 0 || i == 2) && !strings.Contains(out, "truncated") {
			t.Errorf("call %d did not stop at its limit: %.200s", i, out)
		}
		if n := openFDs(t); n != before {
			t.Fatalf("after call %d (%.100s) %d descriptors are open, %d before", i, out, n, before)
		}
	}
}

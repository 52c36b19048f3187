package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/plugins/filesystem"
	"github.com/switchboard-mcp/switchboard/sdk/sdktest"
)

// tree writes 10,000 small files in 100 folders.
func tree(b *testing.B) string {
	dir := b.TempDir()
	for d := 0; d < 100; d++ {
		sub := filepath.Join(dir, fmt.Sprintf("pkg%03d", d))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := 0; f < 100; f++ {
			body := fmt.Sprintf("package pkg%03d\n\n// File %d.\nfunc F%d() int { return %d }\n", d, f, f, d*f)
			if d == 42 && f == 7 {
				body += "// needle: the one match\n"
			}
			ext := ".go"
			if f%10 == 0 {
				ext = ".txt"
			}
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("file%03d%s", f, ext)), []byte(body), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	return dir
}

func timeIt(n int, fn func() error) (time.Duration, error) {
	var best time.Duration
	for i := 0; i < n; i++ {
		start := time.Now()
		if err := fn(); err != nil {
			return 0, err
		}
		if d := time.Since(start); best == 0 || d < best {
			best = d
		}
	}
	return best, nil
}

// BenchmarkFilesystemSearch compares grep and search_files over 10,000
// files with grep -rn and find on the same tree, in the same run (best of
// five each).
func BenchmarkFilesystemSearch(b *testing.B) {
	if b.N < 100 {
		return
	}
	dir := tree(b)
	p := sdktest.StartInProcess(b, filesystem.New(), sdktest.WithProjectDir(dir))
	ctx := context.Background()
	rows := []struct {
		name     string
		tool     func() error
		baseline func() error
		base     string
	}{
		{"grep needle", func() error {
			_, err := p.CallContext(ctx, "grep", map[string]any{"pattern": "needle", "max_results": 1000}, nil)
			return err
		}, func() error { return exec.Command("grep", "-rn", "needle", dir).Run() }, "grep -rn"},
		{"grep 'func F7\\('", func() error {
			_, err := p.CallContext(ctx, "grep", map[string]any{"pattern": `func F7\(`, "max_results": 1000}, nil)
			return err
		}, func() error { return exec.Command("grep", "-rn", `func F7(`, dir).Run() }, "grep -rn"},
		{"search_files *.txt", func() error {
			_, err := p.CallContext(ctx, "search_files", map[string]any{"path": ".", "pattern": "*.txt"}, nil)
			return err
		}, func() error { return exec.Command("find", dir, "-name", "*.txt").Run() }, "find -name"},
	}
	fmt.Printf("\n%-26s %12s %12s %8s\n", "filesystem, 10,000 files", "tool", "baseline", "ratio")
	for _, r := range rows {
		t, err := timeIt(5, r.tool)
		if err != nil {
			b.Fatal(err)
		}
		base, err := timeIt(5, r.baseline)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Printf("%-26s %12s %12s %7.2fx  (vs %s)\n", r.name, t.Round(time.Microsecond), base.Round(time.Microsecond), float64(t)/float64(base), r.base)
	}
}

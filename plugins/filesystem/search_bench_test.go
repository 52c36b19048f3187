package filesystem

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/fixtures/srctree"
	"github.com/switchboard-mcp/switchboard/plugins/internal/confine"
	"github.com/switchboard-mcp/switchboard/sdk"
)

// benchPlugin is the plugin configured as a host would: the project, and
// its control plane protected (a config file inside the project, a data
// dir and a lock file).
func benchPlugin(tb testing.TB, project string) *plugin {
	tb.Helper()
	roots, err := confine.New(project)
	if err != nil {
		tb.Fatal(err)
	}
	data := filepath.Join(tb.TempDir(), "state")
	if err := os.MkdirAll(data, 0o755); err != nil {
		tb.Fatal(err)
	}
	cfg := filepath.Join(project, "config.hcl")
	if err := os.WriteFile(cfg, []byte("builtin \"filesystem\" {}\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	roots.Protect(data, cfg, filepath.Join(project, "switchboard.lock.hcl"), filepath.Join(project, ".mcp.json"))
	p := &plugin{roots: roots, maxRead: DefaultMaxReadBytes, osRoots: map[string]*os.Root{}}
	tb.Cleanup(p.close)
	return p
}

func benchTree(b *testing.B) string {
	if dir := os.Getenv("FS_BENCH_DIR"); dir != "" {
		return dir // an existing tree
	}
	n := 10000
	if s := os.Getenv("FS_BENCH_FILES"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	dir := filepath.Join(b.TempDir(), "tree")
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	if _, err := srctree.Write(dir, srctree.Spec{Files: n}); err != nil {
		b.Fatal(err)
	}
	return dir
}

func mustOK(b *testing.B, r *sdk.Result, err error) {
	if err != nil || r.IsError() {
		b.Fatalf("%v %v", err, resultText(r))
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loop runs fn b.N times and reports its CPU time per run beside the wall
// time (on a shared machine the CPU time is the steadier figure).
func loop(b *testing.B, fn func()) {
	c0 := cpuTime()
	for b.Loop() {
		fn()
	}
	b.ReportMetric(float64(cpuTime()-c0)/float64(b.N)/1e6, "cpu-ms/op")
}

// BenchmarkWalk profiles grep and search_files over a generated tree
// (FS_BENCH_FILES files, default 10,000), in the plugin's own process:
// go test -run '^$' -bench BenchmarkWalk -cpuprofile cpu.out ./plugins/filesystem/
func BenchmarkWalk(b *testing.B) {
	dir := benchTree(b)
	p := benchPlugin(b, dir)
	ctx := context.Background()
	b.Run("grep", func(b *testing.B) {
		loop(b, func() {
			r, err := p.grep(ctx, nil, grepArgs{Pattern: srctree.Needle, MaxResults: 10000})
			mustOK(b, r, err)
		})
	})
	b.Run("grep-regexp", func(b *testing.B) {
		loop(b, func() {
			r, err := p.grep(ctx, nil, grepArgs{Pattern: `func F7_\d+\(`, MaxResults: 10000})
			mustOK(b, r, err)
		})
	})
	b.Run("search_files", func(b *testing.B) {
		loop(b, func() {
			r, err := p.searchFiles(ctx, nil, searchArgs{Path: ".", Pattern: "*.md"})
			mustOK(b, r, err)
		})
	})
}

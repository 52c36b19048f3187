package filesystem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTailFromEnd: tail, read backwards from the end, returns what a
// line-by-line read of the whole file returns, for files with and without
// a final newline, CRLF endings, empty lines, and fewer lines than asked.
func TestTailFromEnd(t *testing.T) {
	dir := t.TempDir()
	p := benchPlugin(t, dir)
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "bb", "", "\r", "long " + strings.Repeat("x", 3000), "ünï"}
	for i := range 300 {
		var b strings.Builder
		for range rng.IntN(60) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
			if rng.IntN(8) > 0 {
				b.WriteString("\n")
			}
		}
		if i%3 == 0 {
			b.WriteString("\n")
		}
		body := b.String()
		name := fmt.Sprintf("f%d.txt", i)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		n := 1 + rng.IntN(70)
		want, err := readLines(context.Background(), strings.NewReader(body), readArgs{Tail: n}, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		res, _ := p.readTextFile(context.Background(), nil, readArgs{Path: name, Tail: n})
		if got := res.Texts()[0]; got != want || res.IsError() {
			t.Fatalf("tail %d of %q = %q, want %q", n, body, got, want)
		}
	}
}

// TestPartialReadSum: a partial read of a small file names its sha256; of
// a large one, the sum a whole read or get_file_info computed for the same
// file, else says it was not computed; never the sum of content the file
// no longer has.
func TestPartialReadSum(t *testing.T) {
	window := racyWindow
	racyWindow = 0 // the files here are fresh
	t.Cleanup(func() { racyWindow = window })
	dir := t.TempDir()
	p := benchPlugin(t, dir)
	sum := func(b string) string { s := sha256.Sum256([]byte(b)); return hex.EncodeToString(s[:]) }
	read := func(args readArgs) string {
		t.Helper()
		res, _ := p.readTextFile(context.Background(), nil, args)
		if res.IsError() {
			t.Fatalf("read %+v: %s", args, resultText(res))
		}
		texts := res.Texts()
		return texts[len(texts)-1]
	}
	small := "1\n2\n3\n"
	if err := os.WriteFile(filepath.Join(dir, "small.txt"), []byte(small), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range []readArgs{{Head: 1}, {Tail: 1}, {Offset: 2, Limit: 1}} {
		args.Path = "small.txt"
		if got := read(args); got != "sha256: "+sum(small) {
			t.Errorf("read %+v of a small file: %q, want its sum", args, got)
		}
	}
	big := strings.Repeat("line of a large file\n", 20000) // 420 KB
	path := filepath.Join(dir, "big.txt")
	if err := os.WriteFile(path, []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := read(readArgs{Path: "big.txt", Head: 2}); !strings.Contains(got, "not computed") {
		t.Errorf("head of a large file never read whole: %q, want the sum left out", got)
	}
	if got := read(readArgs{Path: "big.txt"}); got != "sha256: "+sum(big) {
		t.Errorf("whole read: %q", got)
	}
	for _, args := range []readArgs{{Head: 2}, {Tail: 2}, {Offset: 5, Limit: 3}} {
		args.Path = "big.txt"
		if got := read(args); got != "sha256: "+sum(big) {
			t.Errorf("read %+v after a whole read: %q, want the whole file's sum", args, got)
		}
	}
	// Changed (same size): the old sum must not come back.
	changed := strings.Replace(big, "line", "LINE", 1)
	if err := os.WriteFile(path, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range []readArgs{{Head: 2}, {Tail: 2}} {
		args.Path = "big.txt"
		if got := read(args); got == "sha256: "+sum(big) {
			t.Errorf("read %+v after a change returned the old sum", args)
		}
	}
	// get_file_info fills the cache too.
	res, _ := p.getFileInfo(context.Background(), nil, pathArgs{Path: "big.txt"})
	if !strings.Contains(resultText(res), sum(changed)) {
		t.Fatalf("get_file_info = %q", resultText(res))
	}
	if got := read(readArgs{Path: "big.txt", Tail: 1}); got != "sha256: "+sum(changed) {
		t.Errorf("tail after get_file_info: %q, want the new sum", got)
	}
}

package loader

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// gitlinks reads the gitlinks of index versions 2, 3 (extended flags) and
// 4 (compressed paths) as git itself lists them.
func TestGitlinks(t *testing.T) {
	for _, version := range []string{"2", "3", "4"} {
		t.Run("v"+version, func(t *testing.T) {
			dir := t.TempDir()
			git := func(args ...string) string {
				t.Helper()
				cmd := exec.Command("git", append([]string{"-c", "user.email=p@example.com", "-c", "user.name=P"}, args...)...)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
				return string(out)
			}
			git("init", "-q")
			for _, f := range []string{"a.txt", "deep/er/b.txt", "deep/er/c.txt", "z/last.txt"} {
				if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			git("add", ".")
			git("commit", "-q", "-m", "files")
			head := strings.TrimSpace(git("rev-parse", "HEAD"))
			for _, p := range []string{"deep/er/link", "lib", "z/vendor/x"} {
				git("update-index", "--add", "--cacheinfo", "160000,"+head+","+p)
			}
			if version == "3" {
				git("update-index", "--skip-worktree", "a.txt") // an extended flag
			}
			git("update-index", "--index-version", version)
			var want []string
			for _, line := range strings.Split(git("ls-files", "-s"), "\n") {
				if strings.HasPrefix(line, "160000 ") {
					_, p, _ := strings.Cut(line, "\t")
					want = append(want, p)
				}
			}
			got := gitlinks(filepath.Join(dir, ".git", "index"), 20)
			slices.Sort(got)
			if !slices.Equal(got, want) || len(want) != 3 {
				t.Errorf("gitlinks = %q, want %q", got, want)
			}
		})
	}
}

// A malformed index never panics and gives at most what it holds.
func FuzzReadGitlinks(f *testing.F) {
	f.Add([]byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x01"))
	f.Add([]byte("DIRC\x00\x00\x00\x04\x00\x00\x00\x02" + strings.Repeat("\x00", 62) + "\xff\xff\xff\x7f"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = readGitlinks(bufio.NewReader(bytes.NewReader(b)), 20)
	})
}

//go:build linux

package sandbox

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// withOtherNames returns hide and, for each file in it that has more than
// one name (a hard link), the other names it has under the folders a
// sandbox shows (roots). The sandbox covers a file by its path; a hard
// link made in a folder a server may write is the same file under a name
// nothing covers. One is made, for instance, by a command that waits for
// a person's save to replace the config file (the new file is not covered
// until the host restarts the sandboxes) and links it: afterwards every
// server could read the live config through the link (found from
// outside). The roots are walked only when a hidden file has other names;
// a walk does not follow symbolic links.
func withOtherNames(hide, roots []string) []string {
	type id struct{ dev, ino uint64 }
	want := map[id]string{}
	for _, h := range hide {
		fi, err := os.Lstat(h)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			want[id{uint64(st.Dev), st.Ino}] = h //nolint:unconvert // Dev's type differs between architectures
		}
	}
	if len(want) == 0 {
		return hide
	}
	out := slices.Clone(hide)
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil // unreadable folders are skipped; so is all but files
			}
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok || st.Nlink < 2 {
				return nil
			}
			if _, linked := want[id{uint64(st.Dev), st.Ino}]; linked && !slices.Contains(out, p) { //nolint:unconvert // as above
				out = append(out, p)
			}
			return nil
		})
	}
	return out
}

// Package pathguard finds the programs the host runs by name on PATH, but
// never in a folder a server may write.
package pathguard

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// PathOutside returns the list path (a $PATH value) without the folders
// that lie inside any of untrusted (folders a server may write) and
// without relative entries. A program the host runs by name, outside a
// sandbox or with other rights than the servers that may write those
// folders, must not be found there: an agent put a `true`, a `git` and a
// `python3` into a project's .venv/bin, first on the host's PATH, and the
// host ran them (red team round 5).
func PathOutside(path string, untrusted []string) string {
	var keep []string
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) || inAny(dir, untrusted) {
			continue
		}
		keep = append(keep, dir)
	}
	return strings.Join(keep, string(filepath.ListSeparator))
}

// LookPath finds name as exec.LookPath does, on $PATH without the folders
// inside untrusted; a name with a slash is returned as it is. The error
// names what was passed over.
func LookPath(name string, untrusted []string) (string, error) {
	if strings.ContainsRune(name, filepath.Separator) {
		return name, nil
	}
	full := os.Getenv("PATH")
	for _, dir := range filepath.SplitList(PathOutside(full, untrusted)) {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			// A link out of a trusted folder into an untrusted one is
			// the same plant.
			if r, err := filepath.EvalSymlinks(p); err == nil && inAny(r, untrusted) {
				continue
			}
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return "", fmt.Errorf("%s is on PATH only at %s, in a folder the servers may write: give its full path (or put a trusted copy first on PATH)", name, p)
	}
	return "", fmt.Errorf("%s: %w", name, exec.ErrNotFound)
}

// inAny reports whether p (its links resolved where it exists) is at or
// under one of dirs.
func inAny(p string, dirs []string) bool {
	candidates := []string{filepath.Clean(p)}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		candidates = append(candidates, r)
	}
	for _, c := range candidates {
		for _, d := range dirs {
			if d == "" {
				continue
			}
			if r, err := filepath.EvalSymlinks(d); err == nil {
				d = r
			}
			if within(c, filepath.Clean(d)) {
				return true
			}
		}
	}
	return false
}

// within reports whether p is at or under dir.
func within(p, dir string) bool {
	return dir == "/" || p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}

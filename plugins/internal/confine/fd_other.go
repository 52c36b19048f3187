//go:build !linux

package confine

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// fdPath returns "" where a descriptor's path cannot be read; callers fall
// back to the name the file was opened by.
func fdPath(*os.File) string { return "" }

// entryLstat is lstat of name inside dir, by dir's name (not its
// descriptor) on systems without /proc.
func entryLstat(dir *os.File, name string) (fs.FileInfo, error) {
	return os.Lstat(filepath.Join(dir.Name(), name))
}

func ctimeOf(st *syscall.Stat_t) int64 { return st.Ctimespec.Nano() }

// LstatAt is lstat of name inside dir (by dir's name on systems without
// /proc).
func LstatAt(dir *os.File, name string) (fs.FileInfo, error) { return entryLstat(dir, name) }

// RenameAt renames oldName in oldDir to newName in newDir, by the
// directories' names on systems without renameat in package syscall.
func RenameAt(oldDir *os.File, oldName string, newDir *os.File, newName string) error {
	return os.Rename(filepath.Join(oldDir.Name(), oldName), filepath.Join(newDir.Name(), newName))
}

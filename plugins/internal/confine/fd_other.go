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

// fdRealPath returns "" where a descriptor's path cannot be read.
func fdRealPath(int) string { return "" }

// lstatIn is lstat of name inside the directory named dirName (by name,
// not its descriptor fd, on systems without /proc).
func lstatIn(_ int, dirName, name string) (fs.FileInfo, error) {
	return os.Lstat(filepath.Join(dirName, name))
}

// readDirFD lists the open directory fd through a duplicate of it.
func readDirFD(fd int, dirName string) ([]Entry, error) {
	dup, err := syscall.Dup(fd)
	if err != nil {
		return nil, &fs.PathError{Op: "readdirent", Path: dirName, Err: err}
	}
	f := os.NewFile(uintptr(dup), dirName)
	defer f.Close()
	ents, err := f.ReadDir(-1)
	out := make([]Entry, len(ents))
	for i, e := range ents {
		out[i] = Entry{Name: e.Name(), Type: e.Type()}
	}
	return out, err
}

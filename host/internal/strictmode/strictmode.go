//go:build unix

// Package strictmode checks the ownership and modes of the files the host
// trusts (plugin directories and binaries, data_dir, permissions.json), as
// OpenSSH's StrictModes does: a file another user can write, or that
// another user owns, could have been replaced by that user, so the host
// refuses it rather than trust it.
//
// Check is the one function every caller uses; PrivateDir also creates
// data_dir with mode 0700 and tightens the folders inside it.
package strictmode

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrUnsafe is wrapped by every refusal, for errors.Is.
var ErrUnsafe = errors.New("strictmode: unsafe ownership or mode")

// UnsafeError names the path that failed the check, why, and the command
// that fixes it.
type UnsafeError struct {
	Path   string
	Reason string // "is writable by group and others", "is owned by uid 1001"
	Fix    string // a shell command, e.g. "chmod go-w '/x'"
}

func (e *UnsafeError) Error() string {
	return fmt.Sprintf("%s %s, so another user could replace what switchboard trusts; fix it with: %s", e.Path, e.Reason, e.Fix)
}

// Is makes errors.Is(err, ErrUnsafe) true.
func (e *UnsafeError) Is(target error) bool { return target == ErrUnsafe }

// Check refuses path when it is a file or folder owned by neither this
// process's user nor root, or writable by group or others; and when any
// folder above it is writable by others without the sticky bit (/tmp is
// fine) or owned by another user (other than root). A symbolic link is
// judged by its target. A missing path is an error wrapping fs.ErrNotExist.
func Check(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("strictmode: %w", err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return fmt.Errorf("strictmode: %w", err)
	}
	if err := checkOne(real, abs, false); err != nil {
		return err
	}
	for dir := filepath.Dir(real); ; dir = filepath.Dir(dir) {
		if err := checkOne(dir, dir, true); err != nil {
			return err
		}
		if dir == filepath.Dir(dir) {
			return nil
		}
	}
}

// ReadFileIn reads the file name in dir, a folder the caller has checked
// with Check: the file itself is judged as Check judges a file, and a
// symbolic link in its place is refused, not followed, so that one check
// of the folder serves every file read from it (Check on each file walks
// all the folders above it again).
func ReadFileIn(dir, name string) ([]byte, error) {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("strictmode: %w", err)
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("strictmode: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, &UnsafeError{Path: path, Reason: "is not a regular file", Fix: "remove it: " + quote(path)}
	}
	if err := judge(fi, path, path, false); err != nil {
		return nil, err
	}
	// Sized as the file, as os.ReadFile does (io.ReadAll grows from 512
	// bytes: a host reading 100 manifests at start spent a third of this
	// function growing buffers).
	buf := bytes.NewBuffer(make([]byte, 0, int(max(fi.Size(), 0))+bytes.MinRead))
	_, err = buf.ReadFrom(f)
	return buf.Bytes(), err
}

// checkOne judges one path. parent relaxes the rule for folders above the
// checked one: a world-writable folder with the sticky bit (like /tmp) is
// accepted, since others can add entries but not replace ours.
func checkOne(real, shown string, parent bool) error {
	fi, err := os.Stat(real)
	if err != nil {
		return fmt.Errorf("strictmode: %w", err)
	}
	return judge(fi, real, shown, parent)
}

// judge applies checkOne's rules to what was found at real.
func judge(fi fs.FileInfo, real, shown string, parent bool) error {
	uid, ok := owner(fi)
	me := os.Getuid()
	if ok && uid != me && uid != 0 {
		return &UnsafeError{
			Path: shown, Reason: fmt.Sprintf("is owned by uid %d, not by uid %d (this user) or root", uid, me),
			Fix: fmt.Sprintf("chown %d %s", me, quote(real)),
		}
	}
	perm := fi.Mode().Perm()
	if parent && fi.Mode()&fs.ModeSticky != 0 {
		return nil
	}
	if perm&0o022 != 0 {
		who := "group and others"
		switch perm & 0o022 {
		case 0o020:
			who = "its group"
		case 0o002:
			who = "others"
		}
		return &UnsafeError{
			Path: shown, Reason: fmt.Sprintf("is writable by %s (mode %04o)", who, perm),
			Fix: fmt.Sprintf("chmod go-w %s", quote(real)),
		}
	}
	return nil
}

// PrivateDir creates dir (and its parents) if needed, makes it mode 0700
// and checks it with Check; then every folder directly inside it that
// this user owns is made 0700 too, and one another user owns is refused.
// data_dir holds the saved permissions, the audit log and the control
// sockets: no other user may read or write them.
func PrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("strictmode: creating %s: %w", dir, err)
	}
	// An existing folder that is writable by others is refused, not
	// repaired: someone else may already have put things in it.
	if err := Check(dir); err != nil {
		return err
	}
	if err := tighten(dir); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("strictmode: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		if err := checkOne(sub, sub, false); err != nil {
			return err
		}
		if err := tighten(sub); err != nil {
			return err
		}
	}
	return nil
}

// tighten sets a folder this user owns to 0700.
func tighten(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("strictmode: %w", err)
	}
	if uid, ok := owner(fi); ok && uid != os.Getuid() {
		return nil // root's: Check accepted it; not ours to change
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil { //nolint:gosec // G302: a folder needs x; 0700 is owner-only
			return fmt.Errorf("strictmode: %w", err)
		}
	}
	return nil
}

func owner(fi fs.FileInfo) (int, bool) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), true
	}
	return 0, false
}

// quote quotes a path for a POSIX shell.
func quote(s string) string {
	out := []byte{'\''}
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			out = append(out, `'\''`...)
			continue
		}
		out = append(out, s[i])
	}
	return string(append(out, '\''))
}

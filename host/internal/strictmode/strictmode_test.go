//go:build unix

package strictmode

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPrivateDirCreates0700(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "data")
	if err := PrivateDir(dir); err != nil {
		t.Fatalf("PrivateDir(%q) = %v", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o700 {
		t.Errorf("data_dir mode = %04o, want 0700", got)
	}
}

func TestPrivateDirTightensItsFolders(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "control")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := PrivateDir(dir); err != nil {
		t.Fatalf("PrivateDir = %v", err)
	}
	for _, p := range []string{dir, sub} {
		fi, _ := os.Stat(p)
		if got := fi.Mode().Perm(); got != 0o700 {
			t.Errorf("%s mode = %04o, want 0700", p, got)
		}
	}
}

func TestRefusesWritableByOthers(t *testing.T) {
	for _, mode := range []fs.FileMode{0o770, 0o707, 0o777} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, mode); err != nil {
				t.Fatal(err)
			}
			err := PrivateDir(dir)
			if !errors.Is(err, ErrUnsafe) {
				t.Fatalf("PrivateDir(%04o dir) = %v, want ErrUnsafe", mode, err)
			}
			if msg := err.Error(); !strings.Contains(msg, dir) || !strings.Contains(msg, "chmod go-w '"+dir+"'") {
				t.Errorf("error %q does not name %s and the chmod to run", msg, dir)
			}
			// Refused, not silently repaired.
			if fi, _ := os.Stat(dir); fi.Mode().Perm() != mode {
				t.Errorf("mode changed to %04o", fi.Mode().Perm())
			}
		})
	}
}

func TestRefusesWritableFile(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "permissions.json")
	if err := os.WriteFile(f, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Check(f); err != nil {
		t.Fatalf("Check(0600 file) = %v", err)
	}
	if err := os.Chmod(f, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := Check(f); !errors.Is(err, ErrUnsafe) {
		t.Fatalf("Check(0666 file) = %v, want ErrUnsafe", err)
	}
}

func TestRefusesWritableParent(t *testing.T) {
	parent := t.TempDir()
	if err := os.Chmod(parent, 0o777); err != nil { // no sticky bit
		t.Fatal(err)
	}
	bin := filepath.Join(parent, "plugin")
	if err := os.WriteFile(bin, nil, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Check(bin); !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), parent) {
		t.Fatalf("Check(file in a 0777 folder) = %v, want ErrUnsafe naming %s", err, parent)
	}
	if err := os.Chmod(parent, 0o777|fs.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if err := Check(bin); err != nil {
		t.Fatalf("Check(file in a sticky 1777 folder, like /tmp) = %v", err)
	}
}

func TestRefusesOtherOwner(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to give a file to another user")
	}
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 4321, 4321); err != nil {
		t.Fatal(err)
	}
	// Root is this user here, so a folder owned by uid 4321 is another's.
	err := PrivateDir(dir)
	if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "uid 4321") {
		t.Fatalf("PrivateDir(dir owned by 4321) = %v, want ErrUnsafe naming the owner", err)
	}
}

func TestFollowsSymlinkToTarget(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "bin")
	if err := os.WriteFile(target, nil, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(target, 0o777); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := Check(link); !errors.Is(err, ErrUnsafe) {
		t.Fatalf("Check(link to a 0777 file) = %v, want ErrUnsafe", err)
	}
}

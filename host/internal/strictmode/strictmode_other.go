//go:build !unix

package strictmode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrUnsafe is wrapped by every refusal, for errors.Is.
var ErrUnsafe = errors.New("strictmode: unsafe ownership or mode")

// Check only checks that path exists: Unix modes and owners do not apply.
func Check(path string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("strictmode: %w", err)
	}
	return nil
}

// PrivateDir creates dir.
func PrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("strictmode: creating %s: %w", dir, err)
	}
	return nil
}

// ReadFileIn reads the file name in dir (no modes to check here).
func ReadFileIn(dir, name string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("strictmode: %w", err)
	}
	return b, nil
}

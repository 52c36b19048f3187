package pluginstore

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2/hclsimple"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// LockFileName is the lock file's name, beside the config.
const LockFileName = "switchboard.lock.hcl"

// LockPath is the lock file of a config file.
func LockPath(configFile string) string {
	return filepath.Join(filepath.Dir(configFile), LockFileName)
}

// Errors.
var (
	// ErrNotLocked is returned by Lock.Check for a plugin without an entry.
	ErrNotLocked = errors.New("pluginstore: plugin is not in the lock file")
	// ErrHashMismatch is wrapped by every MismatchError.
	ErrHashMismatch = errors.New("pluginstore: plugin binary does not match the lock file")
	// ErrChecksum is returned by Install when an archive or binary does
	// not match its SHA256SUMS entry, or has none.
	ErrChecksum = errors.New("pluginstore: checksum")
	// ErrSignature is returned by Install when the signature over
	// SHA256SUMS is missing or made by no trusted key.
	ErrSignature = errors.New("pluginstore: signature")
)

// Lock is the content of switchboard.lock.hcl.
type Lock struct {
	// Path is the file it was read from or is written to.
	Path string
	// Plugins are the entries by server name: plugins (`plugin` blocks)
	// and external servers (`external` blocks, External set), whose names
	// are unique across both.
	Plugins map[string]*Entry
}

// Entry is one plugin's lock.
type Entry struct {
	// Version is the plugin's version (from its binary's name, else from
	// what it reports).
	Version string
	// Protocols are every protocol version it says it speaks (its
	// Describe), sorted; `plugin verify` reports one it no longer speaks.
	// Lock files written before these were recorded hold the one version
	// negotiated then, which reads the same way.
	Protocols []int
	// Hashes are "sha256:<hex>" of its binary, by "<os>_<arch>".
	Hashes map[string]string
	// Surface is "sha256:<hex>" of its tool surface (SurfaceHash).
	Surface string
	// External marks an external MCP server's entry: it has a surface
	// (and no version, protocols or hashes: there is no binary of ours to
	// pin).
	External bool
}

type lockFile struct {
	Plugins   []lockBlock     `hcl:"plugin,block"`
	Externals []externalBlock `hcl:"external,block"`
}

type externalBlock struct {
	Name    string `hcl:"name,label"`
	Surface string `hcl:"surface"`
}

type lockBlock struct {
	Name      string            `hcl:"name,label"`
	Version   *string           `hcl:"version,optional"`
	Protocols []int             `hcl:"protocols,optional"`
	Hashes    map[string]string `hcl:"hashes,optional"`
	Surface   *string           `hcl:"surface,optional"`
}

// ReadLock reads a lock file. A missing file is an empty lock (and no
// error); ok reports whether the file exists.
func ReadLock(path string) (l *Lock, ok bool, err error) {
	l = &Lock{Path: path, Plugins: map[string]*Entry{}}
	src, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return l, false, nil
	}
	if err != nil {
		return l, false, fmt.Errorf("pluginstore: %w", err)
	}
	var f lockFile
	if err := hclsimple.Decode(path, src, nil, &f); err != nil {
		return l, true, fmt.Errorf("pluginstore: %s is not a valid lock file: %w; fix it or delete it and run `switchboard plugin lock`", path, err)
	}
	for _, b := range f.Plugins {
		if _, dup := l.Plugins[b.Name]; dup {
			return l, true, fmt.Errorf("pluginstore: %s locks plugin %q twice; run `switchboard plugin lock`", path, b.Name)
		}
		e := &Entry{Protocols: b.Protocols, Hashes: b.Hashes}
		if b.Version != nil {
			e.Version = *b.Version
		}
		if b.Surface != nil {
			e.Surface = *b.Surface
		}
		if e.Hashes == nil {
			e.Hashes = map[string]string{}
		}
		l.Plugins[b.Name] = e
	}
	for _, b := range f.Externals {
		if _, dup := l.Plugins[b.Name]; dup {
			return l, true, fmt.Errorf("pluginstore: %s locks %q twice; run `switchboard plugin lock`", path, b.Name)
		}
		l.Plugins[b.Name] = &Entry{External: true, Surface: b.Surface, Hashes: map[string]string{}}
	}
	return l, true, nil
}

// Write writes the lock file atomically, plugins sorted by name.
func (l *Lock) Write() error {
	f := hclwrite.NewEmptyFile()
	body := f.Body()
	body.AppendUnstructuredTokens(hclwrite.Tokens{{Type: hclsyntax.TokenComment, Bytes: []byte("# This file is maintained by `switchboard plugin lock`.\n# Commit it with the config; `switchboard plugin verify` checks it.\n")}})
	for _, name := range slices.Sorted(maps.Keys(l.Plugins)) {
		e := l.Plugins[name]
		body.AppendNewline()
		if e.External {
			body.AppendNewBlock("external", []string{name}).Body().SetAttributeValue("surface", cty.StringVal(e.Surface))
			continue
		}
		b := body.AppendNewBlock("plugin", []string{name}).Body()
		if e.Version != "" {
			b.SetAttributeValue("version", cty.StringVal(e.Version))
		}
		if len(e.Protocols) > 0 {
			var vs []cty.Value
			for _, p := range e.Protocols {
				vs = append(vs, cty.NumberIntVal(int64(p)))
			}
			b.SetAttributeValue("protocols", cty.ListVal(vs))
		}
		if len(e.Hashes) > 0 {
			m := map[string]cty.Value{}
			for k, v := range e.Hashes {
				m[k] = cty.StringVal(v)
			}
			b.SetAttributeValue("hashes", cty.ObjectVal(m))
		}
		if e.Surface != "" {
			b.SetAttributeValue("surface", cty.StringVal(e.Surface))
		}
	}
	return writeAtomic(l.Path, hclwrite.Format(f.Bytes()), 0o644)
}

// MismatchError is a plugin binary whose hash differs from its lock.
type MismatchError struct {
	Plugin, Path, Platform string
	Want, Got              string
	LockFile               string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("plugin %s: %s has %s, but %s locks %s for %s; if you upgraded it on purpose, run `switchboard plugin lock` (then `switchboard plugin verify`), otherwise reinstall it with `switchboard plugin install`",
		e.Plugin, e.Path, e.Got, e.LockFile, e.Want, e.Platform)
}

// Is makes errors.Is(err, ErrHashMismatch) true.
func (e *MismatchError) Is(target error) bool { return target == ErrHashMismatch }

// Hash is a lock file hash: "sha256:<hex>".
func Hash(hexSum string) string { return "sha256:" + hexSum }

// HexOf strips "sha256:" from a lock file hash.
func HexOf(h string) string { return strings.TrimPrefix(h, "sha256:") }

// FileHash is the lock file hash of a file.
func FileHash(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return Hash(hex.EncodeToString(h.Sum(nil))), nil
}

// Pin returns the hex SHA-256 the lock pins for a plugin on this platform
// ("" when the lock has no hash for it here).
func (l *Lock) Pin(name string) string {
	e := l.Plugins[name]
	if e == nil {
		return ""
	}
	return HexOf(e.Hashes[Platform()])
}

// CheckBinary compares a binary with its lock entry for this platform.
func (l *Lock) CheckBinary(name, path string) error {
	e := l.Plugins[name]
	if e == nil {
		return fmt.Errorf("%w: %s (%s); run `switchboard plugin lock` to lock it", ErrNotLocked, name, path)
	}
	want, ok := e.Hashes[Platform()]
	if !ok {
		return fmt.Errorf("%w: %s has no hash for %s in %s; run `switchboard plugin lock -platform=%s`", ErrNotLocked, name, Platform(), l.Path, Platform())
	}
	got, err := FileHash(path)
	if err != nil {
		return fmt.Errorf("plugin %s: cannot read %s: %w", name, path, err)
	}
	if got != want {
		return &MismatchError{Plugin: name, Path: path, Platform: Platform(), Want: want, Got: got, LockFile: l.Path}
	}
	return nil
}

// writeAtomic writes a file through a temporary one beside it.
func writeAtomic(path string, b []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// WriteAtomic writes a file through a temporary one beside it, with mode
// (for the host's other files in data_dir).
func WriteAtomic(path string, b []byte, mode os.FileMode) error { return writeAtomic(path, b, mode) }

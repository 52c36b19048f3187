// Package pluginstore is how plugin binaries are named, found, installed,
// locked and verified.
//
// A plugin binary is named switchboard-plugin-NAME or
// switchboard-plugin-NAME_vX.Y.Z (the protocol versions it speaks come
// from its handshake, not its name). Install puts one into a plugin
// directory, checking the SHA256SUMS file published beside it and, when
// trusted keys are configured, the minisign signature over that file. The
// lock file (switchboard.lock.hcl, beside the config) pins each plugin's
// version, protocol version, a SHA-256 of its binary for every platform it
// was locked for, and a SHA-256 of its tool surface; the host refuses a
// binary that does not match it and quarantines a server whose surface
// changed.
package pluginstore

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	version "github.com/hashicorp/go-version"
)

// Prefix is the file name prefix of plugin binaries.
const Prefix = "switchboard-plugin-"

// Platform is this machine's platform as the lock file and the plugin
// directory layout spell it: "<os>_<arch>".
func Platform() string { return runtime.GOOS + "_" + runtime.GOARCH }

// ValidPlatform reports whether p looks like "<os>_<arch>".
func ValidPlatform(p string) bool {
	os, arch, ok := strings.Cut(p, "_")
	return ok && os != "" && arch != "" && !strings.ContainsAny(p, "/\\. ")
}

// DefaultDir is the default plugin directory root:
// $XDG_DATA_HOME/switchboard/plugins (else ~/.local/share/...). Binaries
// sit in its "<os>_<arch>" folders.
func DefaultDir() string {
	base := os.Getenv("XDG_DATA_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		base = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(base, "switchboard", "plugins")
}

// Binary is a plugin binary found in a directory.
type Binary struct {
	Path string
	// Name is the NAME of switchboard-plugin-NAME[_vX.Y.Z].
	Name string
	// Version is nil for a binary named without one.
	Version *version.Version
}

// VersionString is the binary's version, or "" when its name has none.
func (b Binary) VersionString() string {
	if b.Version == nil {
		return ""
	}
	return b.Version.String()
}

// ParseName splits a file name switchboard-plugin-NAME[_vX.Y.Z] (an
// ".exe" suffix is allowed). ok is false for any other name.
func ParseName(file string) (name string, v *version.Version, ok bool) {
	base := strings.TrimSuffix(file, ".exe")
	rest, found := strings.CutPrefix(base, Prefix)
	if !found || rest == "" {
		return "", nil, false
	}
	if i := strings.LastIndex(rest, "_v"); i > 0 {
		if ver, err := version.NewSemver(rest[i+2:]); err == nil {
			return rest[:i], ver, true
		}
	}
	return rest, nil, true
}

// FileName is the binary's file name for a plugin and version ("" for none).
func FileName(name, ver string) string {
	if ver == "" {
		return Prefix + name
	}
	return Prefix + name + "_v" + strings.TrimPrefix(ver, "v")
}

// List returns the executable plugin binaries in dirs (not recursive),
// sorted by path.
func List(dirs []string) []Binary {
	var out []Binary
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.IsDir() {
				continue
			}
			name, v, ok := ParseName(e.Name())
			if !ok {
				continue
			}
			if info, err := e.Info(); err != nil || info.Mode()&0o111 == 0 {
				continue
			}
			out = append(out, Binary{Path: filepath.Join(d, e.Name()), Name: name, Version: v})
		}
	}
	slices.SortFunc(out, func(a, b Binary) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// Newest returns, for each plugin name, the binary with the highest
// version (a versioned binary beats an unversioned one; between equals the
// first directory wins), sorted by path.
func Newest(bins []Binary) []Binary {
	best := map[string]Binary{}
	var order []string
	for _, b := range bins {
		cur, ok := best[b.Name]
		if !ok {
			order = append(order, b.Name)
			best[b.Name] = b
			continue
		}
		if newer(b, cur) {
			best[b.Name] = b
		}
	}
	out := make([]Binary, 0, len(order))
	for _, n := range order {
		out = append(out, best[n])
	}
	slices.SortFunc(out, func(a, b Binary) int { return strings.Compare(a.Path, b.Path) })
	return out
}

func newer(a, b Binary) bool {
	switch {
	case a.Version == nil:
		return false
	case b.Version == nil:
		return true
	default:
		return a.Version.GreaterThan(b.Version)
	}
}

// ParseConstraint parses a version constraint such as "~> 1.2" or
// ">= 1.0, < 2.0".
func ParseConstraint(s string) (version.Constraints, error) {
	return version.NewConstraint(s)
}

// Find picks the newest binary of plugin name in dirs whose version meets
// constraint (an empty constraint accepts any binary, an unversioned one
// included; a constraint only versioned ones). The error lists what was
// found and says how to install a matching one.
func Find(dirs []string, name, constraint string) (Binary, error) {
	var cons version.Constraints
	if constraint != "" {
		c, err := ParseConstraint(constraint)
		if err != nil {
			return Binary{}, err
		}
		cons = c
	}
	var found []string
	var pick *Binary
	for _, b := range List(dirs) {
		if b.Name != name {
			continue
		}
		found = append(found, filepath.Base(b.Path))
		if cons != nil && (b.Version == nil || !cons.Check(b.Version)) {
			continue
		}
		if pick == nil || newer(b, *pick) {
			pick = &b
		}
	}
	if pick != nil {
		return *pick, nil
	}
	want := "plugin " + name
	if constraint != "" {
		want += fmt.Sprintf(" version %q", constraint)
	}
	if len(found) == 0 {
		return Binary{}, fmt.Errorf("no binary for %s in %s: install one with `switchboard plugin install ARCHIVE`, or set path", want, strings.Join(dirs, ", "))
	}
	return Binary{}, fmt.Errorf("no binary for %s in %s (found %s): install a matching version with `switchboard plugin install ARCHIVE`, or change version", want, strings.Join(dirs, ", "), strings.Join(found, ", "))
}

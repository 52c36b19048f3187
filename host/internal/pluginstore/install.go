package pluginstore

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"aead.dev/minisign"
)

// SumsFile is the checksum file published beside a plugin's archives.
const SumsFile = "SHA256SUMS"

// SignatureSuffix is appended to the checksum file's name for its
// minisign signature (SHA256SUMS.minisig).
const SignatureSuffix = ".minisig"

// maxBinary bounds one extracted binary.
const maxBinary = 1 << 30

// ParseKey parses a minisign public key: its base64 line ("RWQ…"), or a
// whole .pub file (comment line, then the key).
func ParseKey(s string) (minisign.PublicKey, error) {
	var key minisign.PublicKey
	lines := strings.Split(strings.TrimSpace(s), "\n")
	line := strings.TrimSpace(lines[len(lines)-1])
	if err := key.UnmarshalText([]byte(line)); err != nil {
		return key, fmt.Errorf("not a minisign public key (the base64 line of a .pub file, \"RW…\"): %v", err)
	}
	return key, nil
}

// InstallOptions adjusts Install.
type InstallOptions struct {
	// Root is the plugin directory root; binaries go to Root/<platform>.
	Root string
	// Platform is where the binaries go ("<os>_<arch>"); default: the one
	// in the archive's name, else this machine's.
	Platform string
	// TrustedKeys, when set, require a signature over the checksum file
	// made by one of them.
	TrustedKeys []string
}

// Installed is one binary Install put in place.
type Installed struct {
	Name, Version, Platform, Path, Hash string
}

// Install puts the plugin binaries of src (a .tar.gz or .zip archive, a
// directory, or a binary) into the plugin directory. src must be listed,
// with its SHA-256, in the SHA256SUMS file beside it (inside a directory
// src: in it, for each binary), and when trusted keys are given that file
// must carry a minisign signature (SHA256SUMS.minisig) by one of them.
// Nothing is installed unless every check passes.
func Install(src string, opts InstallOptions) ([]Installed, error) {
	if opts.Root == "" {
		opts.Root = DefaultDir()
	}
	info, err := os.Stat(src)
	if err != nil {
		return nil, fmt.Errorf("pluginstore: %w", err)
	}
	if opts.Platform != "" && !ValidPlatform(opts.Platform) {
		return nil, fmt.Errorf("pluginstore: platform %q is not <os>_<arch> (e.g. %s)", opts.Platform, Platform())
	}
	type file struct {
		name string // the binary's file name as installed
		data []byte
	}
	var files []file
	var sumsDir string
	if info.IsDir() {
		sumsDir = src
		sums, err := readSums(sumsDir, opts.TrustedKeys)
		if err != nil {
			return nil, err
		}
		ents, err := os.ReadDir(src)
		if err != nil {
			return nil, fmt.Errorf("pluginstore: %w", err)
		}
		for _, e := range ents {
			if _, _, ok := ParseName(e.Name()); !ok || e.IsDir() {
				continue
			}
			p := filepath.Join(src, e.Name())
			data, err := readCapped(p)
			if err != nil {
				return nil, err
			}
			if err := sums.check(e.Name(), data); err != nil {
				return nil, err
			}
			files = append(files, file{e.Name(), data})
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("pluginstore: %s holds no plugin binary (switchboard-plugin-NAME[_vX.Y.Z])", src)
		}
	} else {
		sumsDir = filepath.Dir(src)
		sums, err := readSums(sumsDir, opts.TrustedKeys)
		if err != nil {
			return nil, err
		}
		data, err := readCapped(src)
		if err != nil {
			return nil, err
		}
		base := filepath.Base(src)
		if err := sums.check(base, data); err != nil {
			return nil, err
		}
		name, ver, plat := parseArchiveName(base)
		if opts.Platform == "" {
			opts.Platform = plat
		}
		var inside map[string][]byte
		switch {
		case strings.HasSuffix(base, ".tar.gz") || strings.HasSuffix(base, ".tgz"):
			inside, err = untar(data)
		case strings.HasSuffix(base, ".zip"):
			inside, err = unzip(data)
		default:
			if _, _, ok := ParseName(base); !ok {
				return nil, fmt.Errorf("pluginstore: %s is neither a .tar.gz or .zip archive nor a binary named switchboard-plugin-NAME[_vX.Y.Z]", src)
			}
			inside = map[string][]byte{base: data}
		}
		if err != nil {
			return nil, fmt.Errorf("pluginstore: %s: %w", src, err)
		}
		// An archive installs one plugin, its own: one that also held
		// switchboard-plugin-hello_v99.0.0 took over the person's hello
		// block (its env, its grants) at the next start (red team round 5).
		owner := name
		for n := range inside {
			pn, _, _ := ParseName(n)
			if owner == "" {
				owner = pn
			}
			if pn != owner {
				return nil, fmt.Errorf("pluginstore: archive %s is the plugin %q but also holds %s, another plugin's binary: refused (an archive installs its own plugin only)", src, owner, n)
			}
		}
		for n, data := range inside {
			pn, pv, _ := ParseName(n)
			if pv == nil && pn == name && ver != "" {
				n = FileName(pn, ver) // versioned by its archive's name
			}
			files = append(files, file{n, data})
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("pluginstore: archive %s holds no plugin binary (switchboard-plugin-NAME[_vX.Y.Z])", src)
		}
	}
	if opts.Platform == "" {
		opts.Platform = Platform()
	}
	dir := filepath.Join(opts.Root, opts.Platform)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("pluginstore: %w", err)
	}
	var out []Installed
	for _, f := range files {
		name, v, _ := ParseName(f.name)
		dst := filepath.Join(dir, f.name)
		if err := writeAtomic(dst, f.data, 0o755); err != nil {
			return out, fmt.Errorf("pluginstore: %w", err)
		}
		sum := sha256.Sum256(f.data)
		in := Installed{Name: name, Platform: opts.Platform, Path: dst, Hash: Hash(hex.EncodeToString(sum[:]))}
		if v != nil {
			in.Version = v.String()
		}
		out = append(out, in)
	}
	return out, nil
}

func readCapped(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pluginstore: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxBinary+1))
	if err != nil {
		return nil, fmt.Errorf("pluginstore: %w", err)
	}
	if len(data) > maxBinary {
		return nil, fmt.Errorf("pluginstore: %s is larger than %d bytes", path, maxBinary)
	}
	return data, nil
}

// parseArchiveName reads goreleaser-style archive names:
// NAME_[v]X.Y.Z_OS_ARCH.tar.gz gives the plugin name (without the
// prefix), its version and platform; anything missing is "".
func parseArchiveName(base string) (name, ver, platform string) {
	stem := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(base, ".tar.gz"), ".tgz"), ".zip")
	parts := strings.Split(stem, "_")
	name = strings.TrimPrefix(parts[0], Prefix)
	if len(parts) >= 4 && ValidPlatform(parts[len(parts)-2]+"_"+parts[len(parts)-1]) {
		platform = parts[len(parts)-2] + "_" + parts[len(parts)-1]
		parts = parts[:len(parts)-2]
	}
	if len(parts) >= 2 {
		if _, v, ok := ParseName(Prefix + "x_v" + strings.TrimPrefix(parts[len(parts)-1], "v")); ok && v != nil {
			ver = v.String()
		}
	}
	return name, ver, platform
}

// sums is a parsed checksum file.
type sums struct {
	path    string
	entries map[string]string // file name -> hex
}

func (s *sums) check(name string, data []byte) error {
	want, ok := s.entries[name]
	if !ok {
		return fmt.Errorf("%w: %s has no entry for %s, so it cannot be checked; get the checksum file that was published with it", ErrChecksum, s.path, name)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != want {
		return fmt.Errorf("%w: %s has sha256 %s, but %s lists %s: the file is corrupt or not the one published; download it again", ErrChecksum, name, got, s.path, want)
	}
	return nil
}

// readSums reads dir/SHA256SUMS and, with trusted keys, checks its
// signature first.
func readSums(dir string, keys []string) (*sums, error) {
	path := filepath.Join(dir, SumsFile)
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: no %s beside it in %s; get the one published with the plugin (for a plugin you built: `sha256sum FILE > %s`)", ErrChecksum, SumsFile, dir, SumsFile)
	}
	if err != nil {
		return nil, fmt.Errorf("pluginstore: %w", err)
	}
	if len(keys) > 0 {
		if err := verifySignature(path, raw, keys); err != nil {
			return nil, err
		}
	}
	s := &sums{path: path, entries: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		sum, file, ok := strings.Cut(line, " ")
		file = strings.TrimPrefix(strings.TrimLeft(file, " "), "*") // "*" marks binary mode
		if b, err := hex.DecodeString(sum); !ok || err != nil || len(b) != sha256.Size || file == "" {
			return nil, fmt.Errorf("%w: %s:%d is not \"<sha256 hex>  <file>\"", ErrChecksum, path, n)
		}
		s.entries[filepath.Base(file)] = strings.ToLower(sum)
	}
	return s, nil
}

func verifySignature(path string, data []byte, keys []string) error {
	sigPath := path + SignatureSuffix
	sig, err := os.ReadFile(sigPath)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: trusted_keys are configured, but %s is not signed (no %s); get the signature published with it, or remove trusted_keys to install unsigned plugins", ErrSignature, path, filepath.Base(sigPath))
	}
	if err != nil {
		return fmt.Errorf("pluginstore: %w", err)
	}
	for _, k := range keys {
		key, err := ParseKey(k)
		if err != nil {
			return fmt.Errorf("pluginstore: trusted_keys: %w", err)
		}
		if minisign.Verify(key, data, sig) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is not signed by any of the %d trusted_keys (%s does not verify): do not install it; if the publisher rotated its key, add the new public key to trusted_keys", ErrSignature, path, len(keys), filepath.Base(sigPath))
}

// untar returns the plugin binaries of a .tar.gz, by base name.
func untar(data []byte) (map[string][]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	out := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		base := filepath.Base(h.Name)
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if _, _, ok := ParseName(base); !ok {
			continue
		}
		if h.Size > maxBinary {
			return nil, fmt.Errorf("%s is larger than %d bytes", h.Name, maxBinary)
		}
		b, err := io.ReadAll(io.LimitReader(tr, maxBinary))
		if err != nil {
			return nil, err
		}
		out[base] = b
	}
}

// unzip returns the plugin binaries of a .zip, by base name.
func unzip(data []byte) (map[string][]byte, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, f := range zr.File {
		base := filepath.Base(f.Name)
		if !f.Mode().IsRegular() {
			continue
		}
		if _, _, ok := ParseName(base); !ok {
			continue
		}
		if f.UncompressedSize64 > maxBinary {
			return nil, fmt.Errorf("%s is larger than %d bytes", f.Name, maxBinary)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(io.LimitReader(rc, maxBinary))
		_ = rc.Close()
		if err != nil {
			return nil, err
		}
		out[base] = b
	}
	return out, nil
}

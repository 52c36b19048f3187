package loader

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/host/internal/builtins"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
)

// A built-in runs as `switchboard plugin-serve NAME`, so one binary is
// enough. make build also builds switchboard-builtins beside the host (the
// built-ins without the host's code) and pins its SHA-256 into the host
// (builtins.ServeBinaryPin); the host then starts built-ins through it, as
// a pinned plugin: it starts in about half the CPU time of the host's
// binary, and its pages are shared by the built-ins' processes as the
// host's were. A file there that does not hash to the pin (from another
// build, or planted by a plugin that may write the folder) is never run:
// the host re-executes itself, as it does when it pins none (a plain `go
// build`).

// builtinBinary is the binary beside the host's that serves built-ins,
// with the pin this build has for it.
type builtinBinary struct {
	path, pin string
	hashes    *hashCache
}

// builtinBinaryOf returns the built-ins' binary beside self, or nil when
// this build pins none. Hashes are cached in dataDir.
func builtinBinaryOf(self, dataDir string) *builtinBinary {
	if builtins.ServeBinaryPin == "" {
		return nil
	}
	return &builtinBinary{path: builtinBinaryPath(self), pin: builtins.ServeBinaryPin, hashes: hashesIn(dataDir)}
}

func builtinBinaryPath(self string) string {
	return filepath.Join(filepath.Dir(self), builtins.ServeBinary)
}

// builtinBinaryPaths lists the pinned built-ins' binary when it is beside
// self: every sandbox shows it read-only (as it does self).
func builtinBinaryPaths(self string) []string {
	if builtins.ServeBinaryPin == "" {
		return nil
	}
	p := builtinBinaryPath(self)
	if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	return []string{p}
}

// apply returns spec set to serve the built-in through the built-ins'
// binary, pinned, when the file there is the one this build pinned;
// otherwise spec as it is (the host re-executes itself). The launcher
// checks the pin again on the descriptor it executes.
func (s *builtinBinary) apply(spec launcher.Spec, log hclog.Logger) launcher.Spec {
	f, err := os.Open(s.path)
	if err != nil {
		return spec // none beside the host
	}
	sum, err := s.hashes.sum(f)
	if st, serr := f.Stat(); err == nil && (serr != nil || st.Mode()&0o111 == 0) {
		err = fmt.Errorf("%s is not executable", s.path) // its mode changed: serve the built-ins all the same
	}
	_ = f.Close()
	if err != nil || sum != s.pin {
		log.Info("the built-ins' binary beside the host is not the one built with it; the host serves the built-in itself (make build rebuilds both)", "server", spec.Name, "path", s.path, "sha256", sum, "error", err)
		return spec
	}
	spec.Path, spec.Args, spec.SHA256, spec.PinnedBy, spec.Hasher = s.path, []string{spec.Name}, s.pin, "", s.hashes.sum
	return spec
}

// hashCache remembers the SHA-256 of binaries by file identity (device,
// inode, size, mtime, ctime: the kernel sets the ctime of a file at every
// change, and no program can set it back), in data_dir, which no sandbox
// sees, so that a pinned binary is read whole once, not at every start.
type hashCache struct {
	file   string
	mu     sync.Mutex
	loaded bool
	sums   []hashEntry
}

// hashEntry is one cached hash.
type hashEntry struct {
	File   FileIdentity `json:"file"`
	SHA256 string       `json:"sha256"`
}

// maxHashEntries bounds the cache file: the oldest entries go first.
const maxHashEntries = 64

// HashesFile is the hash cache's file in data_dir.
const HashesFile = "binary-hashes.json"

var hashCaches sync.Map // data_dir -> *hashCache

// hashesIn returns the hash cache kept in dataDir.
func hashesIn(dataDir string) *hashCache {
	c, _ := hashCaches.LoadOrStore(dataDir, &hashCache{file: filepath.Join(dataDir, HashesFile)})
	return c.(*hashCache)
}

// sum returns the SHA-256 (hex) of the open file f, from the cache when
// its identity is there, else by reading it (and remembering it).
func (c *hashCache) sum(f *os.File) (string, error) {
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	id, idErr := identityOf("", fi)
	if idErr == nil {
		c.mu.Lock()
		c.load()
		for _, e := range c.sums {
			if e.File == *id {
				c.mu.Unlock()
				return e.SHA256, nil
			}
		}
		c.mu.Unlock()
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, fi.Size())); err != nil {
		return "", err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if idErr == nil {
		// Read after the hash: a file changed while it was read has
		// another identity now, and is not cached under the old one.
		if now, err := f.Stat(); err == nil {
			if after, err := identityOf("", now); err == nil && *after == *id {
				c.remember(hashEntry{File: *id, SHA256: sum})
			}
		}
	}
	return sum, nil
}

// load reads the cache file once; c.mu held.
func (c *hashCache) load() {
	if c.loaded {
		return
	}
	c.loaded = true
	if b, err := os.ReadFile(c.file); err == nil {
		_ = json.Unmarshal(b, &c.sums)
	}
}

// remember adds e and writes the cache file (best effort: a cache that
// cannot be written only costs a read of the binary at the next start).
func (c *hashCache) remember(e hashEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.load()
	for _, have := range c.sums {
		if have.File == e.File { // hashed by starts that ran together
			return
		}
	}
	c.sums = append(c.sums, e)
	if len(c.sums) > maxHashEntries {
		c.sums = c.sums[len(c.sums)-maxHashEntries:]
	}
	b, err := json.Marshal(c.sums)
	if err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.file), HashesFile+".*")
	if err != nil {
		return
	}
	if _, err := tmp.Write(b); err != nil || tmp.Close() != nil {
		_ = os.Remove(tmp.Name())
		return
	}
	if os.Rename(tmp.Name(), c.file) != nil {
		_ = os.Remove(tmp.Name())
	}
}

package loader

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sync"
)

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

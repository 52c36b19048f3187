package filesystem

import (
	"io/fs"
	"sync"
	"syscall"
	"time"
)

// hashCache keeps the sha256 of files read whole (or hashed for
// get_file_info), so that a later partial read of a large file can name
// its sum without reading it all. An entry is keyed by the file's
// identity and every stamp a change moves: device, inode, size,
// modification time and status-change time (which no caller can set). A
// sum is kept only for a file whose status last changed more than
// racyWindow before it was stat'ed: a change made after that stat, however
// soon, moves the change time past the one in the key, so a stale sum is
// never found (a file changed within the clock's granularity of its last
// change could otherwise keep its stamps; git calls this "racy").
type hashCache struct {
	mu      sync.Mutex
	entries map[hashKey]string
}

type hashKey struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
}

const hashCacheMax = 1024

// racyWindow is a var for tests.
var racyWindow = 2 * time.Second

func keyOf(st fs.FileInfo) (hashKey, bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return hashKey{}, false
	}
	return hashKey{
		dev: uint64(sys.Dev), ino: sys.Ino, size: st.Size(), //nolint:gosec,unconvert // int32 on darwin
		mtime: st.ModTime().UnixNano(), ctime: ctimeNano(sys),
	}, true
}

// get returns the sum kept for the file st describes.
func (c *hashCache) get(st fs.FileInfo) (string, bool) {
	k, ok := keyOf(st)
	if !ok {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	sum, ok := c.entries[k]
	return sum, ok
}

// put keeps sum for the file st describes, when n (the bytes hashed) is
// its size and its last change is old enough (see hashCache).
func (c *hashCache) put(st fs.FileInfo, n int64, sum string) {
	k, ok := keyOf(st)
	if !ok || n != st.Size() || time.Since(time.Unix(0, k.ctime)) < racyWindow {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[hashKey]string{}
	}
	if len(c.entries) >= hashCacheMax {
		for old := range c.entries { // drop one, any
			delete(c.entries, old)
			break
		}
	}
	c.entries[k] = sum
}

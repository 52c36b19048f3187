package loader

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"sync"
	"syscall"
	"time"
)

// maxIndex bounds the index files read for gitlinks (a monorepo's may be
// tens of megabytes; one of gigabytes is not read).
const maxIndex = 256 << 20

// gitlinks lists the paths of the gitlinks (mode 160000: submodules, and
// repositories committed inside another) in the git index file at path,
// reading index versions 2 to 4; oidLen is 20 (SHA-1) or 32 (SHA-256).
// A gitlink whose repository lives in its work tree (a submodule added
// from an existing repository, an embedded repository committed as a
// gitlink) is entered by the person's `git status` in the superproject,
// which runs what its config names (red team round 12). The result is
// remembered by the file's identity.
func gitlinks(path string, oidLen int) []string {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() > maxIndex {
		return nil
	}
	key := indexKey{path: path, size: st.Size(), mtime: st.ModTime(), oidLen: oidLen}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		key.ino = sys.Ino
	}
	indexMemo.Lock()
	if links, ok := indexMemo.m[key]; ok {
		indexMemo.Unlock()
		return links
	}
	indexMemo.Unlock()
	links := readGitlinks(bufio.NewReaderSize(f, 64<<10), oidLen)
	indexMemo.Lock()
	if len(indexMemo.m) > 64 {
		clear(indexMemo.m)
	}
	indexMemo.m[key] = links
	indexMemo.Unlock()
	return links
}

type indexKey struct {
	path   string
	size   int64
	mtime  time.Time
	oidLen int
	ino    uint64
}

var indexMemo = struct {
	sync.Mutex
	m map[indexKey][]string
}{m: map[indexKey][]string{}}

// readGitlinks parses an index (git's Documentation/gitformat-index)
// and returns its gitlinks' paths; a malformed index gives what was read
// before the fault.
func readGitlinks(r *bufio.Reader, oidLen int) []string {
	var hdr [12]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil || string(hdr[:4]) != "DIRC" {
		return nil
	}
	version := binary.BigEndian.Uint32(hdr[4:8])
	count := binary.BigEndian.Uint32(hdr[8:12])
	if version < 2 || version > 4 {
		return nil
	}
	fixed := make([]byte, 40+oidLen+2)
	var out []string
	var prev []byte
	for range count {
		if _, err := io.ReadFull(r, fixed); err != nil {
			return out
		}
		mode := binary.BigEndian.Uint32(fixed[24:28])
		flags := binary.BigEndian.Uint16(fixed[40+oidLen:])
		n := len(fixed)
		if version >= 3 && flags&0x4000 != 0 {
			if _, err := r.Discard(2); err != nil {
				return out
			}
			n += 2
		}
		var name []byte
		if version == 4 {
			strip, ok := offsetVarint(r)
			if !ok || strip > uint64(len(prev)) {
				return out
			}
			suffix, err := r.ReadBytes(0)
			if err != nil {
				return out
			}
			name = append(bytes.Clone(prev[:uint64(len(prev))-strip]), suffix[:len(suffix)-1]...)
			prev = name
		} else {
			b, err := r.ReadBytes(0)
			if err != nil {
				return out
			}
			name = b[:len(b)-1]
			// Entries are padded with NULs to a multiple of 8 bytes.
			total := n + len(b)
			if pad := (8 - total%8) % 8; pad > 0 {
				if _, err := r.Discard(pad); err != nil {
					return out
				}
			}
		}
		if mode&0o170000 == 0o160000 {
			out = append(out, string(name))
		}
	}
	return out
}

// offsetVarint reads git's offset varint (each continuation adds one
// before shifting), as index version 4 prefixes each path with it.
func offsetVarint(r *bufio.Reader) (uint64, bool) {
	c, err := r.ReadByte()
	if err != nil {
		return 0, false
	}
	v := uint64(c & 0x7f)
	for c&0x80 != 0 {
		if c, err = r.ReadByte(); err != nil || v > 1<<50 {
			return 0, false
		}
		v = ((v + 1) << 7) | uint64(c&0x7f)
	}
	return v, true
}

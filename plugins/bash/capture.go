package bash

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"unicode/utf8"
)

// maxLineBytes bounds one line reported as progress.
const maxLineBytes = 1000

// noteReserve is room kept in a capped saved file for the note that says
// what was dropped.
const noteReserve = 512

// capture receives a command's output (stdout and stderr in arrival order).
// It writes it to a file and keeps in memory only what a result can show:
// the head and the tail, each about half the cap. So a flood of output
// costs disk, not memory; and the disk it costs is capped too: the file
// keeps the first bytes up to about maxSaved, and when more came, finish
// appends a note saying how much was dropped and the last bytes (at most
// tailMax, already in memory).
type capture struct {
	mu      sync.Mutex
	file    *os.File
	path    string
	capRune int
	headMax int // bytes
	tailMax int // bytes

	maxSaved  int64 // the file's size limit
	fileHead  int64 // bytes of the head the file takes
	tailSaved int   // bytes of the tail the file takes when capped
	written   int64

	head    []byte
	tail    []byte
	bytes   int64
	runes   int64
	invalid bool
	partial []byte // an incomplete UTF-8 sequence awaiting its rest
	werr    error

	// progress: complete lines since the last flush
	line    []byte
	lines   []string
	dropped int
}

// newCapture creates the file at path; the result shows capRunes
// characters and the file keeps at most maxSaved bytes.
func newCapture(path string, capRunes int, maxSaved int64) (*capture, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	// Any character is at most 4 bytes, so these hold half the cap each.
	half := 4 * (capRunes/2 + 1)
	c := &capture{file: f, path: path, capRune: capRunes, headMax: half, tailMax: half, maxSaved: maxSaved}
	c.tailSaved = int(min(maxSaved/4, int64(half)))
	c.fileHead = maxSaved - int64(c.tailSaved) - noteReserve
	if c.fileHead <= 0 { // a tiny cap: the head only
		c.fileHead, c.tailSaved = maxSaved, 0
	}
	return c, nil
}

// droppedBytes returns how many bytes of output the file does not hold
// (yet: a capped file gets its tail when the command ends).
func (c *capture) droppedBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes - c.written
}

func (c *capture) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.fileHead - c.written; c.werr == nil && room > 0 {
		n, err := c.file.Write(b[:min(int64(len(b)), room)])
		c.written += int64(n)
		if err != nil {
			c.werr = err
		}
	}
	c.bytes += int64(len(b))
	if room := c.headMax - len(c.head); room > 0 {
		c.head = append(c.head, b[:min(room, len(b))]...)
	}
	c.tail = append(c.tail, b...)
	if len(c.tail) > 2*c.tailMax {
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-c.tailMax:]...)
	}
	c.count(b)
	c.collectLines(b)
	return len(b), nil
}

// count adds the characters in b, carrying a sequence split across writes.
func (c *capture) count(b []byte) {
	if len(c.partial) > 0 {
		b = append(c.partial, b...)
		c.partial = nil
	}
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size <= 1 {
			if !utf8.FullRune(b) {
				c.partial = append([]byte(nil), b...)
				return
			}
			c.invalid = true
		}
		c.runes++
		b = b[size:]
	}
}

func (c *capture) collectLines(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if room := maxLineBytes - len(c.line); room > 0 {
				c.line = append(c.line, b[:min(room, len(b))]...)
			}
			return
		}
		if room := maxLineBytes - len(c.line); room > 0 {
			c.line = append(c.line, b[:min(room, i)]...)
		}
		if len(c.lines) < 50 {
			c.lines = append(c.lines, strings.ToValidUTF8(string(c.line), "\uFFFD"))
		} else {
			c.dropped++
		}
		c.line = c.line[:0]
		b = b[i+1:]
	}
}

// takeLines returns the lines completed since the last call, as one
// progress message ("" when there are none).
func (c *capture) takeLines() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.lines) == 0 {
		return ""
	}
	msg := strings.Join(c.lines, "\n")
	if c.dropped > 0 {
		msg += fmt.Sprintf("\n[... %d more lines]", c.dropped)
	}
	c.lines, c.dropped = c.lines[:0], 0
	return msg
}

// finish closes the file and returns the text a result shows: everything
// when it fits the cap (and the file is removed), else the head and tail
// with a marker naming the file that holds the whole output.
func (c *capture) finish(keepFile bool) (text string, savedPath string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	capped := c.bytes > c.written && c.werr == nil
	if capped {
		c.saveTail()
	}
	if cerr := c.file.Close(); c.werr == nil {
		c.werr = cerr
	}
	if len(c.partial) > 0 {
		c.invalid = true
		c.runes++
	}
	if c.runes <= int64(c.capRune) {
		full := c.head
		if c.bytes > int64(len(c.head)) {
			// Fits in characters but not in the head buffer: read it back
			// (at most 4 bytes a character).
			if full, err = os.ReadFile(c.path); err != nil {
				return "", "", err
			}
		}
		if !keepFile {
			_ = os.Remove(c.path)
		}
		return c.decorate(string(full)), "", nil
	}
	half := c.capRune / 2
	head := firstRunes(c.head, half)
	tail := lastRunes(c.tail, half)
	cut := c.runes - int64(utf8.RuneCountInString(head)) - int64(utf8.RuneCountInString(tail))
	saved := c.path
	where := "the full output is in " + saved
	if capped {
		where = fmt.Sprintf("the output, capped at %d bytes (its head and tail), is in %s", c.maxSaved, saved)
	}
	if c.werr != nil {
		where = "saving the full output failed: " + c.werr.Error()
		saved = ""
	}
	return c.decorate(head + fmt.Sprintf("\n\n[... %d characters cut from the middle; %s ...]\n\n", cut, where) + tail), saved, nil
}

// saveTail ends a capped file: a note saying what was dropped, then the
// last bytes of the output (which are in memory).
func (c *capture) saveTail() {
	tail := c.tail[max(0, len(c.tail)-c.tailSaved):]
	tail = tail[max(0, int64(len(tail))-(c.bytes-c.written)):] // never repeat saved bytes
	dropped := c.bytes - c.written - int64(len(tail))
	note := fmt.Sprintf("\n[... %d bytes of output dropped here: saved outputs keep at most %d bytes (max_saved_bytes); the last %d bytes follow ...]\n", dropped, c.maxSaved, len(tail))
	if _, err := c.file.WriteString(note); err != nil {
		c.werr = err
		return
	}
	if _, err := c.file.Write(tail); err != nil {
		c.werr = err
	}
}

func (c *capture) decorate(s string) string {
	if c.invalid {
		return strings.ToValidUTF8(s, "\uFFFD") + "\n[output is not valid UTF-8 text; invalid bytes are shown as \uFFFD]\n"
	}
	return s
}

func firstRunes(b []byte, n int) string {
	i := 0
	for k := 0; k < n && i < len(b); k++ {
		_, size := utf8.DecodeRune(b[i:])
		i += size
	}
	return string(b[:i])
}

func lastRunes(b []byte, n int) string {
	i := len(b)
	for k := 0; k < n && i > 0; k++ {
		_, size := utf8.DecodeLastRune(b[:i])
		i -= size
	}
	return string(b[i:])
}

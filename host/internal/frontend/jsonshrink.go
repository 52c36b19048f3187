package frontend

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// shrinkJSON returns a JSON text of at most limit bytes made from the
// valid JSON text in: the same value when it fits, else one that keeps the
// beginning of it: arrays keep their first items and objects their first
// members (in their order), each as far as it fits, and a string that does
// not fit is cut. The result always parses. A value whose smallest form
// ({}, [], "") does not fit gives "null".
func shrinkJSON(in []byte, limit int) []byte {
	in = bytes.TrimSpace(in)
	if len(in) <= limit {
		return in
	}
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	v, err := readNode(dec)
	if err != nil {
		return []byte("null")
	}
	var buf bytes.Buffer
	if !v.write(&buf, limit) {
		return []byte("null")
	}
	return buf.Bytes()
}

// jnode is a JSON value with the order of its object members kept.
type jnode struct {
	kind  byte // '{', '[', 's' (string), 'l' (any other literal)
	lit   []byte
	str   string
	keys  []string
	items []*jnode
}

func readNode(dec *json.Decoder) (*jnode, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		n := &jnode{kind: byte(t)} //nolint:gosec // G115: a json.Delim is one of {}[], all ASCII
		for dec.More() {
			if t == '{' {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ := k.(string)
				n.keys = append(n.keys, key)
			}
			item, err := readNode(dec)
			if err != nil {
				return nil, err
			}
			n.items = append(n.items, item)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		return n, nil
	case string:
		return &jnode{kind: 's', str: t}, nil
	default:
		b, err := json.Marshal(t)
		if err != nil {
			return nil, err
		}
		return &jnode{kind: 'l', lit: b}, nil
	}
}

// write writes the node in at most limit bytes, shortened as shrinkJSON
// says, and reports whether anything fit (nothing is written if not).
func (n *jnode) write(buf *bytes.Buffer, limit int) bool {
	switch n.kind {
	case 'l':
		if len(n.lit) > limit {
			return false
		}
		buf.Write(n.lit)
		return true
	case 's':
		return writeString(buf, n.str, limit)
	}
	if limit < 2 {
		return false
	}
	start := buf.Len()
	closing := byte(']')
	if n.kind == '{' {
		closing = '}'
	}
	buf.WriteByte(n.kind)
	used := 1
	for i, item := range n.items {
		room := limit - used - 1 // the closing delimiter
		var head []byte
		if i > 0 {
			head = append(head, ',')
		}
		if n.kind == '{' {
			k, _ := json.Marshal(n.keys[i])
			head = append(append(head, k...), ':')
		}
		if len(head) >= room {
			break
		}
		mark := buf.Len()
		buf.Write(head)
		if !item.write(buf, room-len(head)) {
			buf.Truncate(mark)
			break
		}
		used += buf.Len() - mark
		if buf.Len()-mark-len(head) < item.size() {
			break // this item was shortened: nothing after it
		}
	}
	buf.WriteByte(closing)
	if buf.Len()-start > limit {
		buf.Truncate(start)
		return false
	}
	return true
}

// size is the length of the node written whole (compact).
func (n *jnode) size() int {
	switch n.kind {
	case 'l':
		return len(n.lit)
	case 's':
		b, _ := json.Marshal(n.str)
		return len(b)
	}
	s := 2
	for i, item := range n.items {
		if i > 0 {
			s++
		}
		if n.kind == '{' {
			k, _ := json.Marshal(n.keys[i])
			s += len(k) + 1
		}
		s += item.size()
	}
	return s
}

// writeString writes s as a JSON string of at most limit bytes, cut at a
// character boundary when it does not fit whole.
func writeString(buf *bytes.Buffer, s string, limit int) bool {
	b, _ := json.Marshal(s)
	if len(b) <= limit {
		buf.Write(b)
		return true
	}
	if limit < 2 {
		return false
	}
	// The longest prefix whose encoding fits: the encoding's length grows
	// with the prefix, so a binary search over the prefix's length in
	// bytes, each snapped back to a character boundary.
	snap := func(i int) int {
		for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
			i--
		}
		return i
	}
	lo, hi := 0, len(s)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if e, _ := json.Marshal(s[:snap(mid)]); len(e) <= limit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	lo = snap(lo)
	e, _ := json.Marshal(s[:lo])
	buf.Write(e)
	return true
}

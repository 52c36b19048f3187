package sandboxinit

import (
	"errors"
	"slices"
	"strconv"
	"strings"
)

// The helper's instructions (Spec) and the spawner's messages travel in a
// small text encoding of their own rather than JSON: each helper is a new
// process, and encoding/json's first use of a type (reflection over its
// fields) cost more of a confined start's CPU than the helper's mounts.
// A value is a sequence of fields, each written as its length in decimal,
// a colon and its bytes ("5:hello"); numbers and booleans are fields
// holding their decimal value, a list is its length followed by its items.
// It holds no NUL byte when its strings hold none (paths, arguments and
// environment entries cannot), so a Spec may travel in an environment
// variable.

// codecVersion opens every encoded Spec: a helper from another build
// refuses instructions it would misread.
const codecVersion = "sb1"

// errMalformed reports a message that does not decode.
var errMalformed = errors.New("malformed instructions")

type encoder struct{ b []byte }

func (e *encoder) str(s string) {
	e.b = strconv.AppendInt(e.b, int64(len(s)), 10)
	e.b = append(e.b, ':')
	e.b = append(e.b, s...)
}

func (e *encoder) num(n int64) {
	var tmp [24]byte
	v := strconv.AppendInt(tmp[:0], n, 10)
	e.b = strconv.AppendInt(e.b, int64(len(v)), 10)
	e.b = append(e.b, ':')
	e.b = append(e.b, v...)
}

func (e *encoder) unum(n uint64) {
	var tmp [24]byte
	v := strconv.AppendUint(tmp[:0], n, 10)
	e.b = strconv.AppendInt(e.b, int64(len(v)), 10)
	e.b = append(e.b, ':')
	e.b = append(e.b, v...)
}

func (e *encoder) flag(v bool) {
	if v {
		e.str("1")
	} else {
		e.str("0")
	}
}

func (e *encoder) strs(l []string) {
	e.num(int64(len(l)))
	for _, s := range l {
		e.str(s)
	}
}

// decoder reads what encoder wrote; the first error sticks, and every
// later read returns a zero value.
type decoder struct {
	s   string
	err error
}

func (d *decoder) str() string {
	if d.err != nil {
		return ""
	}
	i := strings.IndexByte(d.s, ':')
	if i <= 0 || i > 10 {
		d.err = errMalformed
		return ""
	}
	n, err := strconv.Atoi(d.s[:i])
	if err != nil || n < 0 || n > len(d.s)-i-1 {
		d.err = errMalformed
		return ""
	}
	v := d.s[i+1 : i+1+n]
	d.s = d.s[i+1+n:]
	return v
}

func (d *decoder) num() int64 {
	v := d.str()
	if d.err != nil {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		d.err = errMalformed
	}
	return n
}

func (d *decoder) unum() uint64 {
	v := d.str()
	if d.err != nil {
		return 0
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		d.err = errMalformed
	}
	return n
}

func (d *decoder) small() int {
	n := d.num()
	if n < 0 || n > 1<<30 {
		d.err = errMalformed
		return 0
	}
	return int(n)
}

func (d *decoder) flag() bool {
	switch d.str() {
	case "1":
		return true
	case "0", "":
		return false
	}
	d.err = errMalformed
	return false
}

func (d *decoder) strs() []string {
	n := d.small()
	if d.err != nil || n == 0 {
		return nil
	}
	if n > len(d.s)/2 { // every item takes two bytes at least
		d.err = errMalformed
		return nil
	}
	l := make([]string, n)
	for i := range l {
		l[i] = d.str()
	}
	return l
}

// end reports the decoder's error, or one when input is left over.
func (d *decoder) end() error {
	if d.err == nil && d.s != "" {
		d.err = errMalformed
	}
	return d.err
}

// Encode returns the Spec as the helper reads it (DecodeSpec).
func (sp Spec) Encode() string {
	e := encoder{b: make([]byte, 0, 1024)}
	e.str(codecVersion)
	e.str(sp.Path)
	e.strs(sp.Args)
	e.str(sp.Binary)
	e.flag(sp.Namespaces)
	e.flag(sp.Landlock)
	e.strs(sp.Read)
	e.strs(sp.Write)
	e.strs(sp.Hide)
	e.strs(sp.ReadOnly)
	e.flag(sp.Network)
	e.num(sp.FileSize)
	e.unum(sp.OpenFiles)
	e.unum(sp.CPUSeconds)
	keys := make([]string, 0, len(sp.Env))
	for k := range sp.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e.num(int64(len(keys)))
	for _, k := range keys {
		e.str(k)
		e.str(sp.Env[k])
	}
	e.strs(sp.Unset)
	e.num(int64(sp.GateFD))
	e.num(int64(sp.ExtraFDs))
	e.flag(sp.PinnedFD)
	e.flag(sp.ExecOnly)
	e.strs(sp.Exec)
	return string(e.b)
}

// DecodeSpec reads a Spec that Encode wrote.
func DecodeSpec(s string) (Spec, error) {
	d := decoder{s: s}
	if d.str() != codecVersion {
		return Spec{}, errMalformed
	}
	var sp Spec
	sp.Path = d.str()
	sp.Args = d.strs()
	sp.Binary = d.str()
	sp.Namespaces = d.flag()
	sp.Landlock = d.flag()
	sp.Read = d.strs()
	sp.Write = d.strs()
	sp.Hide = d.strs()
	sp.ReadOnly = d.strs()
	sp.Network = d.flag()
	sp.FileSize = d.num()
	sp.OpenFiles = d.unum()
	sp.CPUSeconds = d.unum()
	if n := d.small(); n > 0 && d.err == nil {
		if n > len(d.s)/4 {
			return Spec{}, errMalformed
		}
		sp.Env = make(map[string]string, n)
		for range n {
			k := d.str()
			sp.Env[k] = d.str()
		}
	}
	sp.Unset = d.strs()
	sp.GateFD = d.small()
	sp.ExtraFDs = d.small()
	sp.PinnedFD = d.flag()
	sp.ExecOnly = d.flag()
	sp.Exec = d.strs()
	if err := d.end(); err != nil {
		return Spec{}, err
	}
	return sp, nil
}

// Package logbook keeps each server's recent log lines in the running host,
// for `switchboard logs NAME [--follow]`: what the plugin wrote on stderr
// (its log records, re-logged by go-plugin) and what the host logged about
// it (started, exited, restarted, refused).
//
// A Book is an hclog sink: registered on the host's intercept logger, it
// sees every record whatever the host's own log level, and files it under
// the server it belongs to, found from the logger's name
// ("switchboard.plugin.NAME", "switchboard.NAME", "switchboard.external.NAME")
// or a "plugin" field. Memory is bounded: at most MaxLines lines per server
// and at most MaxServers servers (the one written to least recently is
// dropped first).
package logbook

import (
	"container/list"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

const (
	// MaxLines is how many lines a server's ring holds.
	MaxLines = 1000
	// MaxServers is how many servers' rings a book holds.
	MaxServers = 256
	// maxMessage cuts one line's message.
	maxMessage = 4096
	// followBuffer is how many lines a follower may lag before lines are
	// dropped for it (the host never waits for a slow reader).
	followBuffer = 256
)

// Line is one log record.
type Line struct {
	Time    time.Time         `json:"time"`
	Level   string            `json:"level"`
	Logger  string            `json:"logger"`
	Message string            `json:"message"`
	Fields  map[string]string `json:"fields,omitempty"`
}

// String formats a line as the host's text log does.
func (l Line) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s [%-5s] %s: %s", l.Time.UTC().Format("2006-01-02T15:04:05.000Z0700"), strings.ToUpper(l.Level), l.Logger, l.Message)
	for _, k := range slices.Sorted(maps.Keys(l.Fields)) {
		fmt.Fprintf(&b, " %s=%s", k, l.Fields[k])
	}
	return b.String()
}

// Book is the host's set of per-server rings. The zero value is not
// usable; call New.
type Book struct {
	prefix string
	level  hclog.Level
	now    func() time.Time

	mu    sync.Mutex
	rings map[string]*ring
	lru   *list.List // of server names, most recently written at the front
}

type ring struct {
	lines     []Line
	next      int // the oldest line once the ring is full, else 0
	elem      *list.Element
	followers map[chan Line]struct{}
}

// New returns a book for a host whose root logger is named prefix
// ("switchboard"). It files records under whatever name the logger's name
// gives; the caller asks only for names that are servers (Accept runs
// under the loggers' callers, which may hold the registry's locks, so it
// does not consult the registry).
func New(prefix string) *Book {
	return &Book{prefix: prefix, level: hclog.Debug, now: time.Now, rings: map[string]*ring{}, lru: list.New()}
}

// Accept implements hclog.SinkAdapter.
func (b *Book) Accept(name string, level hclog.Level, msg string, args ...any) {
	if level < b.level {
		return
	}
	fields := map[string]string{}
	for i := 0; i+1 < len(args); i += 2 {
		k, ok := args[i].(string)
		if !ok || k == "timestamp" {
			continue
		}
		fields[k] = cut(fmt.Sprint(args[i+1]))
	}
	server := b.serverOf(name, fields)
	if server == "" {
		return
	}
	if len(fields) == 0 {
		fields = nil
	}
	line := Line{Time: b.now(), Level: level.String(), Logger: name, Message: cut(strings.TrimSpace(msg)), Fields: fields}

	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.ringLocked(server)
	if len(r.lines) < MaxLines {
		r.lines = append(r.lines, line)
	} else {
		r.lines[r.next] = line
		r.next = (r.next + 1) % MaxLines
	}
	for ch := range r.followers {
		select {
		case ch <- line:
		default: // a slow follower loses lines, the host never waits
		}
	}
}

// serverOf finds the server a record is about.
func (b *Book) serverOf(name string, fields map[string]string) string {
	rest, ok := strings.CutPrefix(name, b.prefix+".")
	if !ok {
		return ""
	}
	rest = strings.TrimPrefix(rest, "external.")
	if p, ok := strings.CutPrefix(rest, "plugin."); ok {
		rest = p
	} else if rest == "plugin" {
		rest = fields["plugin"]
	}
	if i := strings.IndexByte(rest, '.'); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

func (b *Book) ringLocked(server string) *ring {
	if r, ok := b.rings[server]; ok {
		b.lru.MoveToFront(r.elem)
		return r
	}
	// Full: drop the ring written to least recently that nobody follows.
	for e := b.lru.Back(); e != nil && len(b.rings) >= MaxServers; {
		prev := e.Prev()
		if name := e.Value.(string); len(b.rings[name].followers) == 0 {
			b.lru.Remove(e)
			delete(b.rings, name)
		}
		e = prev
	}
	r := &ring{followers: map[chan Line]struct{}{}}
	r.elem = b.lru.PushFront(server)
	b.rings[server] = r
	return r
}

// Lines returns a server's kept lines at or after since (all of them when
// since is zero), oldest first.
func (b *Book) Lines(server string, since time.Time) []Line {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.rings[server]
	if !ok {
		return nil
	}
	return r.since(since)
}

func (r *ring) since(t time.Time) []Line {
	out := make([]Line, 0, len(r.lines))
	n := len(r.lines)
	for i := range n {
		if l := r.lines[(r.next+i)%n]; !l.Time.Before(t) {
			out = append(out, l)
		}
	}
	return out
}

// Follow returns a server's kept lines at or after since, and a channel of
// the lines that arrive from now on, until stop is called. A follower that
// falls behind by more than a buffer loses lines rather than slowing the
// host.
func (b *Book) Follow(server string, since time.Time) (past []Line, next <-chan Line, stop func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.ringLocked(server)
	ch := make(chan Line, followBuffer)
	r.followers[ch] = struct{}{}
	var once sync.Once
	return r.since(since), ch, func() {
		once.Do(func() {
			b.mu.Lock()
			delete(r.followers, ch)
			b.mu.Unlock()
		})
	}
}

func cut(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return s[:maxMessage] + fmt.Sprintf("… [cut: %d more bytes]", len(s)-maxMessage)
}

var _ hclog.SinkAdapter = (*Book)(nil)

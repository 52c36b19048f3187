package launcher

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
)

// What a plugin's stderr may cost the host: at most stderrRate lines a
// second reach the host's log (bursts of stderrBurst), each cut at
// stderrLineMax bytes; the lines dropped are counted and reported. A plugin
// that floods stderr (43 MB of host log a second, found from outside)
// cannot flood the host's log or its disk.
const (
	stderrRate    = 200
	stderrBurst   = 400
	stderrLineMax = 4096
	// stderrTailMax is how much of a plugin's last stderr is kept for the
	// error when its start fails.
	stderrTailMax = 2048
)

// stderrWatch sees a plugin's raw stderr (go-plugin's ClientConfig.Stderr):
// it keeps the tail for a failed start's error, and finds the line an SDK
// plugin writes when it shares no protocol version with the host
// (protocol.VersionsLine), so that the refusal names every version the
// plugin speaks, not only the one go-plugin reports.
type stderrWatch struct {
	mu      sync.Mutex
	partial []byte
	tail    []byte
	found   []int
}

func (w *stderrWatch) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tail = append(w.tail, b...)
	if len(w.tail) > 2*stderrTailMax {
		w.tail = append(w.tail[:0], w.tail[len(w.tail)-stderrTailMax:]...)
	}
	if w.found != nil || len(w.partial) > 4096 {
		return len(b), nil // found, or not an SDK plugin's start: stop looking
	}
	w.partial = append(w.partial, b...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(w.partial[:i])
		w.partial = w.partial[i+1:]
		if vs, ok := protocol.ParseVersionsLine(line); ok {
			w.found = vs
			return len(b), nil
		}
	}
}

// versions returns what the plugin said it speaks, or nil.
func (w *stderrWatch) versions() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.found
}

// last returns the end of what the plugin wrote on stderr, for an error
// message ("" when it wrote nothing).
func (w *stderrWatch) last() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.tail
	if len(t) > stderrTailMax {
		t = t[len(t)-stderrTailMax:]
		if i := bytes.IndexByte(t, '\n'); i >= 0 && i < len(t)-1 {
			t = t[i+1:]
		}
	}
	return strings.TrimSpace(string(t))
}

// limitedLogger is the logger go-plugin logs a plugin's stderr lines to:
// rate-limited and with long lines cut (see stderrRate).
type limitedLogger struct {
	hclog.Logger
	lim *lineLimiter
}

// lineLimiter is a token bucket shared by a plugin's loggers.
type lineLimiter struct {
	mu      sync.Mutex
	tokens  float64
	last    time.Time
	dropped int
	// reported is when dropped lines were last reported.
	reported time.Time
	warn     hclog.Logger
	now      func() time.Time
	// what names the lines in the report of those dropped.
	what string
}

// LimitedLogger returns l with the limits of a plugin's stderr (see
// stderrRate): for what other servers write, e.g. an external stdio MCP
// server's stderr through its StandardWriter.
func LimitedLogger(l hclog.Logger) hclog.Logger { return newLimitedLogger(l) }

func newLimitedLogger(l hclog.Logger) *limitedLogger {
	return newLimited(l, "plugin stderr")
}

// newLimited returns l with the limits of a plugin's stderr, for the lines
// what names (a bucket of their own).
func newLimited(l hclog.Logger, what string) *limitedLogger {
	return &limitedLogger{Logger: l, lim: &lineLimiter{tokens: stderrBurst, warn: l, now: time.Now, what: what}}
}

// allow takes a token, or counts a dropped line. Once lines flow again it
// reports how many were dropped.
func (ll *lineLimiter) allow() bool {
	ll.mu.Lock()
	now := ll.now()
	if !ll.last.IsZero() {
		ll.tokens = min(stderrBurst, ll.tokens+now.Sub(ll.last).Seconds()*stderrRate)
	}
	ll.last = now
	if ll.tokens < 1 {
		ll.dropped++
		ll.mu.Unlock()
		return false
	}
	ll.tokens--
	// Dropped lines are reported at most once a second: a report per
	// line that passes would double the rate of a flood.
	var dropped int
	if ll.dropped > 0 && now.Sub(ll.reported) >= time.Second {
		dropped, ll.dropped, ll.reported = ll.dropped, 0, now
	}
	ll.mu.Unlock()
	if dropped > 0 {
		ll.warn.Warn(ll.what+" rate-limited: lines dropped", "dropped", dropped, "limit_per_second", stderrRate)
	}
	return true
}

func cut(s string) string {
	if len(s) <= stderrLineMax {
		return s
	}
	return s[:stderrLineMax] + "… [cut: " + strconv.Itoa(len(s)-stderrLineMax) + " more bytes]"
}

func cutArgs(args []any) []any {
	for i, a := range args {
		if s, ok := a.(string); ok && len(s) > stderrLineMax {
			args[i] = cut(s)
		}
	}
	return args
}

func (l *limitedLogger) Log(level hclog.Level, msg string, args ...any) {
	// Below the host's level a line is not logged, and costs no token;
	// info and above always pass on (a host keeps them per server for
	// `switchboard logs`, whatever its own level).
	if !l.IsTrace() && level < min(l.GetLevel(), hclog.Info) {
		return
	}
	if l.lim.allow() {
		l.Logger.Log(level, cut(msg), cutArgs(args)...)
	}
}

func (l *limitedLogger) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }
func (l *limitedLogger) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }
func (l *limitedLogger) Info(msg string, args ...any)  { l.Log(hclog.Info, msg, args...) }
func (l *limitedLogger) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l *limitedLogger) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

func (l *limitedLogger) Named(name string) hclog.Logger {
	return &limitedLogger{Logger: l.Logger.Named(name), lim: l.lim}
}

func (l *limitedLogger) ResetNamed(name string) hclog.Logger {
	return &limitedLogger{Logger: l.Logger.ResetNamed(name), lim: l.lim}
}

func (l *limitedLogger) With(args ...any) hclog.Logger {
	return &limitedLogger{Logger: l.Logger.With(args...), lim: l.lim}
}

// StandardWriter is where go-plugin sends what the plugin writes to its
// stdout and stderr after the handshake (its stdio streams): line by line,
// through the same limits.
func (l *limitedLogger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	level := hclog.Info
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		level = opts.ForceLevel
	}
	return &lineWriter{l: l, level: level}
}

// lineWriter logs each complete line written to it.
type lineWriter struct {
	mu      sync.Mutex
	l       *limitedLogger
	level   hclog.Level
	partial []byte
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, b...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			if len(w.partial) > stderrLineMax { // a line without end
				w.l.Log(w.level, string(w.partial))
				w.partial = w.partial[:0]
			}
			return len(b), nil
		}
		if line := strings.TrimRight(string(w.partial[:i]), "\r"); line != "" {
			w.l.Log(w.level, line)
		}
		w.partial = w.partial[i+1:]
	}
}

var _ hclog.Logger = (*limitedLogger)(nil)

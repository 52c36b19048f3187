package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginserve"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
)

// LevelTrace is a log level below slog.LevelDebug, for the host's trace
// level (the host's log_level = "trace").
const LevelTrace = slog.Level(-8)

var (
	loggerOnce sync.Once
	logger     *slog.Logger
)

// Logger returns the plugin process's logger. Its lines go to stderr, which
// the host reads and re-logs under "plugin.<name>" at the same level; the
// level the host runs at is applied here, so disabled levels cost nothing.
// Never log to stdout: it carries the handshake.
func Logger() *slog.Logger {
	loggerOnce.Do(func() { logger = slog.New(&logHandler{l: pluginserve.Logger()}) })
	return logger
}

// logHandler is a slog.Handler writing through the process's hclog logger,
// whose JSON lines go-plugin's host side understands.
type logHandler struct {
	l      hclog.Logger
	attrs  []any // key/value pairs, group-qualified
	prefix string
}

func (h *logHandler) Enabled(_ context.Context, level slog.Level) bool {
	return hclogLevel(level) >= h.l.GetLevel()
}

func (h *logHandler) Handle(_ context.Context, r slog.Record) error {
	kv := append([]any(nil), h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		kv = appendAttr(kv, h.prefix, a)
		return true
	})
	h.l.Log(hclogLevel(r.Level), r.Message, kv...)
	return nil
}

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append([]any(nil), h.attrs...)
	for _, a := range attrs {
		n.attrs = appendAttr(n.attrs, h.prefix, a)
	}
	return &n
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	n := *h
	n.prefix = h.prefix + name + "."
	return &n
}

// appendAttr flattens a into key/value pairs, groups as dotted keys.
func appendAttr(kv []any, prefix string, a slog.Attr) []any {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return kv
	}
	if a.Value.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, g := range a.Value.Group() {
			kv = appendAttr(kv, p, g)
		}
		return kv
	}
	return append(kv, prefix+a.Key, a.Value.Any())
}

func hclogLevel(l slog.Level) hclog.Level {
	switch {
	case l <= LevelTrace:
		return hclog.Trace
	case l < slog.LevelInfo:
		return hclog.Debug
	case l < slog.LevelWarn:
		return hclog.Info
	case l < slog.LevelError:
		return hclog.Warn
	default:
		return hclog.Error
	}
}

func wireLevel(l slog.Level) pluginv1.LogLevel {
	switch hclogLevel(l) {
	case hclog.Trace:
		return pluginv1.LogLevel_LOG_LEVEL_TRACE
	case hclog.Debug:
		return pluginv1.LogLevel_LOG_LEVEL_DEBUG
	case hclog.Warn:
		return pluginv1.LogLevel_LOG_LEVEL_WARN
	case hclog.Error:
		return pluginv1.LogLevel_LOG_LEVEL_ERROR
	default:
		return pluginv1.LogLevel_LOG_LEVEL_INFO
	}
}

// Log sends a log line to the host, which logs it under the plugin's name
// with this call's tool. args are key/value pairs or slog.Attr values, as
// for slog.Logger.Log.
func (r *Request) Log(level slog.Level, msg string, args ...any) {
	if r.events == nil {
		return
	}
	rec := slog.NewRecord(time.Time{}, level, msg, 0)
	rec.Add(args...)
	var kv []any
	rec.Attrs(func(a slog.Attr) bool {
		kv = appendAttr(kv, "", a)
		return true
	})
	var fj []byte
	if len(kv) > 0 {
		m := make(map[string]any, len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			m[fmt.Sprint(kv[i])] = kv[i+1]
		}
		fj, _ = json.Marshal(m)
	}
	r.events.Log(&pluginv1.Log{Level: wireLevel(level), Message: msg, FieldsJson: fj})
}

// Logger returns the plugin process's logger with the tool's name attached.
func (r *Request) Logger() *slog.Logger {
	r.loggerOnce.Do(func() { r.logger = Logger().With("tool", r.Tool) })
	return r.logger
}

package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/ablate"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/quietio"
)

// AuditRecord is one line of audit.jsonl.
type AuditRecord struct {
	Time time.Time `json:"time"`
	// CallID names the call in this host (a caller's recent_calls and
	// why_refused use it); empty for a control action.
	CallID string `json:"call_id,omitempty"`
	Client string `json:"client"`
	// Caller is the authenticated caller (a token's name or a JWT's
	// subject), absent when nobody authenticated.
	Caller     string `json:"caller,omitempty"`
	Tool       string `json:"tool"`
	ArgsSHA256 string `json:"args_sha256"`
	ArgsSize   int    `json:"args_size"`
	// Decision is allow, deny, ask, approved, invalid or unknown.
	Decision   string  `json:"decision"`
	Rule       string  `json:"rule,omitempty"`
	DurationMS float64 `json:"duration_ms"`
	// Outcome is ok, tool_error, refused, timeout (call_timeout),
	// cancelled (by the client), or error.
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
	// Repeats counts the calls in a row, this one included, with the same
	// tool and arguments that returned the same result (0 or absent for a
	// new result); the answer was a note, or the loop breaker's error.
	Repeats int `json:"repeats,omitempty"`
	// ResultSize is the size in bytes of what the tool returned, as its
	// server sent it (text, data, structured content, _meta), before the
	// host cut anything to fit; absent when it returned nothing.
	ResultSize int `json:"result_size,omitempty"`

	// Action is set for a control-socket request instead of a tool call
	// (Tool is then empty): status, restart, reload, connect, disconnect;
	// or for a request of the switchboard built-in to its host service
	// (Client "plugin:switchboard"): host.list_servers, host.restart_server,
	// host.why_refused, host.recent_calls.
	Action string `json:"action,omitempty"`
	// Target is the server a control action names.
	Target string `json:"target,omitempty"`
	// Detail is what a control "connect" would start (command or URL).
	Detail string `json:"detail,omitempty"`
	// Peer is the process that sent a control request.
	Peer *AuditPeer `json:"peer,omitempty"`
}

// AuditLog is where a Registry writes its audit records: the local file
// (*Audit) or a shared store. It is safe for concurrent use.
type AuditLog interface {
	// Write records r. A durable log returns once r is stored (so a
	// call's record exists before its answer is sent); an error means r
	// may be lost.
	Write(r AuditRecord) error
	// Queued is how many records wait to be stored.
	Queued() int
	// OnError sets where failures of background writes are reported.
	OnError(fn func(error))
	// Close stores what is queued and closes the log; it may be called
	// more than once.
	Close() error
}

// noAudit is the audit log of a Registry given none.
type noAudit struct{}

func (noAudit) Write(AuditRecord) error { return nil }
func (noAudit) Queued() int             { return 0 }
func (noAudit) OnError(func(error))     {}
func (noAudit) Close() error            { return nil }

// AuditPeer is the process at the other end of the control socket.
type AuditPeer struct {
	PID int `json:"pid"`
	UID int `json:"uid"`
}

// Audit appends records to a file, one JSON line each, written by one
// goroutine that batches what is queued into one write. Durable (the
// default), Write returns once its record has been written to the file
// (handed to the OS: it survives the host being killed, though not the
// machine losing power), so a call's record exists before its answer is
// sent; callers arriving together share one write. Otherwise records are
// written in the background after a short linger, and a killed host can
// lose the last few. Close drains the queue, so a clean shutdown loses
// nothing; a full queue makes Write wait rather than drop a record. The
// file is rotated to FILE.1 … FILE.keep when it grows past maxBytes.
type Audit struct {
	mu       sync.Mutex
	path     string
	f        *os.File
	w        io.Writer // f, written quietly (sdk/protocol/quietio)
	loud     bool      // a quiet write was slow: f itself from then on
	size     int64
	maxBytes int64
	keep     int

	durable bool
	queue   chan *auditEntry
	stopped chan struct{}
	closing sync.Once
	closed  bool
	qmu     sync.RWMutex
	errFn   func(error)
}

// auditLinger is how long the writer collects records before writing them:
// the most a record lags behind its call in the file.
const auditLinger = 20 * time.Millisecond

// closedTime is ready at once: the audit writer's wait when lingering is
// switched off (see sdk/protocol/ablate).
var closedTime = func() <-chan time.Time { c := make(chan time.Time); close(c); return c }()

// auditEntry is a queued record; done, when set, is closed once the record
// is written. The queue holds pointers: a queue of 4,096 records by value
// is a 1.1 MB buffer that every host zeroed at start (some 10 ms of page
// faults here) and every garbage collection scanned whole.
type auditEntry struct {
	rec  AuditRecord
	done chan struct{}
}

// OpenAudit opens (appends to) the audit log at path. durable makes Write
// wait until its record is written (see Audit).
func OpenAudit(path string, maxBytes int64, keep int, durable bool) (*Audit, error) {
	a := &Audit{path: path, maxBytes: maxBytes, keep: keep, durable: durable, queue: make(chan *auditEntry, 4096), stopped: make(chan struct{}), errFn: func(error) {}}
	if err := a.open(); err != nil {
		return nil, err
	}
	go a.writer()
	return a, nil
}

// writer writes queued records, batching what is already queued into one
// write. While someone waits for a record, it writes at once; otherwise it
// lingers briefly so that a busy host writes (and wakes this goroutine)
// once per batch, not once per call.
func (a *Audit) writer() {
	defer close(a.stopped)
	var buf []byte
	var waiters []chan struct{}
	for e := range a.queue {
		buf, waiters = a.appendRecord(buf[:0], e.rec), appendWaiter(waiters[:0], e)
		linger := time.NewTimer(auditLinger)
		var now <-chan time.Time // ablate.AuditLinger: no wait, only what is queued
		if ablate.Off(ablate.AuditLinger) {
			now = closedTime
		}
		yielded := false
	more:
		for len(buf) < 64<<10 {
			select {
			case e, ok := <-a.queue:
				if !ok {
					break more
				}
				buf, waiters = a.appendRecord(buf, e.rec), appendWaiter(waiters, e)
				continue
			default:
			}
			if len(waiters) > 0 {
				// A call is waiting for its record: write now, once the
				// other goroutines ready to run (calls that ended
				// together) have queued theirs, so that one write serves
				// them all.
				if !yielded {
					yielded = true
					runtime.Gosched()
					continue
				}
				break more
			}
			select {
			case e, ok := <-a.queue:
				if !ok {
					break more
				}
				buf, waiters = a.appendRecord(buf, e.rec), appendWaiter(waiters, e)
			case <-now:
				break more
			case <-linger.C:
				break more
			}
		}
		linger.Stop()
		if err := a.writeLines(buf); err != nil {
			a.mu.Lock()
			report := a.errFn
			a.mu.Unlock()
			report(err)
		}
		for _, w := range waiters {
			close(w)
		}
	}
}

func appendWaiter(ws []chan struct{}, e *auditEntry) []chan struct{} {
	if e.done != nil {
		ws = append(ws, e.done)
	}
	return ws
}

func (a *Audit) appendRecord(buf []byte, r AuditRecord) []byte {
	b, err := json.Marshal(r)
	if err != nil {
		return buf
	}
	return append(append(buf, b...), '\n')
}

func (a *Audit) open() error {
	f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("registry: opening audit log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	// Once a quiet write was slow, every later file of this log is
	// written the ordinary way (sdk/protocol/quietio).
	a.loud = a.loud || quietio.GaveUp(a.w)
	var w io.Writer = f
	if !a.loud {
		w = quietio.FileWriter(f)
	}
	a.f, a.w, a.size = f, w, st.Size()
	return nil
}

// OnError sets where failed background writes are reported.
func (a *Audit) OnError(fn func(error)) {
	a.mu.Lock()
	a.errFn = fn
	a.mu.Unlock()
}

// Queued is how many records wait to be written.
func (a *Audit) Queued() int {
	if a == nil {
		return 0
	}
	return len(a.queue)
}

// Write queues one record and, for a durable log, waits until it is
// written.
func (a *Audit) Write(r AuditRecord) error {
	if a == nil {
		return nil
	}
	e := &auditEntry{rec: r}
	if a.durable {
		e.done = make(chan struct{})
	}
	a.qmu.RLock()
	if a.closed {
		a.qmu.RUnlock()
		return fmt.Errorf("registry: audit log is closed")
	}
	a.queue <- e
	a.qmu.RUnlock()
	if e.done != nil {
		<-e.done
	}
	return nil
}

// writeLines appends complete lines to the file, rotating first if needed.
func (a *Audit) writeLines(b []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return fmt.Errorf("registry: audit log is closed")
	}
	for len(b) > 0 {
		// Take as many whole lines as fit before the size limit (at least
		// one), write them, and rotate when the file is full.
		n := len(b)
		if a.maxBytes > 0 && a.size+int64(n) > a.maxBytes {
			room := int(a.maxBytes - a.size)
			n = 0
			for n < len(b) {
				i := bytes.IndexByte(b[n:], '\n')
				if i < 0 || n+i+1 > room {
					break
				}
				n += i + 1
			}
			if n == 0 {
				if a.size > 0 {
					if err := a.rotate(); err != nil {
						return err
					}
					continue
				}
				n = bytes.IndexByte(b, '\n') + 1 // one line longer than the limit
				if n == 0 {
					n = len(b)
				}
			}
		}
		w, err := a.w.Write(b[:n])
		a.size += int64(w)
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func (a *Audit) rotate() error {
	if err := a.f.Close(); err != nil {
		return err
	}
	for i := a.keep; i >= 1; i-- {
		src := a.path
		if i > 1 {
			src = fmt.Sprintf("%s.%d", a.path, i-1)
		}
		_ = os.Rename(src, fmt.Sprintf("%s.%d", a.path, i))
	}
	if a.keep <= 0 {
		_ = os.Remove(a.path)
	}
	return a.open()
}

// Close writes what is queued, syncs and closes the log; it may be called
// more than once.
func (a *Audit) Close() error {
	if a == nil {
		return nil
	}
	a.closing.Do(func() {
		a.qmu.Lock()
		a.closed = true
		close(a.queue)
		a.qmu.Unlock()
	})
	<-a.stopped
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	err := a.f.Sync()
	if cerr := a.f.Close(); err == nil {
		err = cerr
	}
	a.f = nil
	return err
}

var (
	_ AuditLog = (*Audit)(nil)
	_ AuditLog = noAudit{}
)

package sharedstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
)

// Audit is the audit log in the store (registry.AuditLog): one row per
// record in switchboard_audit, the whole record as JSON in its record
// column (the same object as a line of audit.jsonl) and the columns a
// query filters on beside it. One goroutine inserts what is queued, many
// records in one COPY. Durable, Write returns once its row is committed,
// so a call's record is in the store before its answer is sent. A batch
// the store refuses (the database down) goes to the local audit file
// instead, so no record is lost; the failure is reported through OnError.
type Audit struct {
	s        *Store
	durable  bool
	fallback *registry.Audit

	queue   chan *auditEntry
	stopped chan struct{}
	qmu     sync.RWMutex
	closed  bool
	closing sync.Once

	mu    sync.Mutex
	errFn func(error)
}

// auditEntry is a queued record; the queue holds pointers (as
// registry.Audit's does) so that it is not a 1.1 MB buffer to zero at start
// and scan at every collection.
type auditEntry struct {
	rec  registry.AuditRecord
	done chan error // nil unless durable
}

// auditLinger is how long the writer waits for more records when nobody
// waits for one (audit_durable = false).
const auditLinger = 20 * time.Millisecond

// insertTimeout bounds one insert: past it the batch goes to the fallback.
const insertTimeout = 10 * time.Second

// Audit returns the store's audit log. durable makes Write wait until
// its row is committed. fallback, when set, receives the records of a
// batch the store refused; Close does not close it.
func (s *Store) Audit(durable bool, fallback *registry.Audit) *Audit {
	a := &Audit{s: s, durable: durable, fallback: fallback, queue: make(chan *auditEntry, 4096), stopped: make(chan struct{}), errFn: func(error) {}}
	go a.writer()
	return a
}

// Write queues r and, when durable, waits until it is stored (in the
// database, or in the fallback file when the database refused it).
func (a *Audit) Write(r registry.AuditRecord) error {
	e := &auditEntry{rec: r}
	if a.durable {
		e.done = make(chan error, 1)
	}
	a.qmu.RLock()
	if a.closed {
		a.qmu.RUnlock()
		return errors.New("sharedstore: audit log is closed")
	}
	a.queue <- e
	a.qmu.RUnlock()
	if e.done != nil {
		return <-e.done
	}
	return nil
}

// Queued is how many records wait to be inserted.
func (a *Audit) Queued() int { return len(a.queue) }

// OnError sets where failed inserts are reported.
func (a *Audit) OnError(fn func(error)) {
	a.mu.Lock()
	a.errFn = fn
	a.mu.Unlock()
}

// Close inserts what is queued and stops the writer; it may be called
// more than once.
func (a *Audit) Close() error {
	a.closing.Do(func() {
		a.qmu.Lock()
		a.closed = true
		close(a.queue)
		a.qmu.Unlock()
	})
	<-a.stopped
	return nil
}

func (a *Audit) writer() {
	defer close(a.stopped)
	var batch []*auditEntry
	for e := range a.queue {
		batch = append(batch[:0], e)
		waiting := e.done != nil
		linger := time.NewTimer(auditLinger)
	more:
		for len(batch) < 1000 {
			select {
			case e, ok := <-a.queue:
				if !ok {
					break more
				}
				batch = append(batch, e)
				waiting = waiting || e.done != nil
				continue
			default:
			}
			if waiting {
				break more // a call waits for its record: insert now
			}
			select {
			case e, ok := <-a.queue:
				if !ok {
					break more
				}
				batch = append(batch, e)
				waiting = waiting || e.done != nil
			case <-linger.C:
				break more
			}
		}
		linger.Stop()
		err := a.insert(batch)
		for _, e := range batch {
			if e.done != nil {
				e.done <- err
			}
		}
	}
}

// insert stores batch in one COPY, or, when the store refuses it, in the
// fallback file. The error is nil when the records are stored somewhere.
func (a *Audit) insert(batch []*auditEntry) error {
	rows := make([][]any, 0, len(batch))
	for _, e := range batch {
		b, err := json.Marshal(e.rec)
		if err != nil {
			continue
		}
		r := e.rec
		caller := r.Client
		if r.Caller != "" {
			caller = r.Caller // the authenticated caller's name
		}
		rows = append(rows, []any{r.Time, a.s.host, caller, r.Tool, r.Decision, r.Outcome, string(b)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), insertTimeout)
	defer cancel()
	_, err := a.s.pool.CopyFrom(ctx, pgx.Identifier{"switchboard_audit"},
		[]string{"time", "host", "caller", "tool", "decision", "outcome", "record"}, pgx.CopyFromRows(rows))
	if err == nil {
		return nil
	}
	err = fmt.Errorf("sharedstore: %d audit records not inserted: %w", len(batch), err)
	if a.fallback != nil {
		var ferr error
		for _, e := range batch {
			if werr := a.fallback.Write(e.rec); werr != nil && ferr == nil {
				ferr = werr
			}
		}
		if ferr == nil {
			err = fmt.Errorf("%w; they were written to the local audit file instead", err)
			a.report(err)
			return nil
		}
		err = errors.Join(err, ferr)
	}
	a.report(err)
	return err
}

func (a *Audit) report(err error) {
	a.mu.Lock()
	fn := a.errFn
	a.mu.Unlock()
	fn(err)
}

var _ registry.AuditLog = (*Audit)(nil)

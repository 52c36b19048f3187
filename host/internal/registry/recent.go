package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// RecentCalls is how many calls the registry keeps in memory (the newest),
// for a caller's questions about its own calls (RecentCalls, WhyRefused).
const RecentCalls = 1000

// Refusal explains a refused call, recorded when it was refused: which
// guard refused it, the rule and patterns involved, and what would let
// such a call run.
type Refusal struct {
	CallID   string    `json:"call_id"`
	Time     time.Time `json:"time"`
	Tool     string    `json:"tool"`
	Decision string    `json:"decision"`
	// By names the guard that refused: "unknown tool", "access",
	// "arguments", "rule", "saved", "default", "pattern-error",
	// "approval", "person" or "shutting down".
	By string `json:"by"`
	// Rule is the deny rule that matched (By "rule" or "saved").
	Rule string `json:"rule,omitempty"`
	// Patterns are the call's permission patterns no allow rule matched
	// (By "default", "approval" or "person").
	Patterns []string `json:"patterns,omitempty"`
	// Allow says what would let the call run: config lines, an approval.
	Allow []string `json:"allow,omitempty"`
	// Error is the refusal as the caller got it.
	Error string `json:"error"`
}

// recentCall is one kept call: its audit record and, when it was refused,
// the explanation. What each call allocates anew is kept in fixed fields
// (the call id's number, the argument hash's bytes) and the names calls
// share (client, caller, tool) are interned: a ring of a thousand calls
// that each held four small allocations of its own pinned heap pages all
// over what the busy minute had used, some 1 MB that stayed resident after
// the calls ended.
type recentCall struct {
	rec    AuditRecord // CallID and ArgsSHA256 empty when seq and sum hold them
	seq    uint64      // the call id's number, when the id is this log's
	sum    [32]byte    // the argument hash, when hasSum
	hasSum bool
	why    *Refusal
}

// record returns the kept audit record whole.
func (c *recentCall) record(l *recentLog) AuditRecord {
	rec := c.rec
	if c.seq != 0 {
		rec.CallID = l.format(c.seq)
	}
	if c.hasSum {
		rec.ArgsSHA256 = hex.EncodeToString(c.sum[:])
	}
	return rec
}

// recentLog is a ring of the newest calls.
type recentLog struct {
	mu     sync.Mutex
	ring   []recentCall
	next   int
	full   bool
	names  map[string]string // interned client, caller and tool names
	ids    atomic.Uint64
	stamp  string // this registry's part of its call ids
	prefix string // "c" + stamp + "-"
}

// maxInterned bounds the interned names; past it the table starts again
// (a host with more distinct callers or tools than this still works, it
// only keeps more copies).
const maxInterned = 512

// maxInternedLen is the longest name interned.
const maxInternedLen = 128

func newRecentLog() *recentLog {
	// The ring grows to RecentCalls as calls come: made whole at start,
	// its quarter megabyte was a tenth of an idle host's start-up.
	stamp := strconv.FormatInt(time.Now().UnixNano()%1e6, 36)
	return &recentLog{stamp: stamp, prefix: "c" + stamp + "-"}
}

// id returns a new call id, unique in this registry.
func (l *recentLog) id() string {
	return l.format(l.ids.Add(1))
}

func (l *recentLog) format(seq uint64) string {
	return l.prefix + strconv.FormatUint(seq, 10)
}

// intern returns the kept copy of s (of a short s: a long name, such as
// an unknown tool's that a client made up, is kept as it is). Called with
// l.mu held.
func (l *recentLog) intern(s string) string {
	if s == "" || len(s) > maxInternedLen {
		return s
	}
	if k, ok := l.names[s]; ok {
		return k
	}
	if l.names == nil || len(l.names) >= maxInterned {
		l.names = make(map[string]string)
	}
	s = strings.Clone(s)
	l.names[s] = s
	return s
}

func (l *recentLog) add(rec AuditRecord, why *Refusal) {
	c := recentCall{rec: rec, why: why}
	if n, ok := strings.CutPrefix(rec.CallID, l.prefix); ok && n != "" && n[0] != '0' {
		if seq, err := strconv.ParseUint(n, 10, 64); err == nil {
			c.seq, c.rec.CallID = seq, ""
		}
	}
	if len(rec.ArgsSHA256) == 2*sha256.Size && strings.IndexFunc(rec.ArgsSHA256, func(r rune) bool { return r >= 'A' && r <= 'F' }) < 0 {
		if _, err := hex.Decode(c.sum[:], []byte(rec.ArgsSHA256)); err == nil {
			c.hasSum, c.rec.ArgsSHA256 = true, ""
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c.rec.Client, c.rec.Caller, c.rec.Tool = l.intern(rec.Client), l.intern(rec.Caller), l.intern(rec.Tool)
	if len(l.ring) < RecentCalls {
		l.ring = append(l.ring, c)
	} else {
		l.ring[l.next] = c
	}
	l.next = (l.next + 1) % RecentCalls
	if l.next == 0 {
		l.full = true
	}
}

// each calls fn on the kept calls, newest first, until it returns false.
func (l *recentLog) each(fn func(c *recentCall) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.next
	if l.full {
		n = len(l.ring)
	}
	for i := 0; i < n; i++ {
		j := (l.next - 1 - i + len(l.ring)) % len(l.ring)
		if !fn(&l.ring[j]) {
			return
		}
	}
}

// ErrNoSuchRefusal means WhyRefused found no refused call of the caller.
var ErrNoSuchRefusal = errors.New("registry: no such refused call")

// RecentCalls returns the audit records of client's newest calls (at most
// limit), newest first: calls the registry routed or refused since the host
// started, never another client's.
func (r *Registry) RecentCalls(client string, limit int) []AuditRecord {
	out := []AuditRecord{}
	if limit <= 0 {
		return out
	}
	r.recent.each(func(c *recentCall) bool {
		if c.rec.Client == client {
			out = append(out, c.record(r.recent))
		}
		return len(out) < limit
	})
	return out
}

// WhyRefused explains client's refused call callID, or its most recent
// refusal when callID is "". An error wraps ErrNoSuchRefusal.
func (r *Registry) WhyRefused(client, callID string) (*Refusal, error) {
	var found *Refusal
	var notRefused bool
	r.recent.each(func(c *recentCall) bool {
		if c.rec.Client != client || (callID != "" && c.record(r.recent).CallID != callID) {
			return true
		}
		if c.why == nil {
			if callID == "" {
				return true // not a refusal: look further back
			}
			notRefused = true
			return false
		}
		found = c.why
		return false
	})
	switch {
	case found != nil:
		cp := *found
		return &cp, nil
	case notRefused:
		return nil, fmt.Errorf("%w: call %s was not refused", ErrNoSuchRefusal, callID)
	case callID != "":
		return nil, fmt.Errorf("%w: no call %s of yours among the last %d calls (recent_calls lists their ids)", ErrNoSuchRefusal, callID, RecentCalls)
	}
	return nil, fmt.Errorf("%w: none of your last calls was refused", ErrNoSuchRefusal)
}

// explain records why a call was refused and what would allow it. d is
// the policy's decision (zero when the call was refused before it).
func explain(pol rules, t Tool, d Decision, rec *AuditRecord) *Refusal {
	why := &Refusal{CallID: rec.CallID, Time: rec.Time, Tool: rec.Tool, Decision: rec.Decision, Error: rec.Error}
	src := pol.source
	allowLines := func(pending []Pending) {
		for _, p := range pending {
			why.Patterns = append(why.Patterns, p.String())
			if p.Unreadable != "" {
				why.Allow = append(why.Allow, fmt.Sprintf("no allow rule can approve %s: the server could not read what the call would do; rewrite the call so it can", p))
				continue
			}
			why.Allow = append(why.Allow, fmt.Sprintf("permissions { allow = [%q] } in %s", p.Rule, src))
		}
	}
	switch {
	case rec.Decision == "refused":
		why.By = "shutting down"
		why.Allow = []string{"nothing now: the host is shutting down; call again once it runs"}
	case rec.Decision == "unknown":
		why.By = "unknown tool"
		why.Allow = []string{"a tool name that tools/list shows (the server may be down: the servers tool says)"}
	case rec.Decision == "invalid" && t.Entry != nil && !pol.visible(t):
		why.By = "access"
		why.Allow = []string{fmt.Sprintf("permissions { access = \"write\" } in %s (the host is read-only)", src)}
	case rec.Decision == "invalid":
		why.By = "arguments"
		why.Allow = []string{"arguments that match the tool's input schema (the error says what does not)"}
	case d.Reason == ByPatternError:
		why.By = "pattern-error"
		why.Allow = []string{"arguments the server can judge: no rule can allow a call whose effect the server cannot say"}
	case d.Verdict == Deny && d.Reason == ByRule:
		why.By, why.Rule = "rule", d.Rule
		why.Allow = []string{fmt.Sprintf("removing or narrowing the deny rule %q in the permissions block of %s (a deny rule wins over every allow rule)", d.Rule, src)}
	case d.Verdict == Deny && d.Reason == BySaved:
		why.By, why.Rule = "saved", d.Rule
		why.Allow = []string{fmt.Sprintf("removing %q from the saved \"always deny\" answers (permissions.json in data_dir)", d.Rule)}
	case d.Verdict == Deny:
		why.By = "default"
		allowLines(d.Pending)
	case rec.Decision == "deny":
		why.By = "person"
		allowLines(d.Pending)
		why.Allow = append(why.Allow, "a person's yes when the call is asked about again")
	default: // Ask, unanswered
		why.By = "approval"
		allowLines(d.Pending)
		why.Allow = append(why.Allow, "a person's approval when asked (a client that supports elicitation, or `switchboard call` on a terminal)")
	}
	return why
}

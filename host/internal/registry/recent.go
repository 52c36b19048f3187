package registry

import (
	"errors"
	"fmt"
	"strconv"
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
// the explanation.
type recentCall struct {
	rec AuditRecord
	why *Refusal
}

// recentLog is a ring of the newest calls.
type recentLog struct {
	mu    sync.Mutex
	ring  []recentCall
	next  int
	full  bool
	ids   atomic.Uint64
	stamp string // this registry's prefix for call ids
}

func newRecentLog() *recentLog {
	// The ring grows to RecentCalls as calls come: made whole at start,
	// its quarter megabyte was a tenth of an idle host's start-up.
	return &recentLog{stamp: strconv.FormatInt(time.Now().UnixNano()%1e6, 36)}
}

// id returns a new call id, unique in this registry.
func (l *recentLog) id() string {
	return "c" + l.stamp + "-" + strconv.FormatUint(l.ids.Add(1), 10)
}

func (l *recentLog) add(rec AuditRecord, why *Refusal) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := (recentCall{rec: rec, why: why}); len(l.ring) < RecentCalls {
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
func (l *recentLog) each(fn func(c recentCall) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.next
	if l.full {
		n = len(l.ring)
	}
	for i := 0; i < n; i++ {
		j := (l.next - 1 - i + len(l.ring)) % len(l.ring)
		if !fn(l.ring[j]) {
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
	r.recent.each(func(c recentCall) bool {
		if c.rec.Client == client {
			out = append(out, c.rec)
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
	r.recent.each(func(c recentCall) bool {
		if c.rec.Client != client || (callID != "" && c.rec.CallID != callID) {
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

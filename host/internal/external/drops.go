package external

import (
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// dropReport logs what a server's messages lost at most once a second,
// with how many were dropped since the line before: one warning per drop
// let a server write the host's log as fast as it sent (red team: 300,000
// notifications, 45 MB of log in 4 seconds).
type dropReport struct {
	mu   sync.Mutex
	last time.Time
	n    int
	now  func() time.Time // nil: time.Now
}

// dropped counts one drop and logs msg (with args and the count) unless a
// line was logged less than a second ago.
func (d *dropReport) dropped(log hclog.Logger, msg string, args ...any) {
	now := time.Now
	if d.now != nil {
		now = d.now
	}
	d.mu.Lock()
	d.n++
	t := now()
	if !d.last.IsZero() && t.Sub(d.last) < time.Second {
		d.mu.Unlock()
		return
	}
	n := d.n
	d.n, d.last = 0, t
	d.mu.Unlock()
	log.Warn(msg, append(args, "dropped", n)...)
}

// Package workpool runs functions on goroutines that are kept for reuse,
// the most recently idle first.
//
// A new goroutine starts with a small stack and grows it (copying it each
// time) when a call decodes JSON or protobuf; a goroutine that has just
// served a call already has the stack the next one needs. Reusing the
// warmest one first keeps that true for all but the few calls after a
// garbage collection has shrunk an idle stack.
//
// Host plumbing, not a plugin author's API: this package belongs to the
// wire protocol and launch core that the SDK and the host share (see
// package [github.com/switchboard-mcp/switchboard/sdk/protocol]). It is
// exported only because the host is another module; its Go API may change
// in any release, and the only compatibility promise is the protocol
// version. Plugins use package sdk and sdktest.
package workpool

import (
	"sync"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/ablate"
)

// Pool is a set of reusable goroutines. The zero value is not ready; use
// New. A Pool is safe for concurrent use.
type Pool struct {
	mu     sync.Mutex
	idle   []chan func()
	max    int
	closed bool
}

// New returns a Pool that keeps at most maxIdle goroutines waiting for
// work; any number may run at once.
func New(maxIdle int) *Pool { return &Pool{max: maxIdle} }

// Go runs fn on an idle goroutine of the pool, or on a new one.
func (p *Pool) Go(fn func()) {
	if ablate.Off(ablate.WorkPool) {
		go fn()
		return
	}
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		c <- fn
		return
	}
	p.mu.Unlock()
	c := make(chan func(), 1)
	c <- fn
	go p.work(c)
}

func (p *Pool) work(c chan func()) {
	for fn := range c {
		fn()
		p.mu.Lock()
		if p.closed || len(p.idle) >= p.max {
			p.mu.Unlock()
			return
		}
		p.idle = append(p.idle, c)
		p.mu.Unlock()
	}
}

// Close ends the idle goroutines; busy ones end when their function
// returns. Go may still be called after Close: it then starts goroutines
// that end with their function.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, c := range p.idle {
		close(c)
	}
	p.idle = nil
}

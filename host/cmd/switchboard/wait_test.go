package main

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// The tests here wait for events, never for a fixed time: a channel, a
// notification, a log line, or a condition polled until a deadline.

// eventually polls cond, at growing intervals (5 ms up to 100 ms), until
// it holds or d has passed, and reports whether it held. cond runs on the
// caller's goroutine, so it may call t.Fatal.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
	}
}

// waitFor fails the test unless cond holds within 15 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !eventually(15*time.Second, cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// progressLog records the progress notifications a client receives, by
// token, so that a test can wait for a call to reach its tool (the
// fixture's sleep tool reports "sleeping" as it starts).
type progressLog struct {
	mu       sync.Mutex
	messages map[string][]string
}

// watchProgress starts recording c's progress notifications.
func watchProgress(c *client.Client) *progressLog {
	p := &progressLog{messages: map[string][]string{}}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != string(mcp.MethodNotificationProgress) {
			return
		}
		tok := fmt.Sprint(n.Params.AdditionalFields["progressToken"])
		p.mu.Lock()
		p.messages[tok] = append(p.messages[tok], fmt.Sprint(n.Params.AdditionalFields["message"]))
		p.mu.Unlock()
	})
	return p
}

// count is the number of notifications seen for token.
func (p *progressLog) count(token string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.messages[token])
}

// waitStarted fails the test unless a notification for token arrives
// within 15 s.
func (p *progressLog) waitStarted(t *testing.T, token string) {
	t.Helper()
	waitFor(t, "progress from the call with token "+token, func() bool { return p.count(token) > 0 })
}

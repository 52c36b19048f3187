package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/switchboard-mcp/switchboard/host/internal/approvals"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/host/internal/termsafe"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// callView shows a running call's progress and log messages: on a terminal
// as a live line (a bar when the total is known, else a spinner) with the
// log messages printed above it; with --json as JSON lines on stdout before
// the result; otherwise not at all.
type callView struct {
	mu      sync.Mutex
	tool    string
	started time.Time
	// live: a terminal on w.
	live  bool
	w     io.Writer
	width int
	// jsonOut: events as JSON lines on w.
	jsonOut bool

	last   toolcall.Progress
	have   bool
	spin   int
	shown  bool // a live line is on the screen
	paused bool // a question to the person is on the screen
	stop   chan struct{}
	done   chan struct{}
}

var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// newCallView returns the view for a call of tool: live when stderr is a
// terminal, JSON lines on stdout with --json.
func (a *app) newCallView(tool string) *callView {
	v := &callView{tool: tool, started: time.Now()}
	switch {
	case a.jsonOut:
		v.jsonOut, v.w = true, a.stdout
	default:
		if f, ok := a.stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			v.live, v.w, v.width = true, f, 80
			if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 20 {
				v.width = w
			}
			v.stop, v.done = make(chan struct{}), make(chan struct{})
			go v.tick()
		}
	}
	return v
}

// tick redraws the live line, so the spinner and the clock move while the
// tool says nothing.
func (v *callView) tick() {
	defer close(v.done)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-v.stop:
			return
		case <-t.C:
			v.mu.Lock()
			if time.Since(v.started) > 300*time.Millisecond || v.have {
				v.spin++
				v.drawLocked()
			}
			v.mu.Unlock()
		}
	}
}

// Progress receives the call's progress reports.
func (v *callView) Progress(p toolcall.Progress) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case v.jsonOut:
		v.emitLocked(map[string]any{"type": "progress", "progress": p.Progress, "total": p.Total, "message": p.Message})
	case v.live:
		v.last, v.have = p, true
		v.drawLocked()
	}
}

// Log receives the call's log messages.
func (v *callView) Log(l toolcall.Log) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case v.jsonOut:
		ev := map[string]any{"type": "log", "level": l.Level, "message": l.Message}
		if l.Logger != "" {
			ev["logger"] = l.Logger
		}
		if len(l.Fields) > 0 {
			ev["fields"] = l.Fields
		}
		v.emitLocked(ev)
	case v.live:
		v.clearLocked()
		line := fmt.Sprintf("%-7s %s", l.Level, l.Message)
		if len(l.Fields) > 0 {
			var fields map[string]any
			if json.Unmarshal(l.Fields, &fields) == nil {
				for _, k := range slices.Sorted(maps.Keys(fields)) {
					line += fmt.Sprintf(" %s=%v", k, fields[k])
				}
			}
		}
		fmt.Fprintln(v.w, termsafe.Text(line))
		v.drawLocked()
	}
}

// Close takes the live line off the screen; call it before printing the
// result.
func (v *callView) Close() {
	if v.live {
		close(v.stop)
		<-v.done
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.clearLocked()
}

func (v *callView) emitLocked(ev map[string]any) {
	b, err := json.Marshal(ev)
	if err == nil {
		fmt.Fprintf(v.w, "%s\n", b)
	}
}

func (v *callView) clearLocked() {
	if v.shown {
		fmt.Fprint(v.w, "\r\033[K")
		v.shown = false
	}
}

// pausingAsker keeps the live line off the screen while the person is
// asked to approve the call.
type pausingAsker struct {
	approvals.Asker
	v *callView
}

func (p pausingAsker) Ask(ctx context.Context, a registry.Approval) (approvals.Answer, error) {
	p.v.mu.Lock()
	p.v.paused = true
	p.v.clearLocked()
	p.v.mu.Unlock()
	defer func() {
		p.v.mu.Lock()
		p.v.paused = false
		p.v.mu.Unlock()
	}()
	return p.Asker.Ask(ctx, a)
}

// drawLocked writes the live line: spinner or bar, figures, message, time.
func (v *callView) drawLocked() {
	if !v.live || v.paused {
		return
	}
	elapsed := time.Since(v.started).Truncate(100 * time.Millisecond)
	var b strings.Builder
	b.WriteString(spinner[v.spin%len(spinner)] + " " + v.tool + " ")
	if v.have && v.last.Total > 0 {
		frac := min(max(v.last.Progress/v.last.Total, 0), 1)
		const width = 20
		n := int(frac * width)
		fmt.Fprintf(&b, "[%s%s] %s/%s ", strings.Repeat("#", n), strings.Repeat(" ", width-n), num(v.last.Progress), num(v.last.Total))
	} else if v.have {
		fmt.Fprintf(&b, "%s ", num(v.last.Progress))
	}
	if v.have && v.last.Message != "" {
		b.WriteString(termsafe.Escape(oneLine(v.last.Message)) + " ")
	}
	fmt.Fprintf(&b, "(%s)", elapsed)
	line := []rune(b.String())
	if len(line) > v.width-1 {
		line = append(line[:v.width-2], '…')
	}
	fmt.Fprint(v.w, "\r\033[K"+string(line))
	v.shown = true
}

// num prints a progress figure without a needless fraction.
func num(f float64) string {
	if f == float64(int64(f)) {
		return fmt.Sprint(int64(f))
	}
	return fmt.Sprintf("%.1f", f)
}

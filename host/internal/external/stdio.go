package external

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
)

// MaxLineBytes is the longest line a stdio server may write: one JSON-RPC
// message, as large as the host takes from its own clients. A longer line
// is cut there and the rest of it dropped, and the host says so in its
// log; the call it answered fails at once (lineCap), or, where the line's
// head does not show which call it answered, at its call_timeout.
const MaxLineBytes = 16 << 20

// startStdio starts a stdio server's process on pipes of the host's own
// and returns the connection that speaks MCP over them (stdioConn). mcp-go's own stdio
// transport reads the server's stdout a whole line at a time without a
// bound, so a server that wrote a long line without a newline made the
// host allocate about three times its length (make chaos); here the
// stdout goes through lineCap first.
func (s *Server) startStdio() (*stdioConn, error) {
	cmd, err := s.command(context.Background(), s.spec.Command, nil, s.spec.Args)
	if err != nil {
		return nil, err
	}
	// Pipes of our own, not StdinPipe and StdoutPipe: cmd.Wait (the
	// reaper below) would close StdoutPipe's end with output still
	// unread, and a start through the sandbox's spawner passes files.
	var ends []*os.File // the child's, closed once it has them
	closeAll := func(fs ...*os.File) {
		for _, f := range fs {
			_ = f.Close()
		}
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, err
	}
	ends = append(ends, inR, outW)
	cmd.Stdin, cmd.Stdout = inR, outW
	// Its stderr goes to the log with a plugin's limits (rate, line length).
	logw := launcher.LimitedLogger(s.log).StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug})
	if ps, ok := s.conf.(launcher.ProcessStarter); ok {
		// Confined in namespaces: the sandbox's spawner starts it, as it
		// starts plugins (the host does not fork itself into new
		// namespaces, which copies its page tables).
		errR, errW, err := os.Pipe()
		if err != nil {
			closeAll(inR, inW, outR, outW)
			return nil, err
		}
		cmd.Stderr = errW
		p, err := ps.StartProcess(cmd)
		closeAll(append(ends, errW)...)
		if err != nil {
			closeAll(inW, outR, errR)
			return nil, err
		}
		s.pid = p.Pid()
		go func() {
			// Until every process holding it is gone: all of them end
			// with the sandbox's PID namespace.
			_, _ = io.Copy(logw, errR)
			_ = errR.Close()
		}()
		go func() { _ = p.Wait() }() // the spawner reaps it; watchProcess notices the exit
	} else {
		cmd.Stderr = logw
		// A child of the server that keeps stderr open must not hold the
		// reaper for ever.
		cmd.WaitDelay = 2 * time.Second
		err := cmd.Start()
		closeAll(ends...)
		if err != nil {
			closeAll(inW, outR)
			return nil, err
		}
		s.pid = cmd.Process.Pid
		go func() { _ = cmd.Wait() }() // reaps it; watchProcess notices the exit
	}
	// The pipes are read and written the ordinary way, not quietly
	// (sdk/protocol/quietio): the server holds their other ends, and a
	// process can hold a pipe's lock (splice to a full socket) for as long
	// as it likes; a raw call waiting on it would hold the host's only
	// scheduler slot.
	out := &lineCap{r: outR, max: MaxLineBytes, onCut: func() {
		s.log.Warn(fmt.Sprintf("the server wrote a line of more than %d MB on stdout; the rest of it was dropped (no MCP message is that long)", MaxLineBytes>>20))
	}}
	// Close closes stdin and the stdout pipe, which ends the read.
	return newStdioConn(inW, out, outR, s.log), nil
}

// lineCap passes a stdio server's output on, cutting every line longer
// than max bytes at max (a newline ends what was passed on) and dropping
// the rest of it, so a reader that collects whole lines holds at most max
// bytes of one. A cut line that answered a request (its top-level "id" is
// in its first headKeep bytes, where servers put it) is followed by an
// error answer to that request, so the call fails at once, saying why,
// instead of waiting for its timeout.
type lineCap struct {
	r        io.Reader
	max      int
	n        int    // bytes of the current line passed on
	skipping bool   // in a cut line: drop until its newline
	head     []byte // the current line's first headKeep bytes
	pending  []byte // an error answer to pass on next
	carry    []byte // input read but not yet passed on (after a cut answer)
	onCut    func()
}

// headKeep is how much of each line lineCap keeps to find a cut answer's id.
const headKeep = 1024

func (c *lineCap) Read(p []byte) (int, error) {
	for {
		if len(c.pending) > 0 {
			n := copy(p, c.pending)
			c.pending = c.pending[n:]
			return n, nil
		}
		var n int
		var err error
		if len(c.carry) > 0 {
			n = copy(p, c.carry)
			c.carry = c.carry[n:]
		} else {
			n, err = c.r.Read(p)
		}
		if out := c.filter(p[:n]); out > 0 || err != nil {
			return out, err
		}
	}
}

// filter rewrites p in place, returning how many bytes of it to pass on.
// It writes behind what it has read, so in place is safe.
func (c *lineCap) filter(p []byte) int {
	out, pos := 0, 0
	for pos < len(p) {
		rest := p[pos:]
		nl := bytes.IndexByte(rest, '\n')
		content, next := len(rest), len(rest)
		if nl >= 0 {
			content, next = nl, nl+1
		}
		switch {
		case c.skipping:
		case c.n+content > c.max:
			kept := rest[:c.max-c.n]
			c.keepHead(kept)
			// What follows the cut, before the newline below overwrites
			// its first byte.
			after := rest[len(kept):]
			if topLevelID(c.head) != nil {
				after = bytes.Clone(after)
			}
			out += copy(p[out:], kept)
			p[out] = '\n'
			out++
			c.skipping = true
			if c.onCut != nil {
				c.onCut()
			}
			if id := topLevelID(c.head); id != nil {
				c.pending = fmt.Appendf(c.pending, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"the server's answer is longer than %d MB, more than the host takes in one message; it was dropped"}}`+"\n", id, c.max>>20)
				// The answer goes next, before any line after the cut
				// one: what is left of the input waits.
				c.carry = append(after, c.carry...)
				return out
			}
		default:
			c.keepHead(rest[:content])
			out += copy(p[out:], rest[:next])
			c.n += content
		}
		if nl >= 0 {
			c.n, c.skipping, c.head = 0, false, c.head[:0]
		}
		pos += next
	}
	return out
}

// keepHead adds b to the current line's head, up to headKeep bytes.
func (c *lineCap) keepHead(b []byte) {
	if room := headKeep - len(c.head); room > 0 {
		c.head = append(c.head, b[:min(room, len(b))]...)
	}
}

// topLevelID finds the value of the "id" member of the JSON object that
// b begins (b may end anywhere): a number or a string, as JSON-RPC ids
// are, returned as it was written.
func topLevelID(b []byte) []byte {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case '"':
			end := stringEnd(b, i)
			if end < 0 {
				return nil
			}
			if depth == 1 && string(b[i:end+1]) == `"id"` {
				j := skipSpace(b, end+1)
				if j < len(b) && b[j] == ':' {
					return idValue(b, skipSpace(b, j+1))
				}
			}
			i = end
		}
	}
	return nil
}

// stringEnd returns the index of the quote that ends the JSON string
// starting at b[i], or -1 when b ends first.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return -1
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// idValue returns the JSON string or number at b[i], or nil.
func idValue(b []byte, i int) []byte {
	if i >= len(b) {
		return nil
	}
	if b[i] == '"' {
		end := stringEnd(b, i)
		if end < 0 {
			return nil
		}
		return b[i : end+1]
	}
	j := i
	for j < len(b) && (b[j] == '-' || b[j] == '+' || b[j] == '.' || b[j] == 'e' || b[j] == 'E' || (b[j] >= '0' && b[j] <= '9')) {
		j++
	}
	if j == i || j == len(b) {
		return nil // not a number, or it may go on past the head
	}
	return b[i:j]
}

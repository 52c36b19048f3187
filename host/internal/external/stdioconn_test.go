package external

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// pipeServer is the far end of a stdioConn: what the connection writes
// arrives on in, what the test writes to out is the server's output.
type pipeServer struct {
	conn *stdioConn
	in   *bufio.Reader
	out  io.WriteCloser
}

func newPipeServer(t *testing.T, stdin io.WriteCloser) *pipeServer {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var w io.WriteCloser = inW
	if stdin != nil {
		w = stdin
		_ = inW.Close()
	}
	c := newStdioConn(w, outR, outR, hclog.NewNullLogger())
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		_ = outW.Close()
		_ = inR.Close()
		<-c.done
	})
	return &pipeServer{conn: c, in: bufio.NewReader(inR), out: outW}
}

// next reads the next message the connection wrote.
func (p *pipeServer) next(t *testing.T) map[string]any {
	t.Helper()
	line, err := p.in.ReadBytes('\n')
	if err != nil {
		t.Fatalf("reading what the connection wrote: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("the connection wrote %q: %v", line, err)
	}
	return m
}

func (p *pipeServer) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.out, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

// A call is written as one JSON-RPC line (its arguments compacted onto
// it), and its answer, found by id among others, is handed over as the
// server wrote it; notifications and garbage between them change nothing.
func TestStdioConnCall(t *testing.T) {
	p := newPipeServer(t, nil)
	var notes atomic.Int32
	p.conn.SetNotificationHandler(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" {
			notes.Add(1)
		}
	})
	answers, forget, err := p.conn.startCall("sb-7", "a \"quoted\" tool", []byte("{\n  \"text\": \"hi\"\n}"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer forget()
	m := p.next(t)
	params, _ := m["params"].(map[string]any)
	args, _ := params["arguments"].(map[string]any)
	meta, _ := params["_meta"].(map[string]any)
	if m["id"] != "sb-7" || m["method"] != "tools/call" || params["name"] != `a "quoted" tool` || args["text"] != "hi" || meta["progressToken"] != "sb-7" {
		t.Fatalf("request written = %v", m)
	}
	p.send(t, `not json at all`)
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"sb-7","progress":1}}`)
	p.send(t, `{"jsonrpc":"2.0","id":"sb-6","result":{"content":[]}}`) // nobody waits for it
	const result = `{"content":[{"type":"text","text":"hi","annotations":{"priority":1}}],"_meta":{"x":1}}`
	p.send(t, `{"jsonrpc":"2.0","id":"sb-7","result":`+result+`}`)
	select {
	case a := <-answers:
		if a.err != nil || a.rpcErr != nil || string(a.result) != result {
			t.Errorf("answer = %s, %v, %v; want the result as the server wrote it", a.result, a.rpcErr, a.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
	}
	if notes.Load() != 1 {
		t.Errorf("%d progress notifications delivered, want 1", notes.Load())
	}
	// An error answer, with a numeric id (mcp-go's own requests).
	done := make(chan error, 1)
	go func() {
		_, err := p.conn.SendRequest(context.Background(), transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(int64(3)), Method: "ping"})
		done <- err
	}()
	if m := p.next(t); m["method"] != "ping" || m["id"] != float64(3) {
		t.Fatalf("ping written = %v", m)
	}
	p.send(t, `{"jsonrpc":"2.0","id":3,"result":{}}`)
	if err := <-done; err != nil {
		t.Errorf("ping: %v", err)
	}
}

// A request of the server's is answered by the client's handler; without
// one it gets method not found.
func TestStdioConnServerRequests(t *testing.T) {
	p := newPipeServer(t, nil)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"roots/list"}`)
	if m := p.next(t); m["id"] != float64(1) || m["error"] == nil {
		t.Fatalf("answer without a handler = %v, want an error", m)
	}
	p.conn.SetRequestHandler(func(_ context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		return transport.NewJSONRPCResultResponse(req.ID, json.RawMessage(`{"roots":[]}`)), nil
	})
	p.send(t, `{"jsonrpc":"2.0","id":"q","method":"roots/list"}`)
	if m := p.next(t); m["id"] != "q" || m["result"] == nil {
		t.Fatalf("answer = %v, want the handler's result", m)
	}
}

// When the server's output ends, every request waiting gets an error and
// later ones are refused at once.
func TestStdioConnEnds(t *testing.T) {
	p := newPipeServer(t, nil)
	answers, forget, err := p.conn.startCall("sb-1", "echo", []byte(`{}`), false)
	if err != nil {
		t.Fatal(err)
	}
	defer forget()
	p.next(t)
	_ = p.out.Close()
	select {
	case a := <-answers:
		if !errors.Is(a.err, transport.ErrTransportClosed) {
			t.Errorf("answer after the end = %v, want ErrTransportClosed", a.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call waits for ever after the server's output ended")
	}
	if _, _, err := p.conn.startCall("sb-2", "echo", []byte(`{}`), false); !errors.Is(err, transport.ErrTransportClosed) {
		t.Errorf("a call after the end: %v, want ErrTransportClosed", err)
	}
}

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }
func (failingWriter) Close() error              { return nil }

// A failed write fails the call at once, not at its timeout.
func TestStdioConnWriteFails(t *testing.T) {
	p := newPipeServer(t, failingWriter{})
	if _, _, err := p.conn.startCall("sb-1", "echo", []byte(`{}`), false); err == nil || !strings.Contains(err.Error(), "broken pipe") {
		t.Errorf("call on a broken pipe: %v, want its error", err)
	}
	if _, _, err := p.conn.startCall("sb-2", "echo", []byte(`not json`), false); err == nil {
		t.Error("call with arguments that are not JSON: no error")
	}
}

// writeCounter counts writes and keeps what was written.
type writeCounter struct {
	mu     sync.Mutex
	writes int
	data   strings.Builder
}

func (w *writeCounter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	w.data.Write(b)
	return len(b), nil
}
func (w *writeCounter) Close() error { return nil }

// Messages written together go out in fewer writes than messages, each
// whole, and each goroutine's in the order it wrote them.
func TestStdioConnGroupsWrites(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // as in the host
	w := &writeCounter{}
	p := newPipeServer(t, w)
	const writers, each = 32, 20
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			<-start
			for i := range each {
				if err := p.conn.write(fmt.Appendf(nil, `{"g":%d,"i":%d}`+"\n", g, i)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	next := make([]int, writers)
	lines := strings.Split(strings.TrimSuffix(w.data.String(), "\n"), "\n")
	for _, line := range lines {
		var m struct{ G, I int }
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q is not a whole message: %v", line, err)
		}
		if m.I != next[m.G] {
			t.Fatalf("writer %d's message %d came when %d was due", m.G, m.I, next[m.G])
		}
		next[m.G]++
	}
	if len(lines) != writers*each {
		t.Errorf("%d messages written, want %d", len(lines), writers*each)
	}
	if w.writes > writers*each/4 {
		t.Errorf("%d writes for %d messages written together, want them grouped", w.writes, writers*each)
	}
}

// FuzzStdioConnDispatch: whatever a server writes, the connection neither
// panics nor answers a call with another's answer.
func FuzzStdioConnDispatch(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":"sb-1","result":{"content":[]}}`,
		`{"jsonrpc":"2.0","id":"sb-1","error":{"code":-32602,"message":"bad"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":"sb-\"1","result":{}}`,
		`{"jsonrpc":"2.0","id":null,"result":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"sb-1","progress":1}}`,
		`{"jsonrpc":"2.0","id":"x","method":"roots/list"}`,
		`{"id":[1],"method":{}}`,
		`not json`,
		``,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		c := newStdioConn(nopWriteCloser{}, strings.NewReader(""), nopWriteCloser{}, hclog.NewNullLogger())
		c.SetNotificationHandler(func(mcp.JSONRPCNotification) {})
		mine, ok := c.expect("string:sb-1")
		other, ok2 := c.expect("string:sb-2")
		if !ok || !ok2 {
			t.Fatal("expect refused on a new connection")
		}
		c.dispatch([]byte(line))
		for key, ch := range map[string]chan answer{"string:sb-1": mine, "string:sb-2": other} {
			select {
			case <-ch:
				var m struct {
					ID json.RawMessage `json:"id"`
				}
				if json.Unmarshal([]byte(line), &m) != nil {
					t.Fatalf("%q is not JSON, yet answered %s", line, key)
				}
				if got, ok := answerKey(m.ID); !ok || got != key {
					t.Fatalf("%q (id %s) answered %s", line, m.ID, key)
				}
			default:
			}
		}
	})
}

type nopWriteCloser struct{}

func (nopWriteCloser) Write(b []byte) (int, error) { return len(b), nil }
func (nopWriteCloser) Close() error                { return nil }

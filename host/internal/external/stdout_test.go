package external

import (
	"context"
	"io"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

// allocated is how many bytes this process has allocated so far.
func allocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// A stdio server that writes a line far longer than any message (128 MB of
// garbage, found by make chaos) costs the host no more than the longest
// message it keeps (mcp-go's client read the whole line into memory, so a
// server could make the host allocate without bound); the server's later
// answers still arrive.
func TestStdioServerGarbageLineIsNotBuffered(t *testing.T) {
	s, err := Connect(t.Context(), Spec{Name: "ext", Command: fixtures.Build(t).MCPServer, Timeout: 30 * time.Second}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(t.Context()) })

	const garbageMB = 128
	before := allocated()
	res, err := s.Call(t.Context(), "fault", []byte(`{"kind":"stdout","mb":128}`), nil)
	if err != nil || res.IsError {
		t.Fatalf("fault: %v, %v", res, err)
	}
	if got := allocated() - before; got > garbageMB<<20/2 {
		t.Errorf("reading a %d MB line of garbage allocated %d MB in the host; want well under the line's size (it is dropped, not kept)", garbageMB, got>>20)
	}
	res, err = s.Call(t.Context(), "echo", []byte(`{"text":"still here"}`), nil)
	if err != nil || res.IsError || !strings.Contains(res.Content[0].Text, "still here") {
		t.Errorf("echo after the garbage: %v, %v", res, err)
	}
}

// lineCap cuts a line at max bytes and drops the rest of it, however the
// reads split the input; shorter lines pass unchanged.
func TestLineCap(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"short lines", "ab\ncd\n", "ab\ncd\n"},
		{"exactly max", "abcd\nxy\n", "abcd\nxy\n"},
		{"one long line", "abcdefgh\nxy\n", "abcd\nxy\n"},
		{"long line without end", "abcdefghij", "abcd\n"},
		{"long lines in a row", "abcdefgh\nijklmnop\nq\n", "abcd\nijkl\nq\n"},
		{"empty lines", "\n\nabcde\n\n", "\n\nabcd\n\n"},
	} {
		for _, split := range []string{"whole", "byte by byte"} {
			t.Run(tc.name+"/"+split, func(t *testing.T) {
				var r io.Reader = strings.NewReader(tc.in)
				if split != "whole" {
					r = iotest.OneByteReader(r)
				}
				cuts := 0
				got, err := io.ReadAll(&lineCap{r: r, max: 4, onCut: func() { cuts++ }})
				if err != nil || string(got) != tc.want {
					t.Errorf("lineCap(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
				}
				if (cuts > 0) != (tc.in != tc.want) {
					t.Errorf("lineCap(%q): %d cuts reported", tc.in, cuts)
				}
			})
		}
	}
}

// A cut line that answered a request is followed by an error answer to
// it (the request's id found in the line's head), so the call fails at
// once instead of waiting for its timeout; a cut line without an id in
// its head is only cut.
func TestLineCapAnswersACutAnswer(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{
			"number id", `{"jsonrpc":"2.0","id":7,"result":"xxxxxxxxxxxxxxxxxxxxxxxxxxxx"}` + "\n" + `{"id":8}` + "\n",
			`{"jsonrpc":"2.0","id":7,"result":"xxxxxx` + "\n" + `{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"the server's answer is longer than 0 MB, more than the host takes in one message; it was dropped"}}` + "\n" + `{"id":8}` + "\n",
		},
		{
			"string id", `{"id":"sb-\"3","result":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}` + "\n",
			`{"id":"sb-\"3","result":"xxxxxxxxxxxxxxx` + "\n" + `{"jsonrpc":"2.0","id":"sb-\"3","error":{"code":-32603,"message":"the server's answer is longer than 0 MB, more than the host takes in one message; it was dropped"}}` + "\n",
		},
		{"no id in the head", strings.Repeat("x", 50) + "\n", strings.Repeat("x", 40) + "\n"},
	} {
		for _, split := range []string{"whole", "byte by byte"} {
			t.Run(tc.name+"/"+split, func(t *testing.T) {
				var r io.Reader = strings.NewReader(tc.in)
				if split != "whole" {
					r = iotest.OneByteReader(r)
				}
				got, err := io.ReadAll(&lineCap{r: r, max: 40})
				if err != nil || string(got) != tc.want {
					t.Errorf("lineCap(%q) =\n%q, %v; want\n%q", tc.in, got, err, tc.want)
				}
			})
		}
	}
}

// topLevelID finds the id member of the object a line begins, not one
// nested in it, nor a string "id" that is a value, and only when all of
// it is in the head.
func TestTopLevelID(t *testing.T) {
	for in, want := range map[string]string{
		`{"jsonrpc":"2.0","id":12,"result":{}}`:     "12",
		`{"result":{"id":1,"x":[{"id":5}]},"id":2}`: "2",
		`{"method":"id","id":"a\"b\\"}`:             `"a\"b\\"`,
		` { "id" : -3.5e2 , "x":1}`:                 "-3.5e2",
		`{"id":12`:                                  "",
		`{"id":"unterminated`:                       "",
		`[{"id":1}]`:                                "",
		`{"result":"{\"id\":9}","id":null}`:         "",
		`{"jsonrpc":"2.0","result":"xxxxxxxxxxxxx`:  "",
	} {
		if got := topLevelID([]byte(in)); string(got) != want || (got == nil) != (want == "") {
			t.Errorf("topLevelID(%s) = %q; want %q", in, got, want)
		}
	}
}

// An answer longer than the host takes (a tool returning 20 MB of text)
// fails its call at once, saying why, and the server goes on answering.
func TestStdioServerHugeAnswerFailsItsCall(t *testing.T) {
	s, err := Connect(t.Context(), Spec{Name: "ext", Command: fixtures.Build(t).MCPServer, Timeout: 30 * time.Second}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(t.Context()) })
	// Far less than a timeout would take: the call ends with the host's
	// own error answer, not with this context.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	res, err := s.Call(ctx, "fault", []byte(`{"kind":"huge","mb":20}`), nil)
	if err == nil || !strings.Contains(err.Error(), "longer than 16 MB") {
		t.Fatalf("a 20 MB answer: %v, %v; want the call to fail saying the answer is longer than 16 MB", res, err)
	}
	res, err = s.Call(t.Context(), "echo", []byte(`{"text":"still here"}`), nil)
	if err != nil || res.IsError || !strings.Contains(res.Content[0].Text, "still here") {
		t.Errorf("echo after the huge answer: %v, %v", res, err)
	}
}

// countingWriter counts what is written to it.
type countingWriter struct{ n atomic.Int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n.Add(int64(len(p))); return len(p), nil }

// A stdio server's stderr flood reaches the host's log with a plugin's
// limits: 16 MB written leave a small part of that in the log, even at
// debug level, where all of it was logged.
func TestStdioServerStderrFloodIsLimited(t *testing.T) {
	out := &countingWriter{}
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: out})
	s, err := Connect(t.Context(), Spec{Name: "ext", Command: fixtures.Build(t).MCPServer, Timeout: 30 * time.Second}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(t.Context()) })
	const floodMB = 16
	if res, err := s.Call(t.Context(), "fault", []byte(`{"kind":"stderr","mb":16}`), nil); err != nil || res.IsError {
		t.Fatalf("fault: %v, %v", res, err)
	}
	// The flood is on its way to the log while the call answers; an echo
	// after it waits for nothing, so compare once the log is still.
	var last int64 = -1
	for deadline := time.Now().Add(30 * time.Second); out.n.Load() != last && time.Now().Before(deadline); {
		last = out.n.Load()
		time.Sleep(500 * time.Millisecond)
	}
	if got := out.n.Load(); got > floodMB<<20/4 {
		t.Errorf("a %d MB stderr flood put %d KB into the host's log; want a small part of it (rate-limited, lines cut)", floodMB, got>>10)
	}
}

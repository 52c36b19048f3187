package external

import (
	"io"
	"runtime/metrics"
	"strings"
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

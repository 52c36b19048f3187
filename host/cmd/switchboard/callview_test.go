package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/creack/pty"
)

func setupChatty(t *testing.T) env {
	t.Helper()
	e := setup(t)
	return setupWith(t, fmt.Sprintf(`
permissions { default = "allow" }
plugin "fz" {
  path = %q
  env  = { FIXTURE_FEATURES = "1" }
}`, e.bins.TestPlugin))
}

// TestCallShowsProgressOnATerminal: on a pseudo-terminal, `switchboard
// call` draws the call's progress as a live bar with its message and prints
// the server's log messages; off a terminal it prints only the result.
func TestCallShowsProgressOnATerminal(t *testing.T) {
	e := setupChatty(t)
	for _, tc := range []struct {
		tool, args string
		want       []string
	}{
		{"fx.progress", `{"steps":5}`, []string{"fx.progress [", "step 3", "5/5", "done 5 steps"}},
		{"fz.chatty", `{}`, []string{"warning a warning line k=v", "said it"}},
	} {
		cmd := exec.Command(e.bins.Switchboard, "call", "--config", e.config, tc.tool, tc.args)
		cmd.Env = append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=off")
		tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 100})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		_, _ = io.Copy(&out, tty) // until the process closes the terminal (EIO)
		_ = cmd.Wait()
		tty.Close()
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("call %s on a terminal lacks %q:\n%q", tc.tool, w, out.String())
			}
		}
		if !strings.Contains(out.String(), "\r\033[K") {
			t.Errorf("call %s on a terminal drew no live line:\n%q", tc.tool, out.String())
		}

		// Off a terminal: the result and nothing else.
		stdout, _, code := run(t, e, "call", "--config", e.config, tc.tool, tc.args)
		last := tc.want[len(tc.want)-1]
		if code != 0 || strings.TrimSpace(stdout) != last {
			t.Errorf("call %s off a terminal = %d %q, want only %q", tc.tool, code, stdout, last)
		}
	}
}

// TestCallJSONStreamsEvents: `call --json` writes each progress and log
// event as a JSON line before the result.
func TestCallJSONStreamsEvents(t *testing.T) {
	e := setupChatty(t)
	stdout, errOut, code := run(t, e, "call", "--json", "--config", e.config, "fx.progress", `{"steps":3}`)
	if code != 0 {
		t.Fatalf("call --json = %d %s", code, errOut)
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	var events []map[string]any
	for {
		var v map[string]any
		if err := dec.Decode(&v); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("call --json output is not a stream of JSON values: %v\n%s", err, stdout)
		}
		events = append(events, v)
	}
	if len(events) != 4 {
		t.Fatalf("call --json gave %d values, want 3 progress events and the result:\n%s", len(events), stdout)
	}
	for i, ev := range events[:3] {
		if ev["type"] != "progress" || ev["progress"] != float64(i+1) || ev["total"] != float64(3) || ev["message"] != fmt.Sprintf("step %d", i+1) {
			t.Errorf("event %d = %v", i, ev)
		}
	}
	if _, ok := events[3]["content"]; !ok {
		t.Errorf("last value is not the result: %v", events[3])
	}
	// Each event is one line.
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for i := 0; i < 3 && sc.Scan(); i++ {
		if !json.Valid(sc.Bytes()) {
			t.Errorf("event line %d is not a JSON value on its own: %q", i, sc.Text())
		}
	}

	stdout, _, code = run(t, e, "call", "--json", "--config", e.config, "fz.chatty", `{}`)
	if code != 0 || !strings.Contains(stdout, `{"fields":{"k":"v"},"level":"warning","message":"a warning line","type":"log"}`) {
		t.Errorf("call --json fz.chatty = %d:\n%s", code, stdout)
	}
}

// TestCallEscapesServerTextOnATerminal: a tool's result that carries
// terminal escape sequences (here one that retitles the window and one
// that clears the screen) and a right-to-left override reaches a person's
// terminal escaped, so it cannot rewrite what was printed; piped, the
// result is the tool's bytes unchanged.
func TestCallEscapesServerTextOnATerminal(t *testing.T) {
	e := setup(t)
	const evil = "before\x1b]0;pwned\x07\x1b[2Jafter \u202egnp.exe\tcol"
	args, _ := json.Marshal(map[string]string{"text": evil})

	cmd := exec.Command(e.bins.Switchboard, "call", "--config", e.config, "fx.echo", string(args))
	cmd.Env = append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=off")
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	_, _ = io.Copy(&out, tty)
	_ = cmd.Wait()
	tty.Close()
	got := out.String()
	for _, raw := range []string{"\x1b]0;", "\x07", "\x1b[2J", "\u202e"} {
		if strings.Contains(got, raw) {
			t.Errorf("call on a terminal printed %q raw:\n%q", raw, got)
		}
	}
	if want := `before\u001b]0;pwned\u0007\u001b[2Jafter \u202egnp.exe` + "\tcol"; !strings.Contains(got, want) {
		t.Errorf("call on a terminal = %q, want it to show %q", got, want)
	}

	stdout, errOut, code := run(t, e, "call", "--config", e.config, "fx.echo", string(args))
	if code != 0 || stdout != evil+"\n" {
		t.Errorf("call piped = %d %q (%s), want the tool's bytes %q", code, stdout, errOut, evil+"\n")
	}
}

package approvals

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
)

// Fixed is an Asker whose answer is given in advance (`switchboard call
// --yes` is Fixed(AllowOnce)).
type Fixed Answer

// Ask returns the fixed answer.
func (f Fixed) Ask(context.Context, registry.Approval) (Answer, error) { return Answer(f), nil }

// Nobody is the Asker for callers that cannot ask anyone: every call that
// needs approval is refused with the rule that would allow it.
type Nobody struct{}

// Ask returns ErrCannotAsk.
func (Nobody) Ask(context.Context, registry.Approval) (Answer, error) { return 0, ErrCannotAsk }

// Terminal asks on a terminal: the question goes to out, one line of
// answer is read from in ("y" once, "a" always, "n" no, "d" never;
// anything else, or nothing, is no). The caller checks that in is a
// terminal. The read does not end with ctx: a person at a terminal is
// expected to answer.
type Terminal struct {
	In  io.Reader
	Out io.Writer
}

// Ask puts the question and reads the answer.
func (t Terminal) Ask(_ context.Context, a registry.Approval) (Answer, error) {
	fmt.Fprintf(t.Out, "%s needs approval for: %s\nAllow? [y] once, [a] always, [n] no, [d] never: ", a.Tool, a.What())
	var line string
	_, _ = fmt.Fscanln(t.In, &line)
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return AllowOnce, nil
	case "a", "always":
		return AlwaysAllow, nil
	case "d", "never":
		return AlwaysDeny, nil
	default:
		return DenyOnce, nil
	}
}

var (
	_ Asker = Fixed(AllowOnce)
	_ Asker = Nobody{}
	_ Asker = Terminal{}
)

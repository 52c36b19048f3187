package approvals

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/sdk/protocol"
)

// approvalOf is the Approval the registry would hand over for a call of
// tool with patterns under p.
func approvalOf(t *testing.T, p *registry.Policy, tool string, patterns ...string) registry.Approval {
	t.Helper()
	d := p.Decide(tool, patterns)
	if d.Verdict != registry.Ask {
		t.Fatalf("Decide(%s, %q) = %+v, want ask", tool, patterns, d)
	}
	return registry.Approval{Tool: tool, Args: []byte(`{}`), Pending: d.Pending, Source: "config.hcl"}
}

// TestAlwaysAllowStoresLiteral performs the attack through Apply: the
// person answers "always allow" for a file literally named "*"; afterwards,
// and after a restart (the saved file reloaded), a call on another path
// still needs approval.
func TestAlwaysAllowStoresLiteral(t *testing.T) {
	store := filepath.Join(t.TempDir(), "permissions.json")
	p := &registry.Policy{Default: registry.Ask}
	if err := p.Load(store); err != nil {
		t.Fatal(err)
	}
	a := approvalOf(t, p, "filesystem.read_file", "*")
	if err := Apply(p, a, AlwaysAllow); err != nil {
		t.Fatalf("Apply(always allow) = %v", err)
	}
	restarted := &registry.Policy{Default: registry.Ask}
	if err := restarted.Load(store); err != nil {
		t.Fatal(err)
	}
	for name, pol := range map[string]*registry.Policy{"same host": p, "after restart": restarted} {
		if got := pol.Decide("filesystem.read_file", []string{"*"}); got.Verdict != registry.Allow || got.Reason != registry.BySaved {
			t.Errorf("%s: the approved file = %+v, want allow by a saved rule", name, got)
		}
		if got := pol.Decide("filesystem.read_file", []string{"/home/me/.ssh/id_ed25519"}); got.Verdict != registry.Ask {
			t.Errorf("%s: another path = %+v, want ask (saved %q)", name, got, a.Rules())
		}
	}
}

// asker answers from a script and counts the questions.
type asker struct {
	answer Answer
	err    error
	asked  []registry.Approval
}

func (s *asker) Ask(_ context.Context, a registry.Approval) (Answer, error) {
	s.asked = append(s.asked, a)
	return s.answer, s.err
}

// keeper records what Remember was asked to keep.
type keeper struct {
	allow, deny []string
	err         error
}

func (k *keeper) Remember(rules []string, allow bool) error {
	if k.err != nil {
		return k.err
	}
	if allow {
		k.allow = append(k.allow, rules...)
	} else {
		k.deny = append(k.deny, rules...)
	}
	return nil
}

func TestApprover(t *testing.T) {
	p := &registry.Policy{Default: registry.Ask}
	a := approvalOf(t, p, "bash.run", "curl", protocol.Opaque("a subshell"))
	tests := []struct {
		name       string
		answer     Answer
		askErr     error
		saveErr    error
		wantErr    string // "" = approved
		wantAsk    bool   // the refusal is an *registry.ApprovalRequiredError
		allow      string
		deny       string
		wantDenied bool
	}{
		{name: "allow once", answer: AllowOnce},
		{name: "always allow keeps the literal rule", answer: AlwaysAllow, allow: "bash.run:curl"},
		{name: "deny", answer: DenyOnce, wantErr: "bash.run denied by the user"},
		{name: "always deny", answer: AlwaysDeny, wantErr: "now and from now on (bash.run:curl)", deny: "bash.run:curl"},
		{name: "nobody to ask", askErr: ErrCannotAsk, wantErr: `add "bash.run:curl", "bash.run (a subshell)" to permissions.allow in config.hcl`, wantAsk: true},
		{name: "question still open", askErr: &InputRequiredError{}, wantErr: "needs approval", wantAsk: true},
		{name: "always allow not saved", answer: AlwaysAllow, saveErr: errors.New("disk full"), wantErr: "could not be saved: disk full"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ask := &asker{answer: tt.answer, err: tt.askErr}
			keep := &keeper{err: tt.saveErr}
			err := NewApprover(keep, ask).Approve(t.Context(), a)
			if len(ask.asked) != 1 || ask.asked[0].Tool != "bash.run" {
				t.Errorf("asked %+v, want the one call once", ask.asked)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("Approve = %v, want approved", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Approve = %v, want an error containing %q", err, tt.wantErr)
			}
			if _, ok := errors.AsType[*registry.ApprovalRequiredError](err); ok != tt.wantAsk {
				t.Errorf("Approve = %v: an ApprovalRequiredError = %v, want %v", err, ok, tt.wantAsk)
			}
			if got := strings.Join(keep.allow, ","); got != tt.allow {
				t.Errorf("kept allow %q, want %q", got, tt.allow)
			}
			if got := strings.Join(keep.deny, ","); got != tt.deny {
				t.Errorf("kept deny %q, want %q", got, tt.deny)
			}
		})
	}
}

func TestAnswerNames(t *testing.T) {
	for _, want := range []string{"allow_once", "always_allow", "deny", "always_deny"} {
		a, ok := ParseAnswer(want)
		if !ok || a.String() != want {
			t.Errorf("ParseAnswer(%q) = %v, %v; String() = %q", want, a, ok, a.String())
		}
	}
	if a, ok := ParseAnswer("yes"); ok {
		t.Errorf("ParseAnswer(yes) = %v, want none", a)
	}
}

// TestElicitationAnswer: the answer a retried request carries counts only
// for the call it was asked for (same tool and arguments); a declined form
// is a no; without an answer, a client that cannot elicit cannot be asked.
func TestElicitationAnswer(t *testing.T) {
	a := registry.Approval{Tool: "fx.echo", Args: []byte(`{"text":"x"}`), Pending: []registry.Pending{{Tool: "fx.echo", Pattern: "echo", Rule: "fx.echo"}}}
	retry := func(of registry.Approval, action mcp.ElicitationResponseAction, decision string) mcp.CallToolRequest {
		var req mcp.CallToolRequest
		req.Params.RequestState = state(of)
		req.Params.InputResponses = mcp.InputResponses{elicitID: {Elicitation: &mcp.ElicitationResult{
			ElicitationResponse: mcp.ElicitationResponse{Action: action, Content: map[string]any{"decision": decision}},
		}}}
		return req
	}
	other := a
	other.Args = []byte(`{"text":"y"}`)
	shownOther := a
	shownOther.Pending = []registry.Pending{{Tool: "fx.echo", Pattern: "other", Rule: "fx.echo:other"}}
	tests := []struct {
		name    string
		req     mcp.CallToolRequest
		want    Answer
		wantErr error
	}{
		{"no answer, cannot elicit", mcp.CallToolRequest{}, 0, ErrCannotAsk},
		{"always allow", retry(a, mcp.ElicitationResponseActionAccept, "always_allow"), AlwaysAllow, nil},
		{"declined", retry(a, mcp.ElicitationResponseActionDecline, "always_allow"), DenyOnce, nil},
		{"unknown decision", retry(a, mcp.ElicitationResponseActionAccept, "sure"), DenyOnce, nil},
		{"answer for other arguments", retry(other, mcp.ElicitationResponseActionAccept, "allow_once"), 0, ErrCannotAsk},
		{"answer about other patterns", retry(shownOther, mcp.ElicitationResponseActionAccept, "allow_once"), 0, ErrCannotAsk},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Elicitation{Request: tt.req}.Ask(t.Context(), a)
			if got != tt.want || !errors.Is(err, tt.wantErr) {
				t.Errorf("Ask = %v, %v; want %v, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

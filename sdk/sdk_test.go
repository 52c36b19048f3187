package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/internal/pluginv1"
	"github.com/switchboard-mcp/switchboard/internal/protocol"
	"github.com/switchboard-mcp/switchboard/sdk"
	"github.com/switchboard-mcp/switchboard/sdk/sdktest"
)

type greetIn struct {
	Name string `json:"name" jsonschema:"description=Who to greet"`
	Loud bool   `json:"loud,omitempty"`
}

func newTestServer(started chan<- struct{}, observed chan<- error) *sdk.Server {
	s := sdk.NewServer("testplugin", "1.2.3", sdk.WithInstructions("test tools"))
	sdk.AddTool(s, sdk.Tool{Name: "greet", Description: "Greets someone.", ReadOnly: true},
		func(_ context.Context, _ *sdk.Request, in greetIn) (*sdk.Result, error) {
			if in.Name == "" {
				return sdk.Errorf("name is empty: pass a name"), nil
			}
			msg := "Hello, " + in.Name + "!"
			if in.Loud {
				msg = strings.ToUpper(msg)
			}
			return sdk.Text(msg), nil
		})
	sdk.AddTool(s, sdk.Tool{Name: "wait", Description: "Waits until cancelled, reporting progress."},
		func(ctx context.Context, req *sdk.Request, _ struct{}) (*sdk.Result, error) {
			req.Progress(1, 0, "started")
			close(started)
			<-ctx.Done()
			observed <- ctx.Err()
			return nil, ctx.Err()
		})
	sdk.AddTool(s, sdk.Tool{Name: "fail", Description: "Returns a plain error."},
		func(context.Context, *sdk.Request, struct{}) (*sdk.Result, error) {
			return nil, errors.New("disk on fire")
		})
	sdk.AddTool(s, sdk.Tool{Name: "panic", Description: "Panics."},
		func(context.Context, *sdk.Request, struct{}) (*sdk.Result, error) {
			panic("boom")
		})
	return s
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction(sdktest.ReattachWaitFunction))
}

func TestInProcess(t *testing.T) {
	started := make(chan struct{})
	observed := make(chan error, 1)
	p := sdktest.StartInProcess(t, newTestServer(started, observed))

	if p.Info.GetName() != "testplugin" || p.Info.GetPluginVersion() != "1.2.3" || p.Info.GetSdkVersion() != sdk.Version {
		t.Errorf("Describe = %v", p.Info)
	}
	greet := p.Tool("greet")
	if greet.GetAccess() != pluginv1.Access_ACCESS_READ {
		t.Errorf("greet access = %v, want READ", greet.GetAccess())
	}
	if p.Tool("wait").GetAccess() != pluginv1.Access_ACCESS_WRITE {
		t.Errorf("wait access = %v, want WRITE", p.Tool("wait").GetAccess())
	}
	var schema map[string]any
	if err := json.Unmarshal(greet.GetInputSchema(), &schema); err != nil {
		t.Fatal(err)
	}
	if req, _ := schema["required"].([]any); len(req) != 1 || req[0] != "name" {
		t.Errorf("greet schema required = %v, want [name]; schema %s", schema["required"], greet.GetInputSchema())
	}

	t.Run("text", func(t *testing.T) {
		res := p.Call("greet", map[string]any{"name": "Ada", "loud": true})
		if got := sdktest.Text(res); got != "HELLO, ADA!" || res.GetIsError() {
			t.Errorf("greet = %q (isError %v), want HELLO, ADA!", got, res.GetIsError())
		}
	})
	t.Run("error result", func(t *testing.T) {
		res := p.Call("greet", map[string]any{"name": ""})
		if !res.GetIsError() || !strings.Contains(sdktest.Text(res), "name is empty") {
			t.Errorf("greet(empty) = %v, want an error result", res)
		}
		res = p.Call("fail", nil)
		if !res.GetIsError() || !strings.Contains(sdktest.Text(res), "disk on fire") {
			t.Errorf("fail = %v, want an error result naming the error", res)
		}
	})
	t.Run("bad arguments", func(t *testing.T) {
		_, err := p.CallContext(t.Context(), "greet", `{"name": 7}`, nil)
		if !errors.Is(err, protocol.ErrInvalidArguments) || !strings.Contains(err.Error(), `"name"`) {
			t.Errorf("greet(name: 7) err = %v, want invalid arguments naming name", err)
		}
		_, err = p.CallContext(t.Context(), "greet", `{"nme": "x"}`, nil)
		if !errors.Is(err, protocol.ErrInvalidArguments) || !strings.Contains(err.Error(), "nme") {
			t.Errorf("greet(nme) err = %v, want invalid arguments naming nme", err)
		}
	})
	t.Run("unknown tool", func(t *testing.T) {
		_, err := p.CallContext(t.Context(), "nope", nil, nil)
		if !errors.Is(err, protocol.ErrUnknownTool) {
			t.Errorf("nope err = %v, want ErrUnknownTool", err)
		}
	})
	t.Run("panic", func(t *testing.T) {
		_, err := p.CallContext(t.Context(), "panic", nil, nil)
		if !errors.Is(err, protocol.ErrInternal) || !strings.Contains(err.Error(), "boom") {
			t.Errorf("panic err = %v, want internal error naming the panic", err)
		}
		// The plugin survives.
		if got := sdktest.Text(p.Call("greet", map[string]any{"name": "Bo"})); got != "Hello, Bo!" {
			t.Errorf("greet after panic = %q", got)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		progress := make(chan string, 4)
		go func() {
			<-started
			cancel()
		}()
		_, err := p.CallContext(ctx, "wait", nil, func(ev *pluginv1.CallToolEvent) {
			if pr := ev.GetProgress(); pr != nil {
				progress <- pr.GetMessage()
			}
		})
		if !errors.Is(err, protocol.ErrCancelled) {
			t.Fatalf("wait err = %v, want ErrCancelled", err)
		}
		select {
		case got := <-observed:
			if !errors.Is(got, context.Canceled) {
				t.Errorf("handler saw %v, want context.Canceled", got)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("handler never observed the cancellation")
		}
		select {
		case m := <-progress:
			if m != "started" {
				t.Errorf("progress message = %q, want started", m)
			}
		default:
			t.Error("no progress event arrived")
		}
	})
}

// AddTool refuses what the host would refuse, at the author's desk.
func TestAddToolRunsTheHostsCheck(t *testing.T) {
	for _, name := range []string{"has space", "", strings.Repeat("x", 129), "ünïcode"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("AddTool(%q) did not panic", name)
				}
			}()
			sdk.AddTool(sdk.NewServer("x", "1"), sdk.Tool{Name: name, Description: "d"}, func(context.Context, *sdk.Request, struct{}) (*sdk.Result, error) { return nil, nil })
		}()
	}
	sdk.AddTool(sdk.NewServer("x", "1"), sdk.Tool{Name: "ok.name-1_2", Description: "d"}, func(context.Context, *sdk.Request, struct{}) (*sdk.Result, error) { return nil, nil })
}

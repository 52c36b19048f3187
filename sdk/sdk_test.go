package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

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
				return sdk.ErrorResult("name is empty: pass a name"), nil
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

	if p.Name != "testplugin" || p.Version != "1.2.3" || p.SDKVersion != sdk.Version {
		t.Errorf("Describe = %s %s %s", p.Name, p.Version, p.SDKVersion)
	}
	greet := p.Tool("greet")
	if greet.Access != sdk.AccessRead {
		t.Errorf("greet access = %v, want READ", greet.Access)
	}
	if p.Tool("wait").Access != sdk.AccessWrite {
		t.Errorf("wait access = %v, want WRITE", p.Tool("wait").Access)
	}
	var schema map[string]any
	if err := json.Unmarshal(greet.InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	if req, _ := schema["required"].([]any); len(req) != 1 || req[0] != "name" {
		t.Errorf("greet schema required = %v, want [name]; schema %s", schema["required"], greet.InputSchema)
	}

	t.Run("text", func(t *testing.T) {
		res := p.Call("greet", map[string]any{"name": "Ada", "loud": true})
		if got := res.Text(); got != "HELLO, ADA!" || res.IsError {
			t.Errorf("greet = %q (isError %v), want HELLO, ADA!", got, res.IsError)
		}
	})
	t.Run("error result", func(t *testing.T) {
		res := p.Call("greet", map[string]any{"name": ""})
		if !res.IsError || !strings.Contains(res.Text(), "name is empty") {
			t.Errorf("greet(empty) = %v, want an error result", res)
		}
		res = p.Call("fail", nil)
		if !res.IsError || !strings.Contains(res.Text(), "disk on fire") {
			t.Errorf("fail = %v, want an error result naming the error", res)
		}
	})
	t.Run("bad arguments", func(t *testing.T) {
		_, err := p.CallContext(t.Context(), "greet", `{"name": 7}`, nil)
		if !errors.Is(err, sdk.ErrInvalidArguments) || !strings.Contains(err.Error(), `"name"`) {
			t.Errorf("greet(name: 7) err = %v, want invalid arguments naming name", err)
		}
		_, err = p.CallContext(t.Context(), "greet", `{"nme": "x"}`, nil)
		if !errors.Is(err, sdk.ErrInvalidArguments) || !strings.Contains(err.Error(), "nme") {
			t.Errorf("greet(nme) err = %v, want invalid arguments naming nme", err)
		}
	})
	t.Run("unknown tool", func(t *testing.T) {
		_, err := p.CallContext(t.Context(), "nope", nil, nil)
		if !errors.Is(err, sdk.ErrUnknownTool) {
			t.Errorf("nope err = %v, want ErrUnknownTool", err)
		}
	})
	t.Run("panic", func(t *testing.T) {
		_, err := p.CallContext(t.Context(), "panic", nil, nil)
		if !errors.Is(err, sdk.ErrInternal) || !strings.Contains(err.Error(), "boom") {
			t.Errorf("panic err = %v, want internal error naming the panic", err)
		}
		// The plugin survives.
		if got := p.Call("greet", map[string]any{"name": "Bo"}).Text(); got != "Hello, Bo!" {
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
		_, err := p.CallContext(ctx, "wait", nil, func(pr sdktest.Progress) {
			progress <- pr.Message
		})
		if !errors.Is(err, sdk.ErrCancelled) {
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

type sumIn struct {
	Values []int `json:"values" jsonschema:"description=Numbers to add, at least one"`
}

type sumOut struct {
	Sum   int `json:"sum" jsonschema:"description=The total"`
	Count int `json:"count"`
}

// A handler that returns a struct publishes an output schema derived from
// it and answers with structured content plus the same JSON as text.
func TestTypedOutput(t *testing.T) {
	s := sdk.NewServer("typed", "1.0.0")
	sdk.AddTool(s, sdk.Tool{Name: "sum", Description: "Adds numbers.", ReadOnly: true},
		func(_ context.Context, _ *sdk.Request, in sumIn) (sumOut, error) {
			if len(in.Values) == 0 {
				return sumOut{}, sdk.InvalidArguments("values is empty: pass at least one number")
			}
			out := sumOut{Count: len(in.Values)}
			for _, v := range in.Values {
				out.Sum += v
			}
			return out, nil
		})
	sdk.AddTool(s, sdk.Tool{Name: "none", Description: "Returns a nil pointer."},
		func(context.Context, *sdk.Request, struct{}) (*sumOut, error) { return nil, nil })
	p := sdktest.StartInProcess(t, s)

	var schema struct {
		Type       string                     `json:"type"`
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	tool := p.Tool("sum")
	if err := json.Unmarshal(tool.OutputSchema, &schema); err != nil {
		t.Fatalf("output schema %q: %v", tool.OutputSchema, err)
	}
	if schema.Type != "object" || len(schema.Required) != 2 || !strings.Contains(string(schema.Properties["sum"]), "The total") {
		t.Errorf("output schema = %s", tool.OutputSchema)
	}
	if p.Tool("none").OutputSchema == nil {
		t.Error("a pointer-to-struct output published no schema")
	}

	res := p.Call("sum", map[string]any{"values": []int{2, 3, 4}})
	var got sumOut
	if err := json.Unmarshal(res.Structured, &got); err != nil || got != (sumOut{Sum: 9, Count: 3}) || res.IsError {
		t.Errorf("sum = %s (%v), isError %v", res.Structured, err, res.IsError)
	}
	if res.Text() != string(res.Structured) {
		t.Errorf("text %q differs from structured %s", res.Text(), res.Structured)
	}
	if _, err := p.CallContext(t.Context(), "sum", map[string]any{"values": []int{}}, nil); !errors.Is(err, sdk.ErrInvalidArguments) || !strings.Contains(err.Error(), "values is empty") {
		t.Errorf("empty sum err = %v, want ErrInvalidArguments naming values", err)
	}
	if res := p.Call("none", nil); !res.IsError || !strings.Contains(res.Text(), "no output") {
		t.Errorf("nil output = %q (isError %v), want an error result", res.Text(), res.IsError)
	}
}

// A typed output that is not a struct is a programming error, caught when
// the tool is added.
func TestTypedOutputMustBeAStruct(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "not a struct") {
			t.Errorf("recover() = %v, want a panic saying the output is not a struct", r)
		}
	}()
	sdk.AddTool(sdk.NewServer("x", "1"), sdk.Tool{Name: "n", Description: "d"},
		func(context.Context, *sdk.Request, struct{}) (int, error) { return 1, nil })
}

// Owners and protected paths reach the handler as a host sends them.
func TestOwnerAndProtectedPaths(t *testing.T) {
	s := sdk.NewServer("who", "1.0.0")
	sdk.AddTool(s, sdk.Tool{Name: "whoami", Description: "Says who calls.", ReadOnly: true},
		func(_ context.Context, req *sdk.Request, _ struct{}) (*sdk.Result, error) {
			return sdk.Textf("%s %v", req.Owner, s.Config().ProtectedPaths), nil
		})
	p := sdktest.StartInProcess(t, s, sdktest.WithProtectedPaths("/etc/secret"))
	if got := p.As("alice").Call("whoami", nil).Text(); got != "alice [/etc/secret]" {
		t.Errorf("as alice: %q", got)
	}
	if got := p.Call("whoami", nil).Text(); got != " [/etc/secret]" {
		t.Errorf("no owner: %q", got)
	}
}

// The host's deny patterns for a tool reach the handler, and DeniedPath
// matches them as the host matches rules.
func TestDeniedPatternsReachTheTool(t *testing.T) {
	s := sdk.NewServer("lister", "1.0.0")
	sdk.AddTool(s, sdk.Tool{Name: "list", Description: "Lists what it may.", ReadOnly: true},
		func(_ context.Context, req *sdk.Request, _ struct{}) (*sdk.Result, error) {
			var kept []string
			for _, f := range []string{"a.go", ".env", "sub/prod.env", "secret/x", "secret"} {
				if !req.DeniedPath(f) {
					kept = append(kept, f)
				}
			}
			return sdk.Text(strings.Join(kept, " ")), nil
		})
	p := sdktest.StartInProcess(t, s)
	if got := p.Call("list", nil).Text(); got != "a.go .env sub/prod.env secret/x secret" {
		t.Errorf("no rules: %q", got)
	}
	if got := p.Denying("*.env", "secret/*").Call("list", nil).Text(); got != "a.go secret" {
		t.Errorf("denying *.env and secret/*: %q", got)
	}
}

// The SDK's documented API is the plugin author's: none of the protocol's
// plumbing (go-plugin, gRPC, generated types, hclog, handler methods) shows
// in go doc.
func TestPublicAPIIsTheAuthors(t *testing.T) {
	for _, pkg := range []string{".", "./sdktest"} {
		out, err := exec.Command("go", "doc", "-all", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go doc %s: %v\n%s", pkg, err, out)
		}
		for _, leak := range []string{"pluginv1", "hclog", "go-plugin\"", "plugin.Serve", "grpc", "Handler", "EventSink", ") Configure(", ") Describe(", ") CallTool(", ") PermissionPattern(", "Shutdown()"} {
			if strings.Contains(string(out), leak) {
				t.Errorf("go doc %s shows %q", pkg, leak)
			}
		}
	}
}

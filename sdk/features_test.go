package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/sdk"
	"github.com/switchboard-mcp/switchboard/sdk/sdktest"
)

func newFeatureServer() *sdk.Server {
	s := sdk.NewServer("notes", "1.0.0")
	notes := map[string]string{"a": "alpha", "b": "beta"}
	sdk.AddResource(s, sdk.Resource{URI: "notes://index", Name: "index", MIMEType: "text/plain"},
		func(context.Context, *sdk.ResourceRequest) ([]sdk.ResourceContents, error) {
			return []sdk.ResourceContents{{MIMEType: "text/plain", Text: "a b"}}, nil
		})
	sdk.AddResourceTemplate(s, sdk.ResourceTemplate{
		URITemplate: "notes://{id}", Name: "note",
		Complete: func(_ context.Context, variable, value string, _ map[string]string) ([]string, error) {
			var out []string
			for id := range notes {
				if variable == "id" && strings.HasPrefix(id, value) {
					out = append(out, id)
				}
			}
			slices.Sort(out)
			return out, nil
		},
	}, func(_ context.Context, req *sdk.ResourceRequest) ([]sdk.ResourceContents, error) {
		text, ok := notes[req.Variables["id"]]
		if !ok {
			return nil, sdk.InvalidArguments("no note %q", req.Variables["id"])
		}
		return []sdk.ResourceContents{{MIMEType: "text/plain", Text: text}}, nil
	})
	sdk.AddPrompt(s, sdk.Prompt{Name: "summarise", Description: "Summarise a note.", Arguments: []sdk.PromptArgument{
		{Name: "id", Required: true, Complete: func(_ context.Context, value string, _ map[string]string) ([]string, error) {
			return []string{value + "1", value + "2"}, nil
		}},
	}}, func(_ context.Context, req *sdk.PromptRequest) (*sdk.PromptResult, error) {
		return &sdk.PromptResult{Description: "summary", Messages: []sdk.PromptMessage{
			{Role: "user", Text: "Summarise note " + req.Arguments["id"]},
			{Role: "user", Resource: &sdk.ResourceContents{URI: "notes://" + req.Arguments["id"], MIMEType: "text/plain", Text: notes[req.Arguments["id"]]}},
		}}, nil
	})
	sdk.AddTool(s, sdk.Tool{Name: "ask", Description: "Asks the client's model, the user and the roots."},
		func(ctx context.Context, req *sdk.Request, _ struct{}) (*sdk.Result, error) {
			msg, err := req.CreateMessage(ctx, sdk.SamplingRequest{MaxTokens: 10, Messages: []sdk.SamplingMessage{{Role: "user", Content: sdk.SamplingContent{Type: "text", Text: "2+2?"}}}})
			if err != nil {
				return nil, err
			}
			answer, err := req.Elicit(ctx, "Your name?", json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`))
			if err != nil {
				return nil, err
			}
			roots, err := req.Roots(ctx)
			if err != nil {
				return nil, err
			}
			return sdk.Textf("%s/%s %s/%v %d:%s", msg.Content.Text, msg.Model, answer.Action, answer.Content["name"], len(roots), roots[0].URI), nil
		})
	sdk.AddTool(s, sdk.Tool{Name: "touch", Description: "Changes note a."},
		func(context.Context, *sdk.Request, struct{}) (*sdk.Result, error) {
			s.ResourceUpdated("notes://a")
			s.ResourceUpdated("notes://b") // nobody subscribed: not sent
			return sdk.Text("ok"), nil
		})
	return s
}

// Resources, templates, prompts, completion, subscriptions and requests to
// the client, through the real protocol (version 2).
func TestFeatures(t *testing.T) {
	var asked []string
	p := sdktest.StartInProcess(t, newFeatureServer(), sdktest.WithClient(func(method string, params json.RawMessage) (json.RawMessage, error) {
		asked = append(asked, method)
		switch method {
		case "sampling/createMessage":
			if !strings.Contains(string(params), "2+2?") {
				return nil, errors.New("bad params")
			}
			return json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"4"},"model":"m1"}`), nil
		case "elicitation/create":
			return json.RawMessage(`{"action":"accept","content":{"name":"Ada"}}`), nil
		default:
			return json.RawMessage(`{"roots":[{"uri":"file:///p","name":"p"}]}`), nil
		}
	}))
	if !slices.Contains(p.ProtocolVersions, 2) {
		t.Errorf("protocol versions = %v, want 2 among them", p.ProtocolVersions)
	}
	if len(p.Resources) != 1 || p.Resources[0].URI != "notes://index" || len(p.ResourceTemplates) != 1 || len(p.Prompts) != 1 || !p.Prompts[0].Arguments[0].Required {
		t.Errorf("described %+v %+v %+v", p.Resources, p.ResourceTemplates, p.Prompts)
	}
	if c := p.ReadResource("notes://index"); len(c) != 1 || c[0].Text != "a b" || c[0].URI != "notes://index" {
		t.Errorf("index = %+v", c)
	}
	if c := p.ReadResource("notes://b"); len(c) != 1 || c[0].Text != "beta" {
		t.Errorf("notes://b = %+v", c)
	}
	if _, err := p.ReadResourceContext(t.Context(), "notes://zz"); !errors.Is(err, sdk.ErrInvalidArguments) || !strings.Contains(err.Error(), `no note "zz"`) {
		t.Errorf("missing note err = %v", err)
	}
	if _, err := p.ReadResourceContext(t.Context(), "other://x"); !errors.Is(err, sdk.ErrUnknownTool) {
		t.Errorf("unknown resource err = %v", err)
	}
	pr := p.GetPrompt("summarise", map[string]string{"id": "a"})
	if len(pr.Messages) != 2 || pr.Messages[0].Text != "Summarise note a" || pr.Messages[1].Resource == nil || pr.Messages[1].Resource.Text != "alpha" {
		t.Errorf("prompt = %+v", pr)
	}
	if _, err := p.GetPromptContext(t.Context(), "summarise", nil); !errors.Is(err, sdk.ErrInvalidArguments) || !strings.Contains(err.Error(), "id") {
		t.Errorf("prompt without id err = %v", err)
	}
	if got := p.Complete("resource", "notes://{id}", "id", "", nil); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("complete template = %v", got)
	}
	if got := p.Complete("prompt", "summarise", "id", "x", nil); !slices.Equal(got, []string{"x1", "x2"}) {
		t.Errorf("complete prompt = %v", got)
	}

	if got := p.Call("ask", nil).Text(); got != "4/m1 accept/Ada 1:file:///p" {
		t.Errorf("ask = %q", got)
	}
	if !slices.Equal(asked, []string{"sampling/createMessage", "elicitation/create", "roots/list"}) {
		t.Errorf("asked %v", asked)
	}

	updates := p.Subscribe("notes://a")
	p.Call("touch", nil)
	select {
	case u := <-updates:
		if u != "notes://a" {
			t.Errorf("update for %q, want notes://a", u)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no update for a subscribed resource")
	}
	select {
	case u := <-updates:
		t.Errorf("unexpected update %q (notes://b was not subscribed)", u)
	default:
	}
}

// Without a client to ask, a tool's request fails with an error it can
// report, and the call still ends.
func TestRequestWithoutClient(t *testing.T) {
	p := sdktest.StartInProcess(t, newFeatureServer())
	res := p.Call("ask", nil)
	if !res.IsError || !strings.Contains(res.Text(), "cannot be asked") {
		t.Errorf("ask without a client = %q (isError %v)", res.Text(), res.IsError)
	}
}

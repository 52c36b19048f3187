package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

// featureClient answers sampling with an echo of the prompt and roots
// with one root.
type featureClient struct{}

func (featureClient) CreateMessage(_ context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	text := ""
	if len(req.Messages) > 0 {
		if tc, ok := req.Messages[0].Content.(mcp.TextContent); ok {
			text = tc.Text
		} else if m, ok := req.Messages[0].Content.(map[string]any); ok {
			text, _ = m["text"].(string)
		}
	}
	return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("echo " + text)}, Model: "test-model"}, nil
}

func (featureClient) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"name": "Ada"}}}, nil
}

func (featureClient) ListRoots(context.Context, mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	return &mcp.ListRootsResult{Roots: []mcp.Root{{URI: "file:///tmp/root", Name: "root"}}}, nil
}

// featureSetup writes a config with the fixture plugin with its features
// as "fx" (default prefix), a second one as "fy" whose prefix "fx" makes
// every name collide, and the external fixture server as "ext" with its
// names bare (prefix = "").
func featureSetup(t *testing.T) (fixtures.Binaries, string) {
	t.Helper()
	bins := fixtures.Build(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "project"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`
start_wait  = "2m"
project_dir = "project"
data_dir    = "state"
plugin "fx" {
  path = %[1]q
  env  = { FIXTURE_FEATURES = "1" }
}
plugin "fy" {
  path   = %[1]q
  env    = { FIXTURE_FEATURES = "1", FIXTURE_NAME = "fy" }
  prefix = "fx"
}
external "ext" {
  command = %[2]q
  env     = { FIXTURE_FEATURES = "1" }
  prefix  = ""
}
`, bins.TestPlugin, bins.MCPServer)
	path := filepath.Join(dir, "config.hcl")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return bins, path
}

// featureMCPClient starts `switchboard serve` under a real mcp-go client of
// the 2025-11-25 era (the one with requests from server to client) that
// can sample and has roots; notifications go to notes.
func featureMCPClient(t *testing.T, bins fixtures.Binaries, config string, notes chan<- mcp.JSONRPCNotification) (*client.Client, *mcp.InitializeResult) {
	return featureMCPClientWith(t, bins, config, notes, true)
}

// featureMCPClientWith is featureMCPClient; without handlers the client
// declares neither sampling nor roots.
func featureMCPClientWith(t *testing.T, bins fixtures.Binaries, config string, notes chan<- mcp.JSONRPCNotification, handlers bool) (*client.Client, *mcp.InitializeResult) {
	t.Helper()
	c, err := client.NewStdioMCPClientWithOptions(bins.Switchboard, nil, []string{"serve", "--config", config},
		transport.WithCommandFunc(func(ctx context.Context, command string, _ []string, args []string) (*exec.Cmd, error) {
			cmd := exec.CommandContext(ctx, command, args...)
			cmd.Env = append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=warn")
			return cmd, nil
		}))
	if err != nil {
		t.Fatalf("starting switchboard serve: %v", err)
	}
	client.WithLegacyProtocolOnly()(c) //nolint:staticcheck // SA1019: the era with server-to-client requests
	if handlers {
		client.WithSamplingHandler(featureClient{})(c)
		client.WithRootsHandler(featureClient{})(c)
		client.WithElicitationHandler(featureClient{})(c)
	}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		select {
		case notes <- n:
		default:
		}
	})
	if err := c.Start(t.Context()); err != nil {
		t.Fatalf("client Start: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "features", Version: "1"}
	req.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init, err := c.Initialize(t.Context(), req)
	if err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	return c, init
}

// waitNote waits for a notification of method that ok accepts.
func waitNote(t *testing.T, notes <-chan mcp.JSONRPCNotification, method string, ok func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case n := <-notes:
			if n.Method == method && ok(n.Params.AdditionalFields) {
				return n.Params.AdditionalFields
			}
		case <-deadline:
			t.Fatalf("no %s notification", method)
		}
	}
}

// A real MCP client sees, through `switchboard serve`, the resources,
// resource templates, prompts and completion of a v2 plugin and of an
// external server; subscribes and gets updates; answers the sampling and
// roots requests of a plugin's tool and of an external server's tool;
// receives their log messages at the level it set; and sees prefixes
// applied with collisions refused.
func TestFeaturesThroughHost(t *testing.T) {
	bins, config := featureSetup(t)
	notes := make(chan mcp.JSONRPCNotification, 256)
	c, init := featureMCPClient(t, bins, config, notes)
	ctx := t.Context()
	for _, want := range []string{"prompt fy.greet is not available", "resource fixture://static of fy is not available", "resource template fixture://notes/{id} of fy is not available", "tool fy.echo is not available"} {
		if !strings.Contains(init.Instructions, want) {
			t.Errorf("instructions do not say %q:\n%s", want, init.Instructions)
		}
	}

	t.Run("names", func(t *testing.T) {
		tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range tools.Tools {
			names = append(names, tl.Name)
		}
		for _, want := range []string{"fx__echo", "fx__ask_model", "echo", "ask_model", "log"} {
			if n := countOf(names, want); n != 1 {
				t.Errorf("tool %s listed %d times, want once: %v", want, n, names)
			}
		}
		for _, n := range names {
			if strings.HasPrefix(n, "fy__") {
				t.Errorf("tool %s listed: fy's prefix is fx", n)
			}
		}
		prompts, err := c.ListPrompts(ctx, mcp.ListPromptsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var pnames []string
		for _, p := range prompts.Prompts {
			pnames = append(pnames, p.Name)
		}
		slices.Sort(pnames)
		if want := []string{"fx__greet", "summarize"}; !slices.Equal(pnames, want) {
			t.Errorf("prompts = %v, want %v (fy's fx__greet refused as a collision)", pnames, want)
		}
	})

	t.Run("resources", func(t *testing.T) {
		res, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var uris []string
		for _, r := range res.Resources {
			uris = append(uris, r.URI)
		}
		slices.Sort(uris)
		if want := []string{"ext://readme", "fixture://static"}; !slices.Equal(uris, want) {
			t.Errorf("resources = %v, want %v (fy's fixture://static refused as a collision)", uris, want)
		}
		tmpls, err := c.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var raws []string
		for _, tm := range tmpls.ResourceTemplates {
			raws = append(raws, tm.URITemplate.Raw())
		}
		slices.Sort(raws)
		// The host's own: results cut to fit (README, Results that fit).
		if want := []string{"fixture://notes/{id}", "switchboard://results/{id}{?offset,limit}"}; !slices.Equal(raws, want) {
			t.Errorf("templates = %v, want %v (fixture://notes/{id} once)", raws, want)
		}
		for uri, want := range map[string]string{"fixture://static": "static text", "fixture://notes/alpha": "note alpha", "ext://readme": "external readme"} {
			req := mcp.ReadResourceRequest{}
			req.Params.URI = uri
			got, err := c.ReadResource(ctx, req)
			if err != nil {
				t.Errorf("ReadResource(%q): %v", uri, err)
				continue
			}
			if len(got.Contents) != 1 {
				t.Errorf("ReadResource(%q) = %d contents, want 1", uri, len(got.Contents))
				continue
			}
			if tc, ok := got.Contents[0].(mcp.TextResourceContents); !ok || tc.Text != want || tc.URI != uri {
				t.Errorf("ReadResource(%q) = %+v, want text %q", uri, got.Contents[0], want)
			}
		}
	})

	t.Run("prompts", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			args map[string]string
			want string
		}{
			{"fx__greet", map[string]string{"name": "Ada"}, "Hello, Ada!"},
			{"summarize", map[string]string{"topic": "Go"}, "Summarize Go."},
		} {
			req := mcp.GetPromptRequest{}
			req.Params.Name, req.Params.Arguments = tc.name, tc.args
			got, err := c.GetPrompt(ctx, req)
			if err != nil {
				t.Errorf("GetPrompt(%q): %v", tc.name, err)
				continue
			}
			if len(got.Messages) != 1 {
				t.Errorf("GetPrompt(%q) = %d messages, want 1", tc.name, len(got.Messages))
				continue
			}
			if text, ok := got.Messages[0].Content.(mcp.TextContent); !ok || text.Text != tc.want {
				t.Errorf("GetPrompt(%q) = %+v, want %q", tc.name, got.Messages[0].Content, tc.want)
			}
		}
	})

	t.Run("completion", func(t *testing.T) {
		for _, tc := range []struct {
			ref       any
			arg, val  string
			wantFirst []string
		}{
			{mcp.PromptReference{Type: "ref/prompt", Name: "fx__greet"}, "name", "A", []string{"Ada", "Alan"}},
			{mcp.ResourceReference{Type: "ref/resource", URI: "fixture://notes/{id}"}, "id", "al", []string{"alpha", "alpine"}},
		} {
			req := mcp.CompleteRequest{}
			req.Params.Ref = tc.ref
			req.Params.Argument = mcp.CompleteArgument{Name: tc.arg, Value: tc.val}
			got, err := c.Complete(ctx, req)
			if err != nil {
				t.Errorf("Complete(%v): %v", tc.ref, err)
				continue
			}
			if !slices.Equal(got.Completion.Values, tc.wantFirst) {
				t.Errorf("Complete(%v, %q) = %v, want %v", tc.ref, tc.val, got.Completion.Values, tc.wantFirst)
			}
		}
	})

	t.Run("subscribe", func(t *testing.T) {
		resp, err := c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
			JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId("sub-1"),
			Method: "resources/subscribe", Params: map[string]any{"uri": "fixture://static"},
		})
		if err != nil || resp.Error != nil {
			t.Fatalf("resources/subscribe: %v %+v", err, resp)
		}
		if _, err := callTool(ctx, c, "fx__touch", nil, nil); err != nil {
			t.Fatal(err)
		}
		waitNote(t, notes, "notifications/resources/updated", func(p map[string]any) bool { return p["uri"] == "fixture://static" })
	})

	t.Run("list changes", func(t *testing.T) {
		// A plugin adds a resource, an external server a prompt, while
		// served: the client is told, and sees them.
		for _, tool := range []string{"fx__add_resource", "add_prompt"} {
			if _, err := callTool(ctx, c, tool, nil, nil); err != nil {
				t.Fatalf("%s: %v", tool, err)
			}
		}
		waitFor(t, "fixture://added listed", func() bool {
			res, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
			return err == nil && slices.ContainsFunc(res.Resources, func(r mcp.Resource) bool { return r.URI == "fixture://added" })
		})
		waitFor(t, "the external server's prompt added listed", func() bool {
			res, err := c.ListPrompts(ctx, mcp.ListPromptsRequest{})
			return err == nil && slices.ContainsFunc(res.Prompts, func(p mcp.Prompt) bool { return p.Name == "added" })
		})
		waitNote(t, notes, "notifications/resources/list_changed", func(map[string]any) bool { return true })
		req := mcp.ReadResourceRequest{}
		req.Params.URI = "fixture://added"
		got, err := c.ReadResource(ctx, req)
		if err != nil || len(got.Contents) != 1 {
			t.Fatalf("ReadResource(fixture://added) = %+v, %v", got, err)
		}
	})

	t.Run("sampling, elicitation and roots", func(t *testing.T) {
		for _, tc := range []struct{ tool, want string }{
			{"fx__ask_model", "model test-model said: echo hi"},
			{"ask_model", "model test-model said: echo hi"},
		} {
			res, err := callTool(ctx, c, tc.tool, map[string]any{"text": "hi"}, nil)
			if err != nil {
				t.Fatalf("%s: %v", tc.tool, err)
			}
			if got := resultText(res); res.IsError || got != tc.want {
				t.Errorf("%s = %q (error %v), want %q", tc.tool, got, res.IsError, tc.want)
			}
		}
		res, err := callTool(ctx, c, "fx__ask_user", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := resultText(res); got != "accept Ada" {
			t.Errorf("fx__ask_user = %q, want %q", got, "accept Ada")
		}
		res, err = callTool(ctx, c, "fx__roots", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := resultText(res); got != "file:///tmp/root" {
			t.Errorf("fx__roots = %q, want file:///tmp/root", got)
		}
	})

	t.Run("logging", func(t *testing.T) {
		if err := c.SetLevel(ctx, mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelWarning}}); err != nil {
			t.Fatal(err)
		}
		if _, err := callTool(ctx, c, "fx__chatty", nil, nil); err != nil {
			t.Fatal(err)
		}
		// The debug line comes first on the wire if it comes at all.
		got := waitNote(t, notes, "notifications/message", func(p map[string]any) bool { return p["logger"] == "fx" })
		if got["level"] != "warning" {
			t.Errorf("first log message of fx = %v, want the warning (debug is below the level set)", got)
		}
		if _, err := callTool(ctx, c, "log", nil, nil); err != nil {
			t.Fatal(err)
		}
		got = waitNote(t, notes, "notifications/message", func(p map[string]any) bool { return p["logger"] == "ext.fixture" })
		if got["data"] != "external says hi" || got["level"] != "warning" {
			t.Errorf("external log message = %v", got)
		}
		// Outside any call, an external server's log message goes to
		// every session.
		if _, err := callTool(ctx, c, "log_later", nil, nil); err != nil {
			t.Fatal(err)
		}
		got = waitNote(t, notes, "notifications/message", func(p map[string]any) bool { return p["data"] == "external says later" })
		if got["logger"] != "ext.fixture" || got["level"] != "error" {
			t.Errorf("external log message outside a call = %v", got)
		}
	})
}

// inspect shows each server's protocol version and how many resources
// (and templates) and prompts it offers.
func TestInspectCountsFeatures(t *testing.T) {
	bins, config := featureSetup(t)
	out, err := exec.CommandContext(t.Context(), bins.Switchboard, "inspect", "--json", "--config", config).Output()
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	var rows []struct {
		Name               string
		Protocol           int
		Resources, Prompts int
	}
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("inspect --json: %v\n%s", err, out)
	}
	got := map[string][3]int{}
	for _, r := range rows {
		got[r.Name] = [3]int{r.Protocol, r.Resources, r.Prompts}
	}
	want := map[string][3]int{"fx": {2, 2, 1}, "fy": {2, 2, 1}, "ext": {0, 1, 1}}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("inspect %s: protocol, resources, prompts = %v, want %v", name, got[name], w)
		}
	}
}

// A client that did not declare sampling makes the tool that asks for it
// fail with a reason, for a plugin's tool and an external server's.
func TestSamplingRefusedWithoutCapability(t *testing.T) {
	bins, config := featureSetup(t)
	c, _ := featureMCPClientWith(t, bins, config, make(chan mcp.JSONRPCNotification, 16), false)
	for _, tool := range []string{"fx__ask_model", "ask_model"} {
		res, err := callTool(t.Context(), c, tool, map[string]any{"text": "hi"}, nil)
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if got := resultText(res); !res.IsError || !strings.Contains(got, "did not declare the sampling capability") {
			t.Errorf("%s = %q (error %v), want a failure saying the client cannot sample", tool, got, res.IsError)
		}
	}
}

func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// Over streamable HTTP too, a client reads a plugin's resource, gets an
// external server's prompt, and answers the sampling requests of a
// plugin's tool and of an external server's tool.
func TestFeaturesOverHTTP(t *testing.T) {
	bins, config := featureSetup(t)
	url := serveHTTPOn(t, bins.Switchboard, config)
	// With mcp-go v1.2.1 a request from the host to an HTTP client reaches
	// it only on the client's GET stream (continuous listening).
	c, err := client.NewStreamableHttpClient(url, transport.WithContinuousListening())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	client.WithLegacyProtocolOnly()(c) //nolint:staticcheck // SA1019: the era with server-to-client requests
	client.WithSamplingHandler(featureClient{})(c)
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "features-http", Version: "1"}
	req.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	if _, err := c.Initialize(t.Context(), req); err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	ctx := t.Context()
	rr := mcp.ReadResourceRequest{}
	rr.Params.URI = "fixture://static"
	if got, err := c.ReadResource(ctx, rr); err != nil || len(got.Contents) != 1 {
		t.Errorf("ReadResource over HTTP = %+v, %v", got, err)
	}
	pr := mcp.GetPromptRequest{}
	pr.Params.Name, pr.Params.Arguments = "summarize", map[string]string{"topic": "Go"}
	if got, err := c.GetPrompt(ctx, pr); err != nil || len(got.Messages) != 1 {
		t.Errorf("GetPrompt over HTTP = %+v, %v", got, err)
	}
	for _, tool := range []string{"fx__ask_model", "ask_model"} {
		res, err := callTool(ctx, c, tool, map[string]any{"text": "hi"}, nil)
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if got := resultText(res); got != "model test-model said: echo hi" {
			t.Errorf("%s over HTTP = %q (error %v)", tool, got, res.IsError)
		}
	}
}

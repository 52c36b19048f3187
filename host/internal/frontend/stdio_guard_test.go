package frontend

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/server"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
)

// serverOptionStance is what the stdio short path does about each of
// mcp-go's server options: "honoured" (the route does what mcp-go does for
// a call, and New may set it), or "unset" (New must leave it unset:
// eligible relies on its default, which TestShortPathHonoursEveryServerOption
// checks on the server New builds), or "no bearing" on a tools/call.
var serverOptionStance = map[string]string{
	"WithToolCapabilities":              "honoured: set; the route answers only calls of tools the server serves",
	"WithInstructions":                  "no bearing",
	"WithRecovery":                      "honoured: the route recovers a panic with mcp-go's text and calls the OnError hooks",
	"WithToolFilter":                    "honoured: eligible runs the same filter (listReady) and leaves filtered calls to mcp-go",
	"WithHooks":                         "honoured: OnError is called on error answers; hooks that see tools/call otherwise must be empty",
	"WithToolHandlerMiddleware":         "unset: the route would skip it (WithRecovery's own middleware is honoured)",
	"WithInputSchemaValidation":         "unset: the route does not validate against the schema (the registry does, for both routes)",
	"WithStrictInputSchemaDefault":      "unset",
	"WithOutputSchemaValidation":        "unset: the route does not validate results",
	"WithLogger":                        "unset: the route logs no request lines",
	"WithTracer":                        "unset: the route opens no spans",
	"WithPropagator":                    "unset",
	"WithMetaPropagator":                "unset",
	"WithMethodCacheHints":              "no bearing: mcp-go adds hints only to listings, discovery and reads",
	"WithCacheHints":                    "no bearing: as WithMethodCacheHints",
	"WithIcons":                         "unset: the route's 2026-07-28 serverInfo is name and version",
	"WithTitle":                         "unset: as WithIcons",
	"WithDescription":                   "unset: as WithIcons",
	"WithWebsiteURL":                    "unset: as WithIcons",
	"WithTaskCapabilities":              "unset: with tasks a tool may require task augmentation, which the route does not check",
	"WithTaskHooks":                     "no bearing: tasks are mcp-go's",
	"WithMaxConcurrentTasks":            "no bearing: tasks are mcp-go's",
	"WithLegacyServerInitiatedRequests": "no bearing: calls that may ask a person go to mcp-go",
	"WithElicitation":                   "no bearing: as WithLegacyServerInitiatedRequests",
	"WithRoots":                         "no bearing",
	"WithLogging":                       "no bearing",
	"WithCompletions":                   "no bearing",
	"WithExperimental":                  "no bearing",
	"WithExtensions":                    "no bearing",
	"WithPaginationLimit":               "no bearing",
	"WithResourceCapabilities":          "no bearing",
	"WithResourceHandlerMiddleware":     "no bearing",
	"WithResourceRecovery":              "no bearing",
	"WithResourceCompletionProvider":    "no bearing",
	"WithPromptCapabilities":            "no bearing",
	"WithPromptHandlerMiddleware":       "no bearing",
	"WithPromptFilter":                  "no bearing",
	"WithPromptCompletionProvider":      "no bearing",
}

// mcpServerFields checks each field of mcp-go's MCPServer on the server
// New builds: nil when the field has no bearing on a tools/call or the
// route does the same with it, else a check of the state the route relies
// on.
var mcpServerFields = map[string]func(v reflect.Value) string{
	"implementation": func(v reflect.Value) string {
		for i := 0; i < v.NumField(); i++ {
			if n := v.Type().Field(i).Name; n != "Name" && n != "Version" && !v.Field(i).IsZero() {
				return n + " is set: the route's serverInfo has only Name and Version"
			}
		}
		return ""
	},
	"name": func(v reflect.Value) string {
		return map[bool]string{true: "a name other than ServerName"}[v.String() != ServerName]
	},
	"taskTools":              empty("task tools"),
	"toolHandlerMiddlewares": length(1, "tool middleware besides WithRecovery's"),
	"toolFilters":            length(1, "tool filters besides listReady"),
	"capabilities": func(v reflect.Value) string {
		if v.FieldByName("tools").IsNil() {
			return "no tools capability"
		}
		if !v.FieldByName("tasks").IsNil() {
			return "tasks capability"
		}
		return ""
	},
	"hooks": func(v reflect.Value) string {
		if v.IsNil() {
			return ""
		}
		v = v.Elem()
		for _, f := range []string{"OnBeforeAny", "OnSuccess", "OnRequestInitialization", "OnBeforeCallTool", "OnAfterCallTool"} {
			if v.FieldByName(f).Len() > 0 {
				return f + " hooks: the route calls only OnError"
			}
		}
		return ""
	},
	"inputValidator":           isNil("input schema validation"),
	"outputValidator":          isNil("output schema validation"),
	"strictInputSchemaDefault": func(v reflect.Value) string { return map[bool]string{true: "strict input schemas"}[v.Bool()] },
	"tracer":                   asDefault("tracer", "a tracer"),
	"propagator":               asDefault("propagator", "a propagator"),
	"metaPropagator":           isNil("a _meta propagator"),
	"requestLogger":            isNil("a request logger"),

	// No bearing on a tools/call, or the same on the route.
	"resourcesMu": nil, "resourceMiddlewareMu": nil, "promptsMu": nil, "toolsMu": nil, "toolMiddlewareMu": nil,
	"promptMiddlewareMu": nil, "notificationHandlersMu": nil, "capabilitiesMu": nil, "toolFiltersMu": nil,
	"promptFiltersMu": nil, "tasksMu": nil,
	"version": nil, "instructions": nil, "resources": nil, "resourceTemplates": nil, "prompts": nil,
	"promptHandlers":             nil,
	"tools":                      nil, // mirrored by Frontend.names
	"resourceHandlerMiddlewares": nil, "promptHandlerMiddlewares": nil, "promptFilters": nil,
	"notificationHandlers": nil, "promptCompletionProvider": nil, "resourceCompletionProvider": nil,
	"allowServerInitiatedRequests": nil, "paginationLimit": nil, "sessions": nil, "listenSessions": nil,
	"taskHooks": nil, "tasks": nil, "expiredTasks": nil, "maxConcurrentTasks": nil, "activeTasks": nil,
	"cacheHints":      nil, // never on a tools/call result
	"inflightCancels": nil, // the route keeps its own, fed by the same notifications/cancelled
}

func empty(what string) func(reflect.Value) string {
	return func(v reflect.Value) string {
		if v.Len() > 0 {
			return what
		}
		return ""
	}
}

func length(n int, what string) func(reflect.Value) string {
	return func(v reflect.Value) string {
		if v.Len() != n {
			return what
		}
		return ""
	}
}

// defaultServer is an mcp-go server as NewMCPServer makes it.
var defaultServer = reflect.ValueOf(server.NewMCPServer("x", "1")).Elem()

// asDefault checks that an interface field holds what NewMCPServer puts
// there (a no-op tracer, say).
func asDefault(field, what string) func(reflect.Value) string {
	return func(v reflect.Value) string {
		d := defaultServer.FieldByName(field)
		if v.IsNil() != d.IsNil() || (!v.IsNil() && v.Elem().Type() != d.Elem().Type()) {
			return what
		}
		return ""
	}
}

func isNil(what string) func(reflect.Value) string {
	return func(v reflect.Value) string {
		if !v.IsNil() {
			return what
		}
		return ""
	}
}

// The stdio short path answers calls beside mcp-go's dispatcher, so it must
// honour everything the mcp-go server is configured to do for a call. This
// fails when mcp-go gains a server option or an MCPServer field that the
// list above does not cover (decide, then add it), and when New configures
// the server in a way the route relies on not happening.
func TestShortPathHonoursEveryServerOption(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/mark3labs/mcp-go").Output()
	if err != nil {
		t.Fatalf("go list mcp-go: %v", err)
	}
	dir := strings.TrimSpace(string(out)) + "/server"
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, nil, parser.SkipObjectResolution) //nolint:staticcheck // one directory, no build tags to honour
	if err != nil {
		t.Fatal(err)
	}
	var setters []string
	for _, pkg := range pkgs {
		for name, file := range pkg.Files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			for _, d := range file.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Recv != nil || !fn.Name.IsExported() || fn.Type.Results == nil || len(fn.Type.Results.List) != 1 {
					continue
				}
				if id, ok := fn.Type.Results.List[0].Type.(*ast.Ident); ok && id.Name == "ServerOption" {
					setters = append(setters, fn.Name.Name)
				}
			}
		}
	}
	if len(setters) < 10 {
		t.Fatalf("found only %d ServerOption setters in %s: the parse is wrong", len(setters), dir)
	}
	for _, s := range setters {
		if _, ok := serverOptionStance[s]; !ok {
			t.Errorf("mcp-go has a server option the stdio short path does not know: server.%s. Decide whether the route honours it (stdio.go, eligible) and list it in serverOptionStance", s)
		}
	}
	for s := range serverOptionStance {
		if !slices.Contains(setters, s) {
			t.Errorf("serverOptionStance lists server.%s, which mcp-go no longer has", s)
		}
	}

	f := New(registry.New(nil), "test", hclog.NewNullLogger())
	v := reflect.ValueOf(f.srv).Elem()
	typ := v.Type()
	for i := 0; i < typ.NumField(); i++ {
		name := typ.Field(i).Name
		check, ok := mcpServerFields[name]
		if !ok {
			t.Errorf("mcp-go's MCPServer has a field the stdio short path does not know: %s. Decide whether the route honours it and list it in mcpServerFields", name)
			continue
		}
		if check != nil {
			if why := check(v.Field(i)); why != "" {
				t.Errorf("New's server has %s (MCPServer.%s), which the stdio short path does not honour", why, name)
			}
		}
	}
	for name := range mcpServerFields {
		if _, ok := typ.FieldByName(name); !ok {
			t.Errorf("mcpServerFields lists MCPServer.%s, which mcp-go no longer has", name)
		}
	}
}

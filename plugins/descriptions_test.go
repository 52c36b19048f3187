// Package plugins_test checks what the built-ins publish against their
// source.
package plugins_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/plugins/bash"
	"github.com/switchboard-mcp/switchboard/plugins/filesystem"
	"github.com/switchboard-mcp/switchboard/plugins/git"
	"github.com/switchboard-mcp/switchboard/plugins/switchboard"
	"github.com/switchboard-mcp/switchboard/plugins/web"
	"github.com/switchboard-mcp/switchboard/sdk"
	"github.com/switchboard-mcp/switchboard/sdk/sdktest"
)

// sourceDescriptions reads every `description=` in a jsonschema struct tag
// of the built-ins' source, whole: up to the next ",key=" of a schema
// keyword (an oracle written apart from the SDK's own parser).
func sourceDescriptions(t *testing.T) []string {
	t.Helper()
	keys := []string{"minimum", "maximum", "enum", "default", "format", "pattern", "minItems", "maxItems", "minLength", "maxLength", "required", "example", "exclusiveMinimum", "exclusiveMaximum"}
	var out []string
	files, _ := filepath.Glob("*/*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			field, ok := n.(*ast.Field)
			if !ok || field.Tag == nil {
				return true
			}
			raw, _ := strconv.Unquote(field.Tag.Value)
			tag := reflect.StructTag(raw).Get("jsonschema")
			_, d, ok := strings.Cut(tag, "description=")
			if !ok {
				return true
			}
			end := len(d)
			for _, k := range keys {
				if i := strings.Index(d, ","+k+"="); i >= 0 && i < end {
					end = i
				}
			}
			out = append(out, d[:end])
			return true
		})
	}
	return out
}

// publishedDescriptions collects every property description in a schema.
func publishedDescriptions(v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		if props, ok := x["properties"].(map[string]any); ok {
			for _, p := range props {
				if pm, ok := p.(map[string]any); ok {
					if d, ok := pm["description"].(string); ok {
						*out = append(*out, d)
					}
				}
			}
		}
		for _, c := range x {
			publishedDescriptions(c, out)
		}
	case []any:
		for _, c := range x {
			publishedDescriptions(c, out)
		}
	}
}

// Tool schemas say what their authors wrote: no parameter description is
// published cut short at a comma.
func TestPublishedDescriptionsAreWhole(t *testing.T) {
	want := sourceDescriptions(t)
	withComma := 0
	for _, d := range want {
		if strings.Contains(d, ",") {
			withComma++
		}
	}
	if withComma < 5 {
		t.Fatalf("found only %d descriptions with a comma in the source; the test would prove little", withComma)
	}
	var got []string
	for _, s := range []*sdk.Server{filesystem.New(), bash.New(), git.New(), web.New(), switchboard.New()} {
		p := sdktest.StartInProcess(t, s)
		for _, tool := range p.Tools {
			var sch any
			if err := json.Unmarshal(tool.InputSchema, &sch); err != nil {
				t.Fatal(err)
			}
			publishedDescriptions(sch, &got)
		}
	}
	checked := 0
	for _, w := range want {
		for _, g := range got {
			if g == w {
				checked++
			} else if strings.HasPrefix(w, g) && strings.Contains(w[len(g):], ",") {
				t.Errorf("published %q, but the source says %q", g, w)
			}
		}
	}
	if checked < withComma/2 {
		t.Errorf("only %d of the source's descriptions were found whole in the published schemas", checked)
	}
}

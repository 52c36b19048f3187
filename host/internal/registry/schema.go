package registry

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
)

// noRemoteRefs refuses to load any schema a tool's schema refers to: input
// schemas must be self-contained, and validating must never fetch a URL.
type noRemoteRefs struct{}

func (noRemoteRefs) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema refers to %s; only self-contained schemas are supported", url)
}

// compileSchema compiles a tool's input schema (draft 2020-12 unless it
// says otherwise).
func compileSchema(name string, raw []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noRemoteRefs{})
	url := "mem:///" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

var printer = message.NewPrinter(language.English)

// validateArgs checks args against sch; the error names each failing field.
func validateArgs(tool string, sch *jsonschema.Schema, args []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return protocol.Errorf(protocol.CodeInvalidArguments, "%s: arguments are not JSON: %v", tool, err)
	}
	err = sch.Validate(inst)
	if err == nil {
		return nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return protocol.Errorf(protocol.CodeInvalidArguments, "%s: %v", tool, err)
	}
	var msgs []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			field := "/" + strings.Join(e.InstanceLocation, "/")
			if field == "/" {
				field = "(the arguments object)"
			} else {
				field = "argument " + field
			}
			msgs = append(msgs, fmt.Sprintf("%s: %s", field, e.ErrorKind.LocalizedString(printer)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(msgs) > 5 {
		msgs = append(msgs[:5], fmt.Sprintf("and %d more", len(msgs)-5))
	}
	return protocol.Errorf(protocol.CodeInvalidArguments, "%s: invalid arguments: %s (see the tool's input schema)", tool, strings.Join(msgs, "; "))
}

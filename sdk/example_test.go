package sdk_test

import (
	"fmt"

	"github.com/switchboard-mcp/switchboard/sdk"
)

// The input schema of a typed tool comes from its arguments struct:
// fields without omitempty are required, jsonschema tags describe them.
func ExampleSchemaFor() {
	type args struct {
		Path string `json:"path" jsonschema:"description=File to read"`
		Head int    `json:"head,omitempty" jsonschema:"minimum=1"`
	}
	schema, err := sdk.SchemaFor[args]()
	if err != nil {
		panic(err)
	}
	fmt.Println(string(schema))
	// Output:
	// {"properties":{"path":{"type":"string","description":"File to read"},"head":{"type":"integer","minimum":1}},"additionalProperties":false,"type":"object","required":["path"]}
}

// A failure the model should read is a result, not an error.
func ExampleErrorResult() {
	r := sdk.ErrorResult("no file %s: pass a path inside the project", "notes.txt")
	fmt.Println(r.IsError(), r.Texts())
	// Output:
	// true [no file notes.txt: pass a path inside the project]
}

package config

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/switchboard-mcp/switchboard/host/internal/builtins"
)

// pathResolver is implemented by built-in settings that hold paths, so that
// relative paths resolve against the config file's folder.
type pathResolver interface {
	ResolvePaths(resolve func(string) string)
}

// decodeBuiltin decodes a builtin block's attributes into the built-in's
// settings type (the settings types live beside each plugin and carry both
// hcl and json tags, so the block the host decodes is exactly what the
// plugin receives), resolves its paths against dir, and returns the
// settings as JSON.
func decodeBuiltin(b builtins.Builtin, body hcl.Body, dir string) ([]byte, hcl.Diagnostics) {
	v := b.NewSettings()
	diags := gohcl.DecodeBody(body, evalContext(), v)
	if diags.HasErrors() {
		return nil, diags
	}
	if pr, ok := v.(pathResolver); ok {
		pr.ResolvePaths(func(p string) string { return resolve(dir, p) })
	}
	js, err := json.Marshal(v)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot encode settings", Detail: err.Error()}}
	}
	return js, diags
}

// ctyJSON renders an HCL object value as JSON.
func ctyJSON(v cty.Value) ([]byte, error) {
	if !v.Type().IsObjectType() && !v.Type().IsMapType() {
		return nil, fmt.Errorf("got %s", v.Type().FriendlyName())
	}
	return ctyjson.Marshal(v, v.Type())
}

// ValidatePattern checks a permission pattern: "<server>.<tool>" or
// "<server>.<tool>:<pattern>", where each part may use * and ? globs.
func ValidatePattern(p string) error {
	head, _, _ := strings.Cut(p, ":")
	server, tool, ok := strings.Cut(head, ".")
	if !ok || server == "" || tool == "" {
		return fmt.Errorf("permission pattern %q must look like \"server.tool\" or \"server.tool:pattern\" (globs allowed)", p)
	}
	if _, err := filepath.Match(head, ""); err != nil {
		return fmt.Errorf("permission pattern %q: %v", p, err)
	}
	return nil
}

package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAuthBlocks(t *testing.T) {
	tests := []struct {
		name, src, want string // want: "" = valid, else part of the diagnostics
	}{
		{"tokens only", `caller "ci" { access = "read" }`, ""},
		{"jwt subject as a caller", `caller "auth0|5f3a" { default = "deny" }`, ""},
		{"issuer with resource", `auth {
  resource = "https://mcp.example.com/mcp"
  issuer "corp" { url = "https://login.example.com" }
}`, ""},
		{"issuer on loopback http", `auth {
  issuer "t" {
    url = "http://127.0.0.1:9999"
    audience = "x"
  }
}`, ""},
		{"issuer over plain http", `auth {
  issuer "t" {
    url = "http://login.example.com"
    audience = "x"
  }
}`, "must be an https URL"},
		{"issuer without audience", `auth {
  issuer "t" { url = "https://login.example.com" }
}`, "needs the audience"},
		{"bad resource", `auth { resource = "mcp.example.com" }`, "absolute URL"},
		{"bad access", `caller "ci" { access = "admin" }`, `"read" or "write"`},
		{"bad default", `caller "ci" { default = "maybe" }`, `"allow", "ask" or "deny"`},
		{"duplicate caller", "caller \"ci\" {}\ncaller \"ci\" {}", "already defined"},
		{"bad caller name", `caller "a b" {}`, "Invalid caller name"},
		{"tokens file in the project", `auth { tokens_file = "project/tokens.json" }`, "inside project_dir"},
		{"two auth blocks", "auth {}\nauth {}", "Only one auth block"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "project"), 0o755); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "config.hcl")
			if err := os.WriteFile(path, []byte("project_dir = \"project\"\ndata_dir = \"state\"\n"+tt.src+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			res := Load(path)
			if tt.want == "" {
				if res.Diags.HasErrors() {
					t.Fatalf("Load = %v, want valid", res.Diags)
				}
				if res.Config.Auth == nil || res.Config.Auth.TokensFile != filepath.Join(dir, "state", TokensFileName) {
					t.Errorf("tokens file = %+v, want data_dir/%s", res.Config.Auth, TokensFileName)
				}
				return
			}
			if !res.Diags.HasErrors() || !strings.Contains(res.Diags.Error(), tt.want) {
				t.Errorf("Load = %v, want an error naming %q", res.Diags, tt.want)
			}
		})
	}
}

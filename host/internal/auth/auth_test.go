package auth_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/host/internal/auth"
	"github.com/switchboard-mcp/switchboard/host/internal/auth/authtest"
	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
)

// load writes a config with extra in a fresh folder and loads it.
func load(t *testing.T, extra string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "project"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.hcl")
	src := "project_dir = \"project\"\ndata_dir = \"state\"\n" + extra
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	res := config.Load(path)
	if res.Diags.HasErrors() {
		t.Fatalf("config: %v", res.Diags)
	}
	return res.Config
}

func request(token string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:1/mcp", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

func TestStaticTokens(t *testing.T) {
	cfg := load(t, `caller "ci" { deny = ["bash.*"] }`)
	v, err := auth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if v.Enabled() {
		t.Fatal("Enabled with no token and no issuer")
	}
	ci, err := auth.NewToken(cfg.Auth.TokensFile, "ci", "read")
	if err != nil {
		t.Fatal(err)
	}
	dev, err := auth.NewToken(cfg.Auth.TokensFile, "dev", "write")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := auth.NewToken(cfg.Auth.TokensFile, "ci", "write"); err == nil || !strings.Contains(err.Error(), "revoke it first") {
		t.Errorf("a second token named ci: %v, want refused", err)
	}
	// Only hashes are stored, in a file only this user may read.
	b, err := os.ReadFile(cfg.Auth.TokensFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), ci) || strings.Contains(string(b), dev) || !strings.Contains(string(b), auth.Hash(ci)) {
		t.Errorf("tokens file holds a secret, or not its hash:\n%s", b)
	}
	if fi, _ := os.Stat(cfg.Auth.TokensFile); fi.Mode().Perm() != 0o600 {
		t.Errorf("tokens file mode %v, want 0600", fi.Mode().Perm())
	}
	if !v.Enabled() {
		t.Fatal("not Enabled once a token exists (the file is re-read)")
	}
	c, fail := v.Authenticate(request(ci))
	if fail != nil || c.Name != "ci" || c.Access != registry.AccessRead || len(c.Deny) != 1 {
		t.Errorf("Authenticate(ci) = %+v, %v; want caller ci, read, with its caller block's deny", c, fail)
	}
	c, fail = v.Authenticate(request(dev))
	if fail != nil || c.Name != "dev" || c.Access != 0 {
		t.Errorf("Authenticate(dev) = %+v, %v; want dev with no narrowing", c, fail)
	}
	for name, tok := range map[string]string{"none": "", "unknown": auth.TokenPrefix + "nope", "tampered": ci + "x"} {
		if _, fail := v.Authenticate(request(tok)); fail == nil || fail.Status != http.StatusUnauthorized {
			t.Errorf("Authenticate(%s) = %v, want 401", name, fail)
		}
	}
	if err := auth.RevokeToken(cfg.Auth.TokensFile, "dev"); err != nil {
		t.Fatal(err)
	}
	if _, fail := v.Authenticate(request(dev)); fail == nil || !strings.Contains(fail.Description, "revoked") {
		t.Errorf("a revoked token: %v, want refused", fail)
	}
	if got := v.Names(); strings.Join(got, ",") != "ci" {
		t.Errorf("Names = %v, want [ci]", got)
	}
}

// TestTokensFileOthersCanWriteIsRefused: a tokens file another user could
// write could admit anyone; validate and serve refuse it.
func TestTokensFileOthersCanWriteIsRefused(t *testing.T) {
	cfg := load(t, "")
	if _, err := auth.NewToken(cfg.Auth.TokensFile, "ci", "read"); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(cfg.Auth.TokensFile, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.New(cfg); err == nil {
		t.Error("New accepted a world-writable tokens file")
	}
	if d := auth.Check(cfg); !d.HasErrors() {
		t.Error("Check accepted a world-writable tokens file")
	}
}

func TestJWT(t *testing.T) {
	is := authtest.NewIssuer(t)
	const aud = "https://mcp.example.test/mcp"
	for _, discovery := range []bool{false, true} {
		jwks := "jwks_url = \"" + is.JWKSURL + "\""
		if discovery {
			jwks = ""
		}
		cfg := load(t, `auth {
  resource = "`+aud+`"
  issuer "test" {
    url = "`+is.URL+`"
    `+jwks+`
    required_scopes = ["mcp:tools"]
  }
}
caller "alice" { access = "read" }
`)
		v, err := auth.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !v.Enabled() {
			t.Fatal("not Enabled with an issuer")
		}
		good := authtest.Claims{Subject: "alice", Audience: []string{aud}, Scope: "openid mcp:tools"}
		tests := []struct {
			name   string
			token  string
			status int
			want   string
		}{
			{"valid", is.Token(t, good), 0, ""},
			{"wrong audience", is.Token(t, authtest.Claims{Subject: "alice", Audience: []string{"https://other.example/mcp"}, Scope: "mcp:tools"}), 401, "audience must include"},
			{"expired", is.Token(t, authtest.Claims{Subject: "alice", Audience: []string{aud}, Scope: "mcp:tools", Expiry: time.Now().Add(-time.Minute)}), 401, "expired"},
			{"wrong key", is.OtherKeyToken(t, good), 401, "refused"},
			{"unknown issuer", is.Token(t, authtest.Claims{Issuer: "https://evil.example", Subject: "alice", Audience: []string{aud}, Scope: "mcp:tools"}), 401, "no issuer block"},
			{"missing scope", is.Token(t, authtest.Claims{Subject: "alice", Audience: []string{aud}, Scope: "openid"}), 403, "mcp:tools"},
			{"no subject", is.Token(t, authtest.Claims{Audience: []string{aud}, Scope: "mcp:tools"}), 401, "no subject"},
			{"not a JWT", "garbage", 401, "neither"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				c, fail := v.Authenticate(request(tt.token))
				if tt.status == 0 {
					if fail != nil || c.Name != "test/alice" || c.Access != registry.AccessRead {
						t.Fatalf("Authenticate = %+v, %v; want test/alice (issuer/subject: never a static token's caller), narrowed to read by its caller block alice", c, fail)
					}
					return
				}
				if fail == nil || fail.Status != tt.status || !strings.Contains(fail.Description, tt.want) {
					t.Errorf("Authenticate = %+v, %+v; want %d naming %q", c, fail, tt.status, tt.want)
				}
			})
		}
		// The metadata names the resource and the issuer.
		rec := httptest.NewRecorder()
		v.MetadataHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1:1"+auth.MetadataPath+"/mcp", nil))
		var m auth.Metadata
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil || m.Resource != aud || len(m.AuthorizationServers) != 1 || m.AuthorizationServers[0] != is.URL {
			t.Errorf("metadata = %s (%v)", rec.Body, err)
		}
		if got := v.MetadataURL(request("")); got != "https://mcp.example.test"+auth.MetadataPath+"/mcp" {
			t.Errorf("MetadataURL = %q", got)
		}
	}
}

// TestIssuerNeedsAudience: an issuer without an audience (no resource, no
// audience) is a config error, never "accept any audience".
func TestIssuerNeedsAudience(t *testing.T) {
	dir := t.TempDir()
	_ = os.Mkdir(filepath.Join(dir, "p"), 0o755)
	path := filepath.Join(dir, "c.hcl")
	_ = os.WriteFile(path, []byte("project_dir = \"p\"\ndata_dir = \"s\"\nauth {\n issuer \"x\" { url = \"https://login.example\" }\n}\n"), 0o600)
	res := config.Load(path)
	if !res.Diags.HasErrors() || !strings.Contains(res.Diags.Error(), "needs the audience") {
		t.Errorf("Load = %v, want the missing audience named", res.Diags)
	}
}

// TestJWTSubjectIsNotATokensCaller: a JWT whose subject is a static token's
// name is another caller (found from outside: it took over the token's
// "always" answers, its calls and its open sessions).
func TestJWTSubjectIsNotATokensCaller(t *testing.T) {
	is := authtest.NewIssuer(t)
	const aud = "https://mcp.example.test/mcp"
	cfg := load(t, `auth {
  resource = "`+aud+`"
  issuer "test" {
    url = "`+is.URL+`"
    jwks_url = "`+is.JWKSURL+`"
  }
}
`)
	secret, err := auth.NewToken(cfg.Auth.TokensFile, "dave", "write")
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tok, fail := v.Authenticate(request(secret))
	if fail != nil {
		t.Fatal(fail)
	}
	jwt, fail := v.Authenticate(request(is.Token(t, authtest.Claims{Subject: "dave", Audience: []string{aud}})))
	if fail != nil {
		t.Fatal(fail)
	}
	if tok.Name != "dave" || jwt.Name == tok.Name || jwt.Owner() == tok.Owner() {
		t.Errorf("token caller %q (owner %q), JWT caller %q (owner %q): want two callers", tok.Name, tok.Owner(), jwt.Name, jwt.Owner())
	}
}

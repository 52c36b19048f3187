package config

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// TokensFileName is the static tokens file's default name, in data_dir.
const TokensFileName = "tokens.json"

// Auth is the `auth {}` block: who may call the HTTP front end. Static
// tokens live in TokensFile (written by `switchboard token new`); JWT
// access tokens are checked against Issuers. Once a token exists or an
// issuer is configured, every HTTP request needs a bearer token.
type Auth struct {
	// TokensFile holds the static tokens' names and SHA-256 hashes
	// (default data_dir/tokens.json). It is part of the control plane.
	TokensFile string
	// Resource is the host's canonical URL as clients reach it
	// ("https://mcp.example.com/mcp"): the resource named in the protected
	// resource metadata and the default audience of JWTs (RFC 8707).
	Resource string
	// Issuers are the OAuth 2.1 authorization servers whose JWT access
	// tokens the host accepts.
	Issuers []*Issuer
	Range   hcl.Range
}

// Issuer is an `issuer "NAME" {}` block inside auth.
type Issuer struct {
	Name string
	// URL is the issuer (the token's iss claim, and where OpenID
	// discovery finds the JWKS when JWKSURL is not set).
	URL string
	// JWKSURL is where the issuer's signing keys are served.
	JWKSURL string
	// Audience is what the token's aud must contain (default
	// Auth.Resource).
	Audience string
	// RequiredScopes must all be in the token's scope (or scp) claim.
	RequiredScopes []string
	Range          hcl.Range
}

// CallerRules is a `caller "NAME" {}` block: the rules of one
// authenticated caller (a static token's name, or a JWT's subject),
// layered on the permissions block's: a caller can be narrowed, never
// widened.
type CallerRules struct {
	Name string
	// Access is "read" or "write" ("" = the config's).
	Access string
	// Allow, Deny and Default are judged like the permissions block's,
	// after it; Default "" narrows nothing.
	Allow, Deny []string
	Default     string
	Range       hcl.Range
}

// TLS is the `tls {}` block: the HTTP front end serves HTTPS with CertFile
// and KeyFile, and with ClientCAFile requires client certificates signed
// by one of its CAs (mTLS).
type TLS struct {
	CertFile, KeyFile, ClientCAFile string
	Range                           hcl.Range
}

type authSchema struct {
	TokensFile *string        `hcl:"tokens_file,optional"`
	Resource   *string        `hcl:"resource,optional"`
	Issuers    []issuerSchema `hcl:"issuer,block"`
	Range      hcl.Range      `hcl:",def_range"`
}

type issuerSchema struct {
	Name           string    `hcl:"name,label"`
	URL            string    `hcl:"url"`
	JWKSURL        *string   `hcl:"jwks_url,optional"`
	Audience       *string   `hcl:"audience,optional"`
	RequiredScopes []string  `hcl:"required_scopes,optional"`
	Range          hcl.Range `hcl:",def_range"`
}

type callerSchema struct {
	Name    string    `hcl:"name,label"`
	Access  *string   `hcl:"access,optional"`
	Allow   []string  `hcl:"allow,optional"`
	Deny    []string  `hcl:"deny,optional"`
	Default *string   `hcl:"default,optional"`
	Range   hcl.Range `hcl:",def_range"`
}

type tlsSchema struct {
	CertFile     string    `hcl:"cert_file"`
	KeyFile      string    `hcl:"key_file"`
	ClientCAFile *string   `hcl:"client_ca_file,optional"`
	Range        hcl.Range `hcl:",def_range"`
}

// ValidTokenName reports whether name may be a static token's name: a
// letter or digit, then at most 127 of letters, digits and _ . @ : -.
func ValidTokenName(name string) bool {
	return name != "" && isAlnum(name[0]) && nameOf(name, "_.@:-", 128)
}

// ValidCallerName reports whether name may be a caller block's name: a
// token's name, or a JWT subject as issuers write them ("auth0|5f…",
// "user@example.com", a UUID): 1 to 256 of letters, digits and
// _ . @ : | + / = -.
func ValidCallerName(name string) bool {
	return name != "" && nameOf(name, "_.@:|+/=-", 256)
}

// nameOf reports whether s has at most limit bytes, each an ASCII letter
// or digit or one of extra. (Checked by hand, not by a regular expression:
// a bounded repetition compiles to as many copies, and package-level ones
// are compiled at every start of every command.)
func nameOf(s, extra string, limit int) bool {
	if len(s) > limit {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) && strings.IndexByte(extra, s[i]) < 0 {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// auth reads the auth, caller and tls blocks (after folders: the tokens
// file defaults into data_dir).
func (b *builder) auth(fs *fileSchema) {
	a := &Auth{TokensFile: filepath.Join(b.cfg.DataDir, TokensFileName)}
	b.cfg.Auth = a
	if len(fs.Auth) > 1 {
		b.errAt(fs.Auth[1].Range, "Duplicate auth block", "Only one auth block is allowed; merge them.")
	}
	if len(fs.Auth) > 0 {
		as := fs.Auth[0]
		a.Range = as.Range
		if as.TokensFile != nil {
			a.TokensFile = resolve(b.dir, *as.TokensFile)
			if within(a.TokensFile, b.cfg.ProjectDir) {
				b.errAt(b.in(as.Range, "tokens_file"), "tokens_file is inside project_dir", fmt.Sprintf("tokens_file %s lies inside project_dir %s, where a tool could add a token of its own. Put it elsewhere or leave it unset (data_dir/%s).", a.TokensFile, b.cfg.ProjectDir, TokensFileName))
			}
		}
		if as.Resource != nil {
			a.Resource = *as.Resource
			if u, err := url.Parse(a.Resource); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" {
				b.errAt(b.in(as.Range, "resource"), "Invalid auth resource", fmt.Sprintf("resource = %q must be the absolute URL clients use to reach the host's MCP endpoint, such as \"https://mcp.example.com/mcp\".", a.Resource))
			}
		}
		for _, is := range as.Issuers {
			if prev, dup := b.claim("issuer", is.Name, is.Range); dup {
				b.errAt(is.Range, "Duplicate issuer", fmt.Sprintf("issuer %q is already defined at %s.", is.Name, prev))
				continue
			}
			iss := &Issuer{Name: is.Name, URL: is.URL, RequiredScopes: is.RequiredScopes, Audience: a.Resource, Range: is.Range}
			if is.JWKSURL != nil {
				iss.JWKSURL = *is.JWKSURL
			}
			if is.Audience != nil {
				iss.Audience = *is.Audience
			}
			for _, f := range []struct{ name, v string }{{"url", iss.URL}, {"jwks_url", iss.JWKSURL}} {
				if f.v == "" && f.name == "jwks_url" {
					continue
				}
				if u, err := url.Parse(f.v); err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && isLoopbackHost(u.Hostname()))) {
					b.errAt(b.in(is.Range, f.name), "Invalid issuer "+f.name, fmt.Sprintf("%s = %q must be an https URL (http only on loopback, for tests).", f.name, f.v))
				}
			}
			if iss.Audience == "" {
				b.errAt(is.Range, "Issuer without an audience", fmt.Sprintf("issuer %q needs the audience its tokens must carry (RFC 8707): set resource = \"https://HOST/mcp\" in the auth block (the URL clients use), or audience in this block.", is.Name))
			}
			a.Issuers = append(a.Issuers, iss)
		}
	}
	for _, cs := range fs.Callers {
		if !ValidCallerName(cs.Name) {
			b.errAt(cs.Range, "Invalid caller name", fmt.Sprintf("caller %q: a caller is named like its token or its JWT subject: letters, digits and _ . @ : | + / = - (at most 256).", cs.Name))
		}
		if prev, dup := b.claim("caller", cs.Name, cs.Range); dup {
			b.errAt(cs.Range, "Duplicate caller", fmt.Sprintf("caller %q is already defined at %s.", cs.Name, prev))
			continue
		}
		c := &CallerRules{Name: cs.Name, Allow: cs.Allow, Deny: cs.Deny, Range: cs.Range}
		if cs.Access != nil {
			c.Access = *cs.Access
			if !slices.Contains([]string{"read", "write"}, c.Access) {
				b.errAt(b.in(cs.Range, "access"), "Invalid caller access", fmt.Sprintf("access = %q must be \"read\" or \"write\".", c.Access))
			}
		}
		if cs.Default != nil {
			c.Default = *cs.Default
			if !slices.Contains([]string{"allow", "ask", "deny"}, c.Default) {
				b.errAt(b.in(cs.Range, "default"), "Invalid caller default", fmt.Sprintf("default = %q must be \"allow\", \"ask\" or \"deny\".", c.Default))
			}
		}
		for _, list := range []struct {
			name string
			pats []string
		}{{"allow", c.Allow}, {"deny", c.Deny}} {
			for _, pat := range list.pats {
				if err := ValidatePattern(pat); err != nil {
					b.errAt(b.in(cs.Range, list.name), "Invalid permission pattern", err.Error())
				}
			}
		}
		b.cfg.Callers = append(b.cfg.Callers, c)
	}
	if len(fs.TLS) > 1 {
		b.errAt(fs.TLS[1].Range, "Duplicate tls block", "Only one tls block is allowed.")
	}
	if len(fs.TLS) > 0 {
		ts := fs.TLS[0]
		t := &TLS{CertFile: resolve(b.dir, ts.CertFile), KeyFile: resolve(b.dir, ts.KeyFile), Range: ts.Range}
		if ts.ClientCAFile != nil {
			t.ClientCAFile = resolve(b.dir, *ts.ClientCAFile)
		}
		b.cfg.TLS = t
	}
}

// Caller returns the caller block named name, or nil.
func (c *Config) Caller(name string) *CallerRules {
	for _, cr := range c.Callers {
		if cr.Name == name {
			return cr
		}
	}
	return nil
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

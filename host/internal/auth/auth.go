// Package auth decides who is calling the HTTP front end. A Verifier is
// built from the config (New) and replaced parts on reload (Update); the
// front end puts Require in front of every handler that needs a caller,
// and serves MetadataHandler at MetadataPath.
//
// Two kinds of credential are accepted as bearer tokens:
//
//   - static tokens ("sbt_…"), created by `switchboard token new`, whose
//     names and SHA-256 hashes live in the tokens file (config.Auth); the
//     file is re-read when it changes, so a revoked token stops working at
//     its next request;
//   - JWT access tokens of the issuers in the auth block (OAuth 2.1: the
//     host is a resource server), checked with go-oidc against the
//     issuer's JWKS: signature, issuer, audience (RFC 8707), expiry, and
//     the required scopes.
//
// Once a token exists or an issuer is configured, every request needs
// one: a request without gets 401 and a WWW-Authenticate header naming the
// protected resource metadata (RFC 9728). The caller found (a token's name,
// or a JWT's subject) goes into the request's context as a
// *registry.Caller with its own rules (the caller blocks), so the
// registry narrows its calls and everything a caller owns is kept apart.
package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
)

// MetadataPath is where the protected resource metadata (RFC 9728) is
// served; the resource's own path follows it ("/.well-known/
// oauth-protected-resource/mcp").
const MetadataPath = "/.well-known/oauth-protected-resource"

// signingAlgs are the JWT algorithms accepted (never "none", never HMAC:
// an issuer's public keys cannot check a shared-secret signature).
var signingAlgs = []string{
	oidc.RS256, oidc.RS384, oidc.RS512, oidc.ES256, oidc.ES384, oidc.ES512,
	oidc.PS256, oidc.PS384, oidc.PS512, oidc.EdDSA,
}

// Verifier checks bearer tokens. It is safe for concurrent use.
type Verifier struct {
	// Endpoint is the MCP endpoint's path, for the default resource URL
	// ("/mcp").
	Endpoint string

	mu       sync.RWMutex
	resource string
	issuers  []*issuer
	callers  map[string]*config.CallerRules
	source   string // the config file's name, for messages
	path     string // the tokens file

	tmu    sync.Mutex
	tokens []Token
	tokErr error
	stamp  stamp
}

// stamp tells whether the tokens file changed since it was read.
type stamp struct {
	mod  time.Time
	size int64
	ok   bool
}

// New builds the Verifier of cfg; it fails when the tokens file cannot be
// used (`switchboard validate` and serve both call it).
func New(cfg *config.Config) (*Verifier, error) {
	v := &Verifier{Endpoint: "/mcp"}
	if err := v.Update(cfg); err != nil {
		return nil, err
	}
	return v, nil
}

// Update takes cfg's auth settings and caller blocks (a reload). On error
// the Verifier keeps its previous settings.
func (v *Verifier) Update(cfg *config.Config) error {
	a := cfg.Auth
	if a == nil {
		a = &config.Auth{TokensFile: filepath.Join(cfg.DataDir, config.TokensFileName)}
	}
	tokens, err := LoadTokens(a.TokensFile)
	if err != nil {
		return err
	}
	callers := map[string]*config.CallerRules{}
	for _, c := range cfg.Callers {
		callers[c.Name] = c
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	old := map[string]*issuer{}
	for _, is := range v.issuers {
		old[is.key()] = is
	}
	var issuers []*issuer
	for _, ic := range a.Issuers {
		is := &issuer{cfg: ic}
		if prev := old[is.key()]; prev != nil {
			is = prev // keep its fetched keys
		}
		issuers = append(issuers, is)
	}
	v.resource, v.issuers, v.callers, v.source = a.Resource, issuers, callers, filepath.Base(cfg.File)
	v.tmu.Lock()
	v.path, v.tokens, v.tokErr, v.stamp = a.TokensFile, tokens, nil, statOf(a.TokensFile)
	v.tmu.Unlock()
	return nil
}

func statOf(path string) stamp {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{}
	}
	return stamp{mod: fi.ModTime(), size: fi.Size(), ok: true}
}

// currentTokens returns the tokens file's tokens, re-read when the file
// changed. A file that became unusable admits no token until it is fixed.
func (v *Verifier) currentTokens() ([]Token, error) {
	v.tmu.Lock()
	defer v.tmu.Unlock()
	if st := statOf(v.path); st != v.stamp {
		v.tokens, v.tokErr = LoadTokens(v.path)
		v.stamp = st
	}
	return v.tokens, v.tokErr
}

// Enabled reports whether requests need a token: a token exists or an
// issuer is configured.
func (v *Verifier) Enabled() bool {
	if v == nil {
		return false
	}
	v.mu.RLock()
	n := len(v.issuers)
	v.mu.RUnlock()
	tokens, err := v.currentTokens()
	return n > 0 || len(tokens) > 0 || err != nil
}

// Names are the callers the config knows by name (static tokens and caller
// blocks), sorted: the bounded set a metric label may take.
func (v *Verifier) Names() []string {
	if v == nil {
		return nil
	}
	tokens, _ := v.currentTokens()
	v.mu.RLock()
	defer v.mu.RUnlock()
	var names []string
	for _, t := range tokens {
		names = append(names, t.Name)
	}
	for n := range v.callers {
		names = append(names, n)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Error is why a request was not authenticated: the HTTP status, the
// RFC 6750 error code ("" when no token was sent) and a description that
// says what was wrong and what to do.
type Error struct {
	Status      int
	Code        string // invalid_request, invalid_token, insufficient_scope
	Description string
	Scope       string // the scopes needed, for insufficient_scope
}

func (f *Error) Error() string { return f.Description }

// Authenticate finds the caller of r, or says why there is none.
func (v *Verifier) Authenticate(r *http.Request) (*registry.Caller, *Error) {
	h := r.Header.Get("Authorization")
	scheme, cred, _ := strings.Cut(h, " ")
	cred = strings.TrimSpace(cred)
	if h == "" {
		return nil, &Error{Status: http.StatusUnauthorized, Description: "this host requires a bearer token: send Authorization: Bearer TOKEN (an operator creates one with `switchboard token new NAME`, or get an access token from the authorization server named in the resource metadata)"}
	}
	if !strings.EqualFold(scheme, "Bearer") || cred == "" {
		return nil, &Error{Status: http.StatusUnauthorized, Code: "invalid_request", Description: "the Authorization header must be \"Bearer TOKEN\""}
	}
	if strings.HasPrefix(cred, TokenPrefix) {
		tokens, err := v.currentTokens()
		if err != nil {
			return nil, &Error{Status: http.StatusUnauthorized, Code: "invalid_token", Description: "the host's tokens file cannot be read, so no static token is accepted until an operator fixes it (`switchboard validate` says why)"}
		}
		t, ok := match(tokens, cred)
		if !ok {
			return nil, &Error{Status: http.StatusUnauthorized, Code: "invalid_token", Description: "unknown or revoked token; ask an operator for a new one (`switchboard token new NAME`)"}
		}
		return v.caller(t.Name, t.Name, t.Access, fmt.Sprintf("token %q", t.Name)), nil
	}
	return v.authenticateJWT(r.Context(), cred)
}

// caller is the *registry.Caller named name: access from its credential
// ("read" narrows), then the rules of its caller block (the one labelled
// name, else the one labelled block).
//
// A static token's caller is named as the token; a JWT's is
// "ISSUER/SUBJECT" (its issuer block's name, then its subject): token names
// have no "/", so neither a JWT nor another issuer's subject can be taken
// for a token's caller, whose jobs, decisions, calls and sessions are its
// own (found from outside: a JWT with the subject "dave" acted as the
// static token dave, with its "always" answers and open sessions). A
// caller block labelled with the bare subject still applies to the JWT
// (its rules can only narrow).
func (v *Verifier) caller(name, block, access, cred string) *registry.Caller {
	v.mu.RLock()
	defer v.mu.RUnlock()
	c := &registry.Caller{Name: name, Source: cred}
	if access == "read" {
		c.Access = registry.AccessRead
	}
	cr, label := v.callers[name], name
	if cr == nil {
		cr, label = v.callers[block], block
	}
	if cr != nil {
		c.Source = fmt.Sprintf("caller %q in %s", label, v.source)
		if cr.Access == "read" {
			c.Access = registry.AccessRead
		}
		c.Allow, c.Deny = cr.Allow, cr.Deny
		if cr.Default != "" {
			c.Default, _ = registry.ParseVerdict(cr.Default)
		}
	}
	return c
}

// issuer is one issuer block with its verifier, made at first use (its
// discovery document may be fetched then) and kept.
type issuer struct {
	cfg *config.Issuer

	mu  sync.Mutex
	ver *oidc.IDTokenVerifier
}

// key identifies what the verifier depends on, so a reload that changed
// nothing keeps it (and its keys).
func (is *issuer) key() string {
	return strings.Join([]string{is.cfg.URL, is.cfg.JWKSURL, is.cfg.Audience}, "\x00")
}

func (is *issuer) verifier(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.ver != nil {
		return is.ver, nil
	}
	conf := &oidc.Config{ClientID: is.cfg.Audience, SupportedSigningAlgs: signingAlgs}
	if is.cfg.JWKSURL != "" {
		is.ver = oidc.NewVerifier(is.cfg.URL, oidc.NewRemoteKeySet(context.Background(), is.cfg.JWKSURL), conf)
		return is.ver, nil
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(dctx, is.cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("issuer %q: discovery failed (%v); set jwks_url in its block", is.cfg.Name, err)
	}
	is.ver = p.VerifierContext(context.Background(), conf)
	return is.ver, nil
}

// authenticateJWT checks a JWT access token against the issuer its iss
// claim names.
func (v *Verifier) authenticateJWT(ctx context.Context, raw string) (*registry.Caller, *Error) {
	invalid := func(format string, args ...any) *Error {
		return &Error{Status: http.StatusUnauthorized, Code: "invalid_token", Description: fmt.Sprintf(format, args...)}
	}
	algs := make([]jose.SignatureAlgorithm, len(signingAlgs))
	for i, a := range signingAlgs {
		algs[i] = jose.SignatureAlgorithm(a)
	}
	tok, err := jwt.ParseSigned(raw, algs)
	if err != nil {
		return nil, invalid("the bearer token is neither a static token of this host nor a signed JWT (%v)", err)
	}
	var unverified struct {
		Issuer string `json:"iss"`
	}
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return nil, invalid("the JWT's claims cannot be read: %v", err)
	}
	v.mu.RLock()
	var is *issuer
	for _, cand := range v.issuers {
		if cand.cfg.URL == unverified.Issuer {
			is = cand
		}
	}
	v.mu.RUnlock()
	if is == nil {
		return nil, invalid("the JWT was issued by %q, which no issuer block of this host names", unverified.Issuer)
	}
	ver, err := is.verifier(ctx)
	if err != nil {
		return nil, invalid("%v", err)
	}
	idt, err := ver.Verify(ctx, raw)
	if err != nil {
		var exp *oidc.TokenExpiredError
		switch {
		case errors.As(err, &exp):
			return nil, invalid("the JWT expired at %s; get a new access token", exp.Expiry.UTC().Format(time.RFC3339))
		case strings.Contains(err.Error(), "audience"):
			return nil, invalid("the JWT is not for this resource: its audience must include %q (RFC 8707: request the token with resource=%s)", is.cfg.Audience, is.cfg.Audience)
		}
		return nil, invalid("the JWT was refused: %v", err)
	}
	if idt.Subject == "" {
		return nil, invalid("the JWT has no subject (sub), so the host cannot tell who is calling")
	}
	var claims struct {
		Scope string          `json:"scope"`
		Scp   json.RawMessage `json:"scp"`
	}
	_ = idt.Claims(&claims)
	have := strings.Fields(claims.Scope)
	var scp []string
	if json.Unmarshal(claims.Scp, &scp) == nil {
		have = append(have, scp...)
	} else {
		var one string
		if json.Unmarshal(claims.Scp, &one) == nil {
			have = append(have, strings.Fields(one)...)
		}
	}
	var missing []string
	for _, s := range is.cfg.RequiredScopes {
		if !slices.Contains(have, s) {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		return nil, &Error{
			Status: http.StatusForbidden, Code: "insufficient_scope", Scope: strings.Join(is.cfg.RequiredScopes, " "),
			Description: fmt.Sprintf("the JWT lacks the scope(s) %s that issuer %q requires; request a token with scope=%q", strings.Join(missing, ", "), is.cfg.Name, strings.Join(is.cfg.RequiredScopes, " ")),
		}
	}
	return v.caller(is.cfg.Name+"/"+idt.Subject, idt.Subject, "", fmt.Sprintf("subject %q of issuer %q", idt.Subject, is.cfg.Name)), nil
}

// resourceFor is the canonical URL of the resource r reached: the auth
// block's resource, else the address the request came in on (the
// listener's own, never the Host header a client chose: found from
// outside, a forged Host sent clients to another server's metadata).
func (v *Verifier) resourceFor(r *http.Request) string {
	v.mu.RLock()
	res := v.resource
	v.mu.RUnlock()
	if res != "" {
		return res
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	host := r.Host
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		host = a.String()
	}
	return scheme + "://" + host + v.Endpoint
}

// MetadataURL is where the protected resource metadata of the resource r
// reached is served (RFC 9728 §3.1: the well-known path, then the
// resource's path).
func (v *Verifier) MetadataURL(r *http.Request) string {
	res := v.resourceFor(r)
	scheme, rest, _ := strings.Cut(res, "://")
	host, path, _ := strings.Cut(rest, "/")
	u := scheme + "://" + host + MetadataPath
	if path != "" {
		u += "/" + path
	}
	return u
}

// Require lets a request through to next only with a valid token (when
// Enabled), with its caller in the context (registry.WithCaller); others
// get 401 (or 403 for missing scopes) and a WWW-Authenticate header
// naming the resource metadata.
func (v *Verifier) Require(next http.Handler) http.Handler {
	if v == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !v.Enabled() {
			next.ServeHTTP(w, r)
			return
		}
		c, fail := v.Authenticate(r)
		if fail != nil {
			challenge := fmt.Sprintf("Bearer resource_metadata=%q", v.MetadataURL(r))
			if fail.Code != "" {
				challenge += fmt.Sprintf(", error=%q, error_description=%q", fail.Code, strings.ReplaceAll(fail.Description, `"`, "'"))
			}
			if fail.Scope != "" {
				challenge += fmt.Sprintf(", scope=%q", fail.Scope)
			}
			w.Header().Set("WWW-Authenticate", challenge)
			http.Error(w, http.StatusText(fail.Status)+": "+fail.Description, fail.Status)
			return
		}
		next.ServeHTTP(w, r.WithContext(registry.WithCaller(r.Context(), c)))
	})
}

// Metadata is the protected resource metadata document (RFC 9728).
type Metadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

// MetadataHandler serves the protected resource metadata (GET, no token
// needed) at MetadataPath and below it.
func (v *Verifier) MetadataHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "Method Not Allowed: GET the metadata", http.StatusMethodNotAllowed)
			return
		}
		m := Metadata{Resource: v.resourceFor(r), BearerMethodsSupported: []string{"header"}, ResourceName: "Switchboard"}
		v.mu.RLock()
		for _, is := range v.issuers {
			m.AuthorizationServers = append(m.AuthorizationServers, is.cfg.URL)
			for _, s := range is.cfg.RequiredScopes {
				if !slices.Contains(m.ScopesSupported, s) {
					m.ScopesSupported = append(m.ScopesSupported, s)
				}
			}
		}
		v.mu.RUnlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=300")
		_ = json.NewEncoder(w).Encode(m)
	})
}

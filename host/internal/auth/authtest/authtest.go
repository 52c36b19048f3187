// Package authtest is a real OAuth 2.1 token issuer for tests: an HTTP
// server on 127.0.0.1 that serves an OpenID discovery document and its
// JWKS, and signs JWT access tokens with a key generated for the test.
package authtest

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Issuer serves its keys until the test ends.
type Issuer struct {
	// URL is the issuer (the iss of its tokens); its discovery document
	// is at URL/.well-known/openid-configuration.
	URL string
	// JWKSURL is where its public keys are served.
	JWKSURL string

	key *rsa.PrivateKey
}

// Claims are a token's claims; zero fields are left out, except that
// Issuer defaults to the issuer's URL and Expiry to an hour from now.
type Claims struct {
	Issuer   string
	Subject  string
	Audience []string
	Expiry   time.Time
	Scope    string
}

// NewIssuer starts an issuer with a fresh 2048-bit RSA key.
func NewIssuer(t testing.TB) *Issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &Issuer{key: key}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	is.URL, is.JWKSURL = srv.URL, srv.URL+"/jwks"
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": is.URL, "jwks_uri": is.JWKSURL,
			"authorization_endpoint": is.URL + "/authorize", "token_endpoint": is.URL + "/token",
			"id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "test-key", Algorithm: "RS256", Use: "sig"}}})
	})
	return is
}

// Token signs c with the issuer's key.
func (is *Issuer) Token(t testing.TB, c Claims) string {
	t.Helper()
	return SignWith(t, is.key, is.URL, c)
}

// OtherKeyToken signs c, claiming to be this issuer, with a key the
// issuer does not serve (under the kid of the one it serves).
func (is *Issuer) OtherKeyToken(t testing.TB, c Claims) string {
	t.Helper()
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return SignWith(t, other, is.URL, c)
}

// SignWith signs c with key; the issuer is iss unless c names one.
func SignWith(t testing.TB, key *rsa.PrivateKey, iss string, c Claims) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: "test-key"}},
		(&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Issuer == "" {
		c.Issuer = iss
	}
	if c.Expiry.IsZero() {
		c.Expiry = time.Now().Add(time.Hour)
	}
	std := jwt.Claims{
		Issuer: c.Issuer, Subject: c.Subject, Audience: jwt.Audience(c.Audience),
		Expiry: jwt.NewNumericDate(c.Expiry), IssuedAt: jwt.NewNumericDate(time.Now().Add(-time.Minute)),
	}
	extra := map[string]any{}
	if c.Scope != "" {
		extra["scope"] = c.Scope
	}
	raw, err := jwt.Signed(signer).Claims(std).Claims(extra).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

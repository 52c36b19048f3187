package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/strictmode"
)

// TokenPrefix starts every static token, so a token is recognisable in a
// leaked log or a secret scanner, and never mistaken for a JWT.
const TokenPrefix = "sbt_"

// Token is one static token as the tokens file keeps it: its name and the
// SHA-256 of its secret, never the secret. A token is 256 random bits, so
// a plain hash is enough (no password hashing: nothing to guess).
type Token struct {
	Name    string    `json:"name"`
	SHA256  string    `json:"sha256"`
	Access  string    `json:"access,omitempty"` // "read" or "write" ("" = write)
	Created time.Time `json:"created"`
}

type tokensFile struct {
	Version int     `json:"version"`
	Tokens  []Token `json:"tokens"`
}

// LoadTokens reads the tokens file at path. A missing file holds no
// tokens; a file another user owns or can write is refused (it could
// admit anyone).
func LoadTokens(path string) ([]Token, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("auth: reading tokens: %w", err)
	}
	if err := strictmode.Check(path); err != nil {
		return nil, fmt.Errorf("auth: tokens file refused: %w", err)
	}
	var f tokensFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("auth: tokens file %s is not valid JSON (%v); fix it, or delete it and create the tokens again", path, err)
	}
	for i, t := range f.Tokens {
		if !config.ValidTokenName(t.Name) || len(t.SHA256) != sha256.Size*2 {
			return nil, fmt.Errorf("auth: tokens file %s: entry %d (%q) has no valid name or sha256; remove it with `switchboard token revoke`", path, i+1, t.Name)
		}
		if t.Access != "" && t.Access != "read" && t.Access != "write" {
			return nil, fmt.Errorf("auth: tokens file %s: token %q has access %q; use \"read\" or \"write\"", path, t.Name, t.Access)
		}
	}
	return f.Tokens, nil
}

// Hash is the SHA-256 of a token's secret, as the tokens file keeps it.
func Hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// NewToken creates the token name with access ("read" or "write") in the
// tokens file at path (made 0600 in a folder made 0700 if needed) and
// returns its secret, which is stored nowhere.
func NewToken(path, name, access string) (string, error) {
	if !config.ValidTokenName(name) {
		return "", fmt.Errorf("auth: %q is not a token name: use letters, digits and _ . @ : - (at most 128)", name)
	}
	if access != "read" && access != "write" {
		return "", fmt.Errorf("auth: --access %q: use \"read\" or \"write\"", access)
	}
	tokens, err := LoadTokens(path)
	if err != nil {
		return "", err
	}
	if slices.ContainsFunc(tokens, func(t Token) bool { return t.Name == name }) {
		return "", fmt.Errorf("auth: a token named %q exists; revoke it first (`switchboard token revoke %s`) or choose another name", name, name)
	}
	secret := TokenPrefix + rand.Text() + rand.Text()
	tokens = append(tokens, Token{Name: name, SHA256: Hash(secret), Access: access, Created: time.Now().UTC().Truncate(time.Second)})
	if err := saveTokens(path, tokens); err != nil {
		return "", err
	}
	return secret, nil
}

// RevokeToken removes the token name from the tokens file at path; a
// running host refuses it from its next request.
func RevokeToken(path, name string) error {
	tokens, err := LoadTokens(path)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(tokens, func(t Token) bool { return t.Name == name })
	if i < 0 {
		return fmt.Errorf("auth: no token named %q in %s (`switchboard token list` shows them)", name, path)
	}
	return saveTokens(path, slices.Delete(tokens, i, i+1))
}

func saveTokens(path string, tokens []Token) error {
	if err := strictmode.PrivateDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("auth: tokens folder: %w", err)
	}
	b, err := json.MarshalIndent(tokensFile{Version: 1, Tokens: tokens}, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tokens-*.json") // 0600
	if err != nil {
		return fmt.Errorf("auth: saving tokens: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("auth: saving tokens: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("auth: saving tokens: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("auth: saving tokens: %w", err)
	}
	return os.Rename(tmp.Name(), path)
}

// match returns the token whose hash is secret's, comparing every entry in
// constant time.
func match(tokens []Token, secret string) (Token, bool) {
	want := []byte(Hash(secret))
	var found Token
	ok := false
	for _, t := range tokens {
		if subtle.ConstantTimeCompare([]byte(t.SHA256), want) == 1 {
			found, ok = t, true
		}
	}
	return found, ok
}

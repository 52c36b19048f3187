package frontend

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// DefaultNameBudget is the longest tool name shown to MCP clients, short
// enough that a client's own prefix still fits in common 64-128 limits.
const DefaultNameBudget = 64

// MCPName is the name a client sees for server's tool: "<server>__<tool>"
// (server is the server's prefix; "" gives the bare tool name),
// with every character outside [A-Za-z0-9_-] replaced by '_'. A name
// longer than budget keeps its head and ends with '_' and 8 hex digits of
// the SHA-256 of the canonical name, so shortening is deterministic and two
// long names differing only at the end stay distinct.
func MCPName(server, tool string, budget int) string {
	if budget <= 0 {
		budget = DefaultNameBudget
	}
	full := server + "__" + tool
	if server == "" {
		full = tool // prefix = "": the bare name
	}
	if len(full) <= budget && plainName(full) {
		return full // the usual case: nothing to replace or shorten
	}
	var b strings.Builder
	for _, r := range full {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) <= budget {
		return name
	}
	sum := sha256.Sum256([]byte(server + "." + tool))
	suffix := "_" + hex.EncodeToString(sum[:4])
	return name[:budget-len(suffix)] + suffix
}

// plainName reports whether s has only the characters MCPName keeps.
func plainName(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

package pluginstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/switchboard-mcp/switchboard/host/internal/termsafe"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// SurfaceTool is one tool of a server's surface: everything a model reads
// or a client shows about it. A changed description is how a tool
// poisoning attack arrives, so every field counts.
type SurfaceTool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	Access       string          `json:"access,omitempty"`
}

// Surface is a server's tools, sorted by name, in canonical form.
type Surface []SurfaceTool

// accessNames are the access levels as the surface names them: the names
// of the plugin protocol's enum, so that a surface hashed before the host
// had its own types hashes the same. AccessUnspecified has none.
var accessNames = map[toolcall.Access]string{
	toolcall.AccessRead:  "ACCESS_READ",
	toolcall.AccessWrite: "ACCESS_WRITE",
}

// SurfaceOf builds the canonical surface of a server's tools.
func SurfaceOf(tools []*toolcall.Tool) Surface {
	out := make(Surface, 0, len(tools))
	for _, t := range tools {
		st := SurfaceTool{
			Name: t.Name, Title: t.Title, Description: t.Description,
			InputSchema: canonical(t.InputSchema), OutputSchema: canonical(t.OutputSchema),
		}
		if a := t.Annotations; a != nil {
			m := map[string]any{}
			if a.Title != nil {
				m["title"] = *a.Title
			}
			if a.ReadOnlyHint != nil {
				m["readOnlyHint"] = *a.ReadOnlyHint
			}
			if a.DestructiveHint != nil {
				m["destructiveHint"] = *a.DestructiveHint
			}
			if a.IdempotentHint != nil {
				m["idempotentHint"] = *a.IdempotentHint
			}
			if a.OpenWorldHint != nil {
				m["openWorldHint"] = *a.OpenWorldHint
			}
			if len(m) > 0 {
				st.Annotations, _ = json.Marshal(m)
			}
		}
		if name := accessNames[t.Access]; name != "" {
			st.Access = name
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b SurfaceTool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// SurfaceOfServer is a server's whole surface: its tools, and the
// instructions it gives the model (a poisoned instruction arrives through
// those as well). Prompts and resources are left out: their lists may
// change while a server runs, as a matter of course. The instructions'
// entry has a name no tool can have: "(instructions)".
func SurfaceOfServer(d *toolcall.Description) Surface {
	out := SurfaceOf(d.Tools)
	if in := d.Instructions; in != "" {
		out = append(out, SurfaceTool{Name: "(instructions)", Description: in})
		slices.SortFunc(out, func(a, b SurfaceTool) int { return strings.Compare(a.Name, b.Name) })
	}
	return out
}

// canonical re-encodes JSON with sorted keys and no insignificant space;
// bytes that are not JSON are kept as a JSON string.
func canonical(b []byte) json.RawMessage {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		s, _ := json.Marshal(string(b))
		return s
	}
	out, _ := json.Marshal(v)
	return out
}

// JSON is the surface's canonical JSON.
func (s Surface) JSON() []byte {
	b, _ := json.Marshal(s)
	return b
}

// Hash is the lock file hash of the surface: "sha256:<hex>" of its JSON.
func (s Surface) Hash() string {
	sum := sha256.Sum256(s.JSON())
	return Hash(hex.EncodeToString(sum[:]))
}

// Pretty is the surface as indented JSON, one field a line, for diffs that
// a person reads on a terminal: what the server wrote is escaped where it is
// not printable (termsafe), so a right-to-left override in a description
// cannot make the diff read differently from what is approved.
func (s Surface) Pretty() string {
	var b bytes.Buffer
	for _, t := range s {
		fmt.Fprintf(&b, "tool %q\n", t.Name)
		for _, f := range []struct {
			k string
			v any
		}{{"title", t.Title}, {"description", t.Description}, {"access", t.Access}} {
			if f.v != "" {
				q, _ := json.Marshal(f.v)
				fmt.Fprintf(&b, "  %s: %s\n", f.k, q)
			}
		}
		for _, f := range []struct {
			k string
			v json.RawMessage
		}{{"input_schema", t.InputSchema}, {"output_schema", t.OutputSchema}, {"annotations", t.Annotations}} {
			if len(f.v) == 0 {
				continue
			}
			var ind bytes.Buffer
			if json.Indent(&ind, f.v, "  ", "  ") != nil {
				ind.Write(f.v)
			}
			fmt.Fprintf(&b, "  %s: %s\n", f.k, ind.String())
		}
	}
	return termsafe.Escape(b.String())
}

// ParseSurface reads a surface's JSON.
func ParseSurface(b []byte) (Surface, error) {
	var s Surface
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	return s, nil
}

// Diff is a unified diff from old to new surface (their Pretty forms).
func Diff(oldName string, old Surface, newName string, cur Surface) string {
	d, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(old.Pretty()), B: difflib.SplitLines(cur.Pretty()),
		FromFile: oldName, ToFile: newName, Context: 2,
	})
	return d
}

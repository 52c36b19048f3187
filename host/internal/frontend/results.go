package frontend

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// Results that fit a context window.
//
// Every tool result on its way to an MCP client (both stdio routes and
// HTTP: Frontend.call) is held to the limits of config.Results:
//
//   - Text: the text items together may carry max_result_chars characters
//     (Unicode code points). A result over it keeps its items in order up
//     to the limit; the item that crosses it is cut (a JSON text is
//     shortened as JSON, see shrinkJSON, so it stays valid), the text items
//     after it are left out, and one more text item, the marker, says how
//     much was cut and how to get the rest. The marker is never written
//     into another item, so a JSON text stays parseable.
//   - Structured content over the limit is shortened as JSON the same way.
//   - The rest: when the tool's input schema has paging arguments (offset
//     and limit, start_index, …: pagingArgs) the marker says to use them;
//     otherwise each cut item is saved whole under data_dir/results and
//     offered as a resource_link the client reads in pages with
//     resources/read (savedresults.go).
//   - Images (and audio) over max_image_bytes are not sent: a text item
//     says which and why.

// Settings are the parts of the config the front end applies itself.
type Settings struct {
	// Results are the result limits.
	Results config.Results
	// DataDir is the host's data_dir: cut results are saved under it.
	DataDir string
	// Expose is how tools are listed (search.go).
	Expose config.Expose
}

// DefaultSettings are the settings of a front end that was not
// configured: results as they come (no limits, nothing saved), every tool
// listed. `switchboard serve` always configures it from the config, whose
// own defaults do limit results (config.DefaultMaxResultChars).
func DefaultSettings() Settings {
	return Settings{Expose: config.Expose{Mode: config.ExposeAll, BudgetTokens: config.DefaultToolBudgetTokens}}
}

// SettingsOf returns the front end's settings in cfg.
func SettingsOf(cfg *config.Config) Settings {
	return Settings{Results: cfg.Results, DataDir: cfg.DataDir, Expose: cfg.Expose}
}

// settingsState holds the settings in force.
type settingsState struct {
	settings atomic.Pointer[Settings]
}

// Configure applies s (at start and after each reload).
func (f *Frontend) Configure(s Settings) {
	f.settings.Store(&s)
	f.saved.setDir(s.DataDir)
	f.applyExpose()
}

// currentSettings returns the settings in force.
func (f *Frontend) currentSettings() Settings {
	if s := f.settings.Load(); s != nil {
		return *s
	}
	return DefaultSettings()
}

// fitRequest is one result to fit, and what it came from.
type fitRequest struct {
	canonical  string // "<server>.<tool>"
	owner      string // the client, for saved results
	maxChars   int
	by         string // what set maxChars
	imageBytes int64
	paging     []string // the tool's paging arguments, if any
}

// fit holds res to the limits of the call of canonical; res is not
// changed (the registry's duplicate guard keeps it).
func (f *Frontend) fit(ctx context.Context, canonical string, res *toolcall.Result) *toolcall.Result {
	if res == nil {
		return res
	}
	s := f.currentSettings()
	srv, tool, _ := cutCanonical(canonical)
	chars, images, by := s.Results.Limits(srv, tool)
	req := fitRequest{canonical: canonical, owner: clientID(ctx), maxChars: chars, by: by, imageBytes: images}
	if !needsFit(res, req) {
		return res
	}
	if t, err := f.reg.Lookup(canonical); err == nil {
		req.paging = pagingArgs(t.Tool.InputSchema)
	}
	return f.fitResult(res, req)
}

// needsFit reports whether res is over any limit (the common case, no,
// costs one pass over the items).
func needsFit(res *toolcall.Result, req fitRequest) bool {
	text := 0
	for _, c := range res.Content {
		switch c.Type {
		case toolcall.TypeText:
			text += utf8.RuneCountInString(c.Text)
		case toolcall.TypeImage, toolcall.TypeAudio:
			if req.imageBytes > 0 && int64(len(c.Data)) > req.imageBytes {
				return true
			}
		}
	}
	if req.maxChars <= 0 {
		return false
	}
	return text > req.maxChars || utf8.RuneCount(res.StructuredContent) > req.maxChars
}

// fitResult builds the fitted copy of res.
func (f *Frontend) fitResult(res *toolcall.Result, req fitRequest) *toolcall.Result {
	out := *res
	out.Content = make([]toolcall.Content, 0, len(res.Content)+2)
	left := req.maxChars
	unlimited := req.maxChars <= 0
	var (
		total, kept int      // characters of text, and of text sent
		cut         []cutRef // the items cut, for the marker
		notes       []string
	)
	for i, c := range res.Content {
		switch c.Type {
		case toolcall.TypeImage, toolcall.TypeAudio:
			if req.imageBytes > 0 && int64(len(c.Data)) > req.imageBytes {
				notes = append(notes, fmt.Sprintf("An %s (%s, %s) was not sent: it is over max_image_bytes (%s). Ask the tool for a smaller one (a lower resolution or a part), or raise max_image_bytes in the config.",
					kindOf(c.Type), c.MIMEType, byteSize(int64(len(c.Data))), byteSize(req.imageBytes)))
				continue
			}
			out.Content = append(out.Content, c)
		case toolcall.TypeText:
			n := utf8.RuneCountInString(c.Text)
			total += n
			switch {
			case unlimited || n <= left:
				out.Content = append(out.Content, c)
				left -= n
				kept += n
			case left > 0:
				short, isJSON := cutText(c.Text, left)
				out.Content = append(out.Content, toolcall.TextContent(short))
				k := utf8.RuneCountInString(short)
				kept += k
				left = 0
				cut = append(cut, cutRef{index: i, text: c.Text, json: isJSON, kept: k})
			default:
				cut = append(cut, cutRef{index: i, text: c.Text, json: json.Valid([]byte(c.Text))})
			}
		default:
			out.Content = append(out.Content, c)
		}
	}
	var structured *cutRef
	if !unlimited && utf8.RuneCount(res.StructuredContent) > req.maxChars {
		short := shrinkJSON(res.StructuredContent, req.maxChars)
		out.StructuredContent = short
		structured = &cutRef{index: -1, text: string(res.StructuredContent), json: true, kept: utf8.RuneCount(short)}
	}
	if len(cut) > 0 || structured != nil {
		out.Content = append(out.Content, f.marker(req, total, kept, cut, structured)...)
	}
	for _, n := range notes {
		out.Content = append(out.Content, toolcall.TextContent(n))
	}
	return &out
}

// cutRef is a text item (or the structured content, index -1) that was
// cut, whole as the tool returned it.
type cutRef struct {
	index int
	text  string
	json  bool
	kept  int // characters sent
}

// marker returns the items that say what was cut and how to get the rest:
// a text, and a resource_link per item saved.
func (f *Frontend) marker(req fitRequest, total, kept int, cut []cutRef, structured *cutRef) []toolcall.Content {
	var b strings.Builder
	if len(cut) > 0 {
		fmt.Fprintf(&b, "[Result cut: %s returned %d characters of text and only the first %d are here (%s = %d); %d characters were left out",
			req.canonical, total, kept, req.by, req.maxChars, total-kept)
		if n := len(cut) - 1; n > 0 && cut[0].kept > 0 {
			fmt.Fprintf(&b, ", among them %d more text item(s) after the one cut", n)
		}
		b.WriteString(".")
		if cut[0].json {
			b.WriteString(" The JSON text was shortened as JSON (fewer array items or object members, long strings cut), so it still parses.")
		}
	}
	if structured != nil {
		if b.Len() == 0 {
			b.WriteString("[Result cut:")
		}
		fmt.Fprintf(&b, " The structured content (%d characters) was shortened as JSON to at most %d (%s), so it still parses.", utf8.RuneCountInString(structured.text), req.maxChars, req.by)
	}
	var links []toolcall.Content
	switch {
	case len(req.paging) > 0:
		fmt.Fprintf(&b, " To get the rest, call %s again with its paging arguments (%s) for the part after what you have, or ask for less.]", req.canonical, strings.Join(req.paging, ", "))
	default:
		items := cut
		if structured != nil {
			items = append(items, *structured)
		}
		for _, c := range items {
			l, err := f.saved.save(req.owner, req.canonical, c, req.maxChars)
			if err != nil {
				f.log.Warn("cut result not saved", "tool", req.canonical, "error", err)
				continue
			}
			links = append(links, l)
		}
		switch {
		case len(links) > 0:
			fmt.Fprintf(&b, " The whole of what was cut is saved: read it with resources/read on the resource link(s) below, in pages of %d characters (add ?offset=N&limit=M to the URI; each page's _meta gives the next one).]", req.maxChars)
		default:
			b.WriteString(" Ask the tool for less (a narrower query, a smaller range), or raise the limit in the config.]")
		}
	}
	return append([]toolcall.Content{toolcall.TextContent(b.String())}, links...)
}

// cutText returns the first n characters of s, or for a JSON object or
// array s, a shorter JSON text of at most n bytes that still parses; isJSON
// says which.
func cutText(s string, n int) (short string, isJSON bool) {
	if t := strings.TrimSpace(s); t != "" && (t[0] == '{' || t[0] == '[') && json.Valid([]byte(t)) {
		return string(shrinkJSON([]byte(t), n)), true
	}
	i, count := 0, 0
	for i < len(s) && count < n {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		count++
	}
	return s[:i], false
}

// pagingNames are argument names that move through a tool's output: when a
// tool's input schema has one, a cut result says to use it.
var pagingNames = []string{"offset", "start_index", "start", "skip", "cursor", "page", "page_token", "start_line", "line_offset", "from"}

// pagingArgs returns the paging arguments in a tool's input schema (an
// offset-like one is needed; limit-like ones beside it are named too).
func pagingArgs(schema []byte) []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	var out []string
	for _, n := range pagingNames {
		if _, ok := s.Properties[n]; ok {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil
	}
	for _, n := range []string{"limit", "max_length", "max_chars", "length", "count", "page_size", "per_page", "max_results", "end_line", "max_lines"} {
		if _, ok := s.Properties[n]; ok {
			out = append(out, n)
		}
	}
	return out
}

func kindOf(t string) string {
	if t == toolcall.TypeAudio {
		return "audio clip"
	}
	return "image"
}

// byteSize shows n bytes for a person: "5242880 bytes (5.0 MiB)".
func byteSize(n int64) string {
	return fmt.Sprintf("%d bytes (%.1f MiB)", n, float64(n)/(1<<20))
}

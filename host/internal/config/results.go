package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Results bounds what one tool result may put into an MCP client's
// context. A server's block and its tool blocks may set their own
// max_result_chars; a server's block its own max_image_bytes.
type Results struct {
	// MaxChars is the most characters (Unicode code points) of text a
	// result may carry (DefaultMaxResultChars; 0: no limit).
	MaxChars int
	// MaxImageBytes is the largest image (decoded bytes) a result may
	// carry; a larger one is refused with a reason (DefaultMaxImageBytes;
	// 0: no limit).
	MaxImageBytes int64
	// Servers are the server blocks' own limits, by server name.
	Servers map[string]ServerResults
}

// ServerResults are one server block's result limits; nil fields keep the
// top level's.
type ServerResults struct {
	MaxChars      *int
	MaxImageBytes *int64
	// Tools are the tool blocks' max_result_chars, by tool name.
	Tools map[string]int
}

// Limits returns the limits for one call of server's tool: its characters
// and image bytes, and what set the characters (for the marker).
func (r Results) Limits(server, tool string) (chars int, imageBytes int64, by string) {
	chars, imageBytes, by = r.MaxChars, r.MaxImageBytes, "max_result_chars"
	s, ok := r.Servers[server]
	if !ok {
		return chars, imageBytes, by
	}
	if s.MaxChars != nil {
		chars, by = *s.MaxChars, fmt.Sprintf("max_result_chars in the %s block", server)
	}
	if s.MaxImageBytes != nil {
		imageBytes = *s.MaxImageBytes
	}
	if n, ok := s.Tools[tool]; ok {
		chars, by = n, fmt.Sprintf("tool %q { max_result_chars } in the %s block", tool, server)
	}
	return chars, imageBytes, by
}

// DefaultMaxResultChars is max_result_chars when the config sets none:
// about 25,000 tokens of a model's context.
const DefaultMaxResultChars = 100_000

// DefaultMaxImageBytes is max_image_bytes when the config sets none: 5 MiB,
// the largest image the major model APIs take.
const DefaultMaxImageBytes = 5 << 20

// minResultChars is the smallest max_result_chars other than 0 (off): a
// smaller one leaves no room for the marker that says what was cut.
const minResultChars = 1000

// Expose modes: how the host lists tools to MCP clients.
const (
	// ExposeAll lists every tool (the default).
	ExposeAll = "all"
	// ExposeSearch lists switchboard__search_tools, switchboard__call_tool
	// and the pinned tools; a search adds what it finds to the caller's
	// list.
	ExposeSearch = "search"
	// ExposeAuto is ExposeSearch when listing every tool would take more
	// than tool_budget_tokens, else ExposeAll.
	ExposeAuto = "auto"
)

// DefaultToolBudgetTokens is tool_budget_tokens when the config sets none.
const DefaultToolBudgetTokens = 8000

// Expose is how tools are listed to MCP clients.
type Expose struct {
	// Mode is ExposeAll, ExposeSearch or ExposeAuto.
	Mode string
	// BudgetTokens is the listing size (estimated tokens) above which
	// ExposeAuto searches.
	BudgetTokens int
	// AlwaysList are canonical tool names ("<server>.<tool>") listed in
	// search mode too.
	AlwaysList []string
}

// results reads max_result_chars and max_image_bytes at the top level.
func (b *builder) results(fs *fileSchema) {
	b.cfg.Results = Results{MaxChars: DefaultMaxResultChars, MaxImageBytes: DefaultMaxImageBytes}
	if fs.MaxResultChars != nil && b.resultChars(b.at("max_result_chars"), *fs.MaxResultChars) {
		b.cfg.Results.MaxChars = *fs.MaxResultChars
	}
	if fs.MaxImageBytes != nil && b.imageBytes(b.at("max_image_bytes"), *fs.MaxImageBytes) {
		b.cfg.Results.MaxImageBytes = *fs.MaxImageBytes
	}
}

func (b *builder) resultChars(r hcl.Range, n int) bool {
	if n != 0 && n < minResultChars {
		b.errAt(r, "Invalid max_result_chars", fmt.Sprintf("max_result_chars = %d: use 0 (no limit) or at least %d.", n, minResultChars))
		return false
	}
	return true
}

func (b *builder) imageBytes(r hcl.Range, n int64) bool {
	if n < 0 {
		b.errAt(r, "Invalid max_image_bytes", fmt.Sprintf("max_image_bytes = %d: use 0 (no limit) or a size in bytes such as 5242880.", n))
		return false
	}
	return true
}

// serverResults reads a server block's max_result_chars and
// max_image_bytes and its tool blocks' max_result_chars.
func (b *builder) serverResults(name string, def hcl.Range, chars *int, images *int64, tools []toolSchema) {
	var s ServerResults
	set := false
	if chars != nil && b.resultChars(b.in(def, "max_result_chars"), *chars) {
		s.MaxChars, set = chars, true
	}
	if images != nil && b.imageBytes(b.in(def, "max_image_bytes"), *images) {
		s.MaxImageBytes, set = images, true
	}
	for _, tb := range tools {
		if tb.MaxResultChars == nil || !b.resultChars(b.in(tb.Range, "max_result_chars"), *tb.MaxResultChars) {
			continue
		}
		if s.Tools == nil {
			s.Tools = map[string]int{}
		}
		s.Tools[tb.Name], set = *tb.MaxResultChars, true
	}
	if !set {
		return
	}
	if b.cfg.Results.Servers == nil {
		b.cfg.Results.Servers = map[string]ServerResults{}
	}
	b.cfg.Results.Servers[name] = s
}

// expose reads expose, tool_budget_tokens and always_list.
func (b *builder) expose(fs *fileSchema) {
	e := Expose{Mode: ExposeAll, BudgetTokens: DefaultToolBudgetTokens}
	if fs.Expose != nil {
		if modes := []string{ExposeAll, ExposeSearch, ExposeAuto}; !slices.Contains(modes, *fs.Expose) {
			b.errAt(b.at("expose"), "Invalid expose", fmt.Sprintf("expose = %q must be \"all\" (list every tool), \"search\" (list a search tool) or \"auto\" (search when the listing exceeds tool_budget_tokens).", *fs.Expose))
		} else {
			e.Mode = *fs.Expose
		}
	}
	if fs.ToolBudgetTokens != nil {
		if *fs.ToolBudgetTokens < 1 {
			b.errAt(b.at("tool_budget_tokens"), "Invalid tool_budget_tokens", "tool_budget_tokens must be at least 1 (an estimate of the tokens the tool listing may take, e.g. 8000).")
		} else {
			e.BudgetTokens = *fs.ToolBudgetTokens
		}
	}
	for _, name := range fs.AlwaysList {
		srv, tool, ok := strings.Cut(name, ".")
		if !ok || srv == "" || tool == "" {
			b.errAt(b.at("always_list"), "Invalid always_list entry", fmt.Sprintf("%q is not a tool name: use <server>.<tool>, e.g. \"filesystem.read_text_file\".", name))
			continue
		}
		e.AlwaysList = append(e.AlwaysList, name)
	}
	b.cfg.Expose = e
}

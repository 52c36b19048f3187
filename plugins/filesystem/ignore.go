package filesystem

import (
	"strings"

	ignore "github.com/sabhiram/go-gitignore"
)

// ignoreSet is one .gitignore, matched exactly as go-gitignore matches it
// (every line in order; a later negated line that matches un-ignores) but
// with each line compiled alone and a literal its matches must contain
// checked first, so most paths are decided by strings.Contains rather than
// a regular expression per line.
type ignoreSet struct {
	lines []ignoreLine
	whole *ignore.GitIgnore // set when a line cannot be taken alone
}

type ignoreLine struct {
	gi      *ignore.GitIgnore // the line without its "!"
	negate  bool
	literal string // "" when no safe literal is known
}

// compileIgnore compiles a .gitignore's text.
func compileIgnore(text string) *ignoreSet {
	lines := strings.Split(text, "\n")
	s := &ignoreSet{}
	for _, raw := range lines {
		// go-gitignore: "\r" trimmed, "#…" a comment, spaces trimmed, a
		// blank line nothing, a leading "!" negates.
		line := strings.TrimRight(raw, "\r")
		if strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.Trim(line, " ")
		if line == "" {
			continue
		}
		l := ignoreLine{}
		if line[0] == '!' {
			l.negate, line = true, line[1:]
			// After the "!", go-gitignore strips one more "#" or "!"; a
			// line like that (or "!" alone, or "! x") is left to the
			// library whole.
			if line == "" || line[0] == '#' || line[0] == '!' || line[0] == ' ' {
				return &ignoreSet{whole: ignore.CompileIgnoreLines(lines...)}
			}
		}
		l.gi = ignore.CompileIgnoreLines(line)
		l.literal = requiredLiteral(line)
		s.lines = append(s.lines, l)
	}
	return s
}

// matches reports whether path (relative to the .gitignore's folder, with
// a trailing slash for a directory) is ignored.
func (s *ignoreSet) matches(path string) bool {
	if s.whole != nil {
		return s.whole.MatchesPath(path)
	}
	ignored := false
	for i := range s.lines {
		l := &s.lines[i]
		if l.negate && !ignored {
			continue // a negation changes nothing unless something matched
		}
		if l.literal != "" && !strings.Contains(path, l.literal) {
			continue
		}
		if l.gi.MatchesPath(path) {
			ignored = !l.negate
		}
	}
	return ignored
}

// requiredLiteral returns a string that every path a gitignore line (its
// "!" removed) matches must contain, or "" when the line holds characters
// that go-gitignore's translation to a regular expression does not keep
// literal. The longest run of letters, digits, '.', '_' and '-' is such a
// string: go-gitignore escapes '.', keeps the others as they are, and
// rewrites only '*', '/' and "**" (and '?', here refused).
func requiredLiteral(line string) string {
	best, cur := "", 0
	for i := 0; i <= len(line); i++ {
		if i < len(line) {
			switch c := line[i]; {
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
				continue
			case c == '*', c == '/', c == ' ':
			default:
				return "" // regexp syntax or escapes: no shortcut
			}
		}
		if run := line[cur:i]; len(run) > len(best) {
			best = run
		}
		cur = i + 1
	}
	return best
}

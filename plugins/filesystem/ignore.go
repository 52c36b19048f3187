package filesystem

import (
	"strings"
	"sync"

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

// compiledIgnores keeps the .gitignores compiled lately by their text: a
// tree often holds the same .gitignore in many folders (one per module),
// and compiling one is a regular expression per line. An ignoreSet is
// only read once compiled, so one serves every folder and walk. The cache
// is emptied when it holds ignoreCacheMax texts or ignoreCacheBytes bytes.
var compiledIgnores struct {
	sync.Mutex
	sets  map[string]*ignoreSet
	bytes int
}

const (
	ignoreCacheMax   = 256
	ignoreCacheBytes = 1 << 20
)

// compileIgnore compiles a .gitignore's text, or returns the set compiled
// from the same text before.
func compileIgnore(text string) *ignoreSet {
	compiledIgnores.Lock()
	s, ok := compiledIgnores.sets[text]
	compiledIgnores.Unlock()
	if ok {
		return s
	}
	s = compileIgnoreText(text)
	if len(text) <= ignoreCacheBytes/4 {
		compiledIgnores.Lock()
		if len(compiledIgnores.sets) >= ignoreCacheMax || compiledIgnores.bytes+len(text) > ignoreCacheBytes {
			compiledIgnores.sets, compiledIgnores.bytes = nil, 0
		}
		if compiledIgnores.sets == nil {
			compiledIgnores.sets = map[string]*ignoreSet{}
		}
		if _, dup := compiledIgnores.sets[text]; !dup {
			compiledIgnores.sets[text] = s
			compiledIgnores.bytes += len(text)
		}
		compiledIgnores.Unlock()
	}
	return s
}

// compileIgnoreText compiles a .gitignore's text.
func compileIgnoreText(text string) *ignoreSet {
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

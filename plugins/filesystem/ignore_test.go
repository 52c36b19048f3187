package filesystem

import (
	"strings"
	"testing"

	ignore "github.com/sabhiram/go-gitignore"
)

// ignoreCases are .gitignore texts and paths that compileIgnore must judge
// exactly as go-gitignore does.
var ignoreCases = []struct{ text, paths string }{
	{"build/\n*.log\n!keep.log\n", "build/ build/x.go a/build/ a.log keep.log a/keep.log x.go"},
	{"/dist\nnode_modules/\n**/gen/**\n*.tmp\n!important.tmp\n", "dist dist/ a/dist node_modules/ a/node_modules/x gen/a a/gen/b/c x.tmp important.tmp"},
	{"# comment\n\n  spaced  \n\\#hash\n!\n", "spaced #hash x"},
	{"[Bb]uild/\na+b\nx?y\nfoo|bar\n", "Build/ build/ aab a+b xy x?y foo bar"},
	{"!!x\n!#y\n*.c\n!a.c\n", "x !x y #y a.c b.c"},
	{"doc/*.txt\n/*.c\nabc/**\na/**/b\n\r\n*.o\r\n", "doc/a.txt doc/x/a.txt a.c x/a.c abc/d abc/ a/b a/x/y/b a.o"},
}

func TestIgnoreSetMatchesGoGitignore(t *testing.T) {
	for _, c := range ignoreCases {
		want := ignore.CompileIgnoreLines(strings.Split(c.text, "\n")...)
		got := compileIgnore(c.text)
		for _, p := range strings.Fields(c.paths) {
			if g, w := got.matches(p), want.MatchesPath(p); g != w {
				t.Errorf("%q: matches(%q) = %v, go-gitignore says %v", c.text, p, g, w)
			}
		}
	}
}

func FuzzIgnoreSet(f *testing.F) {
	for _, c := range ignoreCases {
		for _, p := range strings.Fields(c.paths) {
			f.Add(c.text, p)
		}
	}
	f.Fuzz(func(t *testing.T, text, path string) {
		want := ignore.CompileIgnoreLines(strings.Split(text, "\n")...)
		if g, w := compileIgnore(text).matches(path), want.MatchesPath(path); g != w {
			t.Errorf("%q: matches(%q) = %v, go-gitignore says %v", text, path, g, w)
		}
	})
}

func TestRequiredRegexpLiteral(t *testing.T) {
	for _, tt := range []struct{ expr, want string }{
		{`\w+_needle`, "_needle"},
		{`func F7_\d+\(`, "func F7_"},
		{`(?i)needle`, ""},
		{`foo|barbaz`, ""},
		{`(abc)+x`, "abc"},
		{`a*bcd?`, "bc"},
		{`x{2,}yz`, "yz"},
		{`[ab]c`, "c"},
	} {
		if got := requiredRegexpLiteral(tt.expr); got != tt.want {
			t.Errorf("requiredRegexpLiteral(%q) = %q, want %q", tt.expr, got, tt.want)
		}
	}
}

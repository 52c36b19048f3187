package bash

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/switchboard-mcp/switchboard/sdk"
)

// maxDepth bounds how deep Commands follows `bash -c '…'` and friends.
const maxDepth = 8

// Commands returns one permission pattern per command a bash command line
// would run: every command in lists, pipelines, subshells, $(...),
// backticks, process substitutions and function bodies, with harmless
// VAR=x prefixes stripped and quotes and backslashes removed (\rm is "rm").
//
// A line is auto-allowed by the host only when every pattern is allowed,
// so whatever this check cannot know statically gets an opaque pattern
// (sdk.OpaquePattern), which no allow rule matches. The rules:
//
//   - a command name is reported as written when it has no '/'; an absolute
//     clean path (/usr/bin/ls) is reported as that path and as its base name
//     ("/usr/bin/ls" and "ls": a rule for ls alone does not allow it, a deny
//     rule for ls still matches); a relative path (./ls, tools/ls) is opaque
//     plus its base name;
//   - a command name computed when the line runs ($c, $(…), globs, braces)
//     is opaque;
//   - expansions that can execute code (arithmetic on anything but number
//     literals, ${x@P}, ${!x}, subscripts, [[ x -eq y ]], declare -i/-n)
//     are opaque;
//   - assignments to variables that name programs or change how names
//     resolve (PATH, HOME, GIT_*, LD_*, PAGER, EDITOR, BASH_ENV, …), as a
//     prefix, alone, through export/declare, env, read, printf -v, for, …
//     are opaque;
//   - eval, source, exec, command, builtin, trap, alias, xargs, env with
//     options, find -exec, git subcommands that run programs or write
//     config, and programs that run code named in their arguments (awk with
//     system/pipes/redirections, sed e/w, tar --to-command, rsync -e, ssh -o,
//     vim, …) are opaque, besides their own name and, where it can be read,
//     the command they run (so deny rules still match it);
//   - wrappers (sudo, timeout, nice, nohup, stdbuf, …) are reported with the
//     command they run; an option the check does not know makes them opaque;
//   - redirections whose target is computed when it runs, or that write
//     into a .git directory or git config file, are opaque.
//
// Interpreters given a script or code (python3 x.py, node -e, perl -e) are
// reported by their name: allowing an interpreter allows any code.
// A line that does not parse yields a single opaque pattern. The result is
// sorted and free of duplicates.
func Commands(line string) []string {
	return analyze(line).patterns()
}

// analysis is what one pass over a command line learns: its patterns and
// the redirection targets that could be read statically.
type analysis struct {
	out []string
	// targets are the file targets of redirections, as written.
	targets []string
	// dirs are the static arguments of cd/pushd in the line; cd is set
	// when the line changes directory at all.
	dirs []string
	cd   bool
}

func analyze(line string) *analysis {
	a := &analysis{}
	a.parse(line, 0)
	a.checkTargets()
	return a
}

func (a *analysis) patterns() []string {
	out := slices.Clone(a.out)
	slices.Sort(out)
	return slices.Compact(out)
}

func (a *analysis) add(s string) { a.out = append(a.out, s) }

func (a *analysis) opaque(format string, args ...any) {
	a.add(sdk.OpaquePatternf(format, args...))
}

func (a *analysis) parse(line string, depth int) {
	if depth > maxDepth {
		a.opaque("commands nested more than %d levels deep", maxDepth)
		return
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(line), "")
	if err != nil {
		a.opaque("the command line does not parse: %v", err)
		return
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CallExpr:
			for _, as := range n.Assigns {
				a.assign(as)
			}
			if len(n.Args) > 0 {
				a.call(n.Args, depth)
			}
		case *syntax.DeclClause:
			a.decl(n)
		case *syntax.ArithmExp:
			a.arithm(n.X, "$((…))")
		case *syntax.ArithmCmd:
			a.arithm(n.X, "((…))")
		case *syntax.LetClause:
			for _, x := range n.Exprs {
				a.arithm(x, "let")
			}
		case *syntax.CStyleLoop:
			for _, x := range []syntax.ArithmExpr{n.Init, n.Cond, n.Post} {
				a.arithm(x, "for ((…))")
			}
		case *syntax.WordIter:
			if r := varNameProblem(n.Name.Value); r != "" {
				a.opaque("a for loop over the variable %s: %s", n.Name.Value, r)
			}
		case *syntax.ParamExp:
			a.paramExp(n)
		case *syntax.BinaryTest:
			switch n.Op {
			case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
				for _, x := range []syntax.TestExpr{n.X, n.Y} {
					if w, ok := x.(*syntax.Word); ok {
						a.arithm(w, "[[ … -eq … ]]")
					} else {
						a.opaque("[[ … -eq … ]] on an expression this check cannot read")
					}
				}
			}
		case *syntax.UnaryTest:
			if n.Op == syntax.TsVarSet || n.Op == syntax.TsRefVar {
				w, ok := n.X.(*syntax.Word)
				s, static := "", false
				if ok {
					s, static = staticWord(w)
				}
				if !static || strings.Contains(s, "[") {
					a.opaque("[[ -v ]] on a subscript or a computed name, which bash evaluates")
				}
			}
		case *syntax.Redirect:
			a.redirect(n)
		}
		return true // nested $(...), <(...) and bodies are walked too
	})
}

// redirect records the target of a redirection to or from a file.
func (a *analysis) redirect(r *syntax.Redirect) {
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
		return // the word is a delimiter or the text itself, not a path
	}
	if r.Word == nil {
		return
	}
	s, static := staticWord(r.Word)
	if r.Op == syntax.DplIn || r.Op == syntax.DplOut {
		if static && (s == "-" || isFD(s)) {
			return // 2>&1, <&-
		}
	}
	if !static {
		a.opaque("a redirection whose target is computed when it runs")
		return
	}
	a.targets = append(a.targets, s)
}

func isFD(s string) bool {
	s = strings.TrimSuffix(s, "-")
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// safeDevices are redirection targets that need no resolving.
var safeDevices = []string{"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/stdin", "/dev/tty", "/dev/zero", "/dev/full"}

// checkTargets makes opaque the redirection targets that cannot be judged
// statically: ones under ~, /proc or /dev/fd (which resolve differently in
// bash than here), relative ones after a cd the check cannot follow, and
// ones inside a .git directory or a git config file (writing there can make
// an allowed git run programs).
func (a *analysis) checkTargets() {
	for _, t := range a.targets {
		clean := filepath.Clean(t)
		switch {
		case slices.Contains(safeDevices, clean):
			continue
		case strings.HasPrefix(t, "~"):
			a.opaque("a redirection to %s, under a home directory this check does not expand", t)
		case clean == "/proc" || strings.HasPrefix(clean, "/proc/") || strings.HasPrefix(clean, "/dev/fd"):
			a.opaque("a redirection to %s, which resolves in the running shell", t)
		case a.cd && !filepath.IsAbs(t):
			a.opaque("a redirection to the relative path %s after a directory change this check cannot follow", t)
		case gitPath(clean):
			a.opaque("a redirection into git's configuration or repository (%s)", t)
		}
	}
}

// gitPath reports whether p is inside a .git directory or names a git
// configuration file.
func gitPath(p string) bool {
	for _, part := range strings.Split(p, "/") {
		if strings.EqualFold(part, ".git") || strings.EqualFold(part, ".gitconfig") || strings.EqualFold(part, ".gitmodules") {
			return true
		}
	}
	return strings.HasSuffix(p, "git/config")
}

// assign checks an assignment (a prefix, a standalone one, or an argument
// of export/declare/local/readonly/typeset).
func (a *analysis) assign(as *syntax.Assign) {
	if as.Name != nil {
		if r := varNameProblem(as.Name.Value); r != "" {
			a.opaque("an assignment to %s: %s", as.Name.Value, r)
		}
	}
	if as.Index != nil {
		a.arithm(as.Index, "an array subscript")
	}
	if as.Array != nil {
		for _, el := range as.Array.Elems {
			if el.Index != nil {
				a.arithm(el.Index, "an array subscript")
			}
		}
	}
}

// decl checks declare, local, export, readonly, typeset and nameref.
func (a *analysis) decl(d *syntax.DeclClause) {
	if d.Variant.Value == "nameref" {
		a.opaque("nameref makes one variable stand for another")
	}
	for _, as := range d.Args {
		if as.Naked && as.Name == nil && as.Value != nil {
			s, static := staticWord(as.Value)
			switch {
			case !static:
				a.opaque("%s with an argument computed when it runs", d.Variant.Value)
			case strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+"):
				if d.Variant.Value != "export" && strings.ContainsAny(s[1:], "ni") {
					a.opaque("%s %s: integer and nameref variables evaluate what is assigned to them", d.Variant.Value, s)
				}
			default:
				name, _, _ := strings.Cut(s, "=")
				if r := varNameProblem(name); r != "" {
					a.opaque("%s of %s: %s", d.Variant.Value, name, r)
				}
			}
			continue
		}
		a.assign(as)
	}
}

// paramExp makes opaque the parameter expansions that can run code.
func (a *analysis) paramExp(p *syntax.ParamExp) {
	allIndex := false
	if w, ok := p.Index.(*syntax.Word); ok {
		s, static := staticWord(w)
		allIndex = static && (s == "@" || s == "*")
	}
	if p.Excl && p.Names == 0 && !allIndex {
		a.opaque("an indirect expansion ${!x}, which evaluates the value of x as a name")
	}
	if p.Index != nil && !allIndex {
		a.arithm(p.Index, "an array subscript")
	}
	if p.Slice != nil {
		a.arithm(p.Slice.Offset, "a ${x:offset:length} slice")
		a.arithm(p.Slice.Length, "a ${x:offset:length} slice")
	}
	if p.Exp != nil && p.Exp.Op == syntax.OtherParamOps {
		op := ""
		if p.Exp.Word != nil {
			op, _ = staticWord(p.Exp.Word)
		}
		switch op {
		case "Q", "U", "u", "L", "a", "A", "K", "k", "E":
		default:
			a.opaque("the expansion ${x@%s}, which can run commands", op)
		}
	}
}

// arithm makes an arithmetic expression opaque unless it uses only number
// literals: bash evaluates variables in arithmetic recursively, and a value
// such as a[$(cmd)] runs cmd.
func (a *analysis) arithm(x syntax.ArithmExpr, where string) {
	if x != nil && !literalArithm(x) {
		a.opaque("arithmetic in %s on a variable or expansion, whose value bash evaluates (a[$(cmd)] runs cmd)", where)
	}
}

func literalArithm(x syntax.ArithmExpr) bool {
	switch x := x.(type) {
	case *syntax.BinaryArithm:
		return literalArithm(x.X) && literalArithm(x.Y)
	case *syntax.UnaryArithm:
		return literalArithm(x.X)
	case *syntax.ParenArithm:
		return literalArithm(x.X)
	case *syntax.Word:
		s, static := staticWord(x)
		return static && isNumber(s)
	}
	return false
}

// isNumber reports whether s is a bash integer literal (12, 0x1f, 2#101).
func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '#' || r == '@' || r == '_') {
			return false
		}
	}
	return s[0] >= '0' && s[0] <= '9'
}

// call reports the command named by args[0] and, for wrappers, the
// command they run.
func (a *analysis) call(args []*syntax.Word, depth int) {
	words := make([]string, len(args))
	static := make([]bool, len(args))
	for i, w := range args {
		words[i], static[i] = staticWord(w)
	}
	a.command(words, static, depth)
}

// command reports words[0] and follows wrappers. static[i] says whether
// words[i] could be read.
func (a *analysis) command(words []string, static []bool, depth int) {
	if len(words) == 0 {
		return
	}
	if !static[0] {
		a.opaque("a command whose name is computed when it runs")
		return
	}
	w := words[0]
	name := filepath.Base(w)
	if w == "--" && len(words) > 1 {
		// `time -- rm x`: the shell's time keyword takes -- and runs the
		// rest, which the parser hands over as a command named -- (it ran
		// rm under a deny rule for rm: red team round 16).
		a.command(words[1:], static[1:], depth+1)
		return
	}
	switch {
	case w == "":
		a.opaque("an empty command name")
		return
	case !strings.Contains(w, "/"):
		a.add(w)
	case filepath.IsAbs(w) && filepath.Clean(w) == w:
		// The path as written, so that a rule for the bare name does not
		// allow it; and the base name, so that a deny rule still matches.
		a.add(w)
		a.add(name)
	default:
		a.opaque("the command %s is named by a relative or unclean path", w)
		a.add(name)
	}
	rest, restStatic := words[1:], static[1:]
	inner := func(i int) {
		if i < len(rest) {
			a.command(rest[i:], restStatic[i:], depth+1)
		}
	}
	dynamic := !allStatic(restStatic)
	check := func(r string) {
		if r != "" {
			a.opaque("%s: %s", name, r)
		}
	}
	if dynamicLoader(name) {
		// `/lib64/ld-linux-x86-64.so.2 /bin/rm x` runs rm: under a deny
		// rule for rm it ran unasked (red team round 14).
		a.opaque("%s is the dynamic loader, which runs the program named in its arguments", name)
		return
	}

	switch name {
	case "bash", "sh", "zsh", "dash", "ksh", "mksh", "fish":
		a.shell(name, rest, restStatic, depth)
	case "eval":
		a.opaque("eval runs a string as code")
		if !dynamic {
			a.parse(strings.Join(rest, " "), depth+1)
		}
	case "source", ".":
		if len(rest) > 0 {
			a.opaque("%s runs a script file this check cannot read", name)
		}
	case "exec", "command", "builtin":
		if len(rest) > 0 {
			a.opaque("%s runs another command in a way this check does not follow", name)
			i, _ := wrapperArgs(name, rest, restStatic)
			inner(i)
		}
	case "env":
		a.env(rest, restStatic, depth)
	case "xargs":
		a.opaque("xargs runs a command with arguments read when it runs")
		i, ok := wrapperArgs(name, rest, restStatic)
		if !ok {
			return
		}
		if i < len(rest) {
			inner(i)
		} else {
			a.add("echo") // xargs runs echo by default
		}
	case "nohup", "setsid", "nice", "ionice", "stdbuf", "chroot", "doas", "sudo", "timeout", "flock", "strace", "ltrace", "time", "watch":
		a.wrapper(name, rest, restStatic, depth)
	case "su", "runuser", "sg":
		a.opaque("%s starts a shell", name)
	case "trap", "alias", "enable", "hash", "fc", "compgen", "complete",
		"parallel", "at", "batch", "crontab", "systemd-run", "tmux", "screen", "expect", "script",
		"gdb", "sqlite3", "psql", "mysql", "m4", "dc", "ed", "ex", "vi", "vim", "nvim", "view", "vimdiff", "gvim",
		"emacs", "emacsclient", "mail", "mailx", "tcpdump", "pkexec", "sshpass", "unshare", "nsenter",
		"taskset", "chrt", "prlimit", "numactl", "fakeroot", "firejail", "bwrap", "xvfb-run", "newgrp",
		"entr", "nodemon", "perf", "valgrind", "catchsegv", "dbus-launch", "setpriv", "ssh-agent", "busybox", "toybox",
		// Red team round 15: each ran rm under a deny rule for rm.
		"setarch", "linux32", "linux64", "x86_64", "i386", "uname26", "capsh", "run-parts", "start-stop-daemon", "logsave",
		"groff", "troff", "nroff", "dbus-run-session", "gpg-agent", "systemd-cat", "systemd-inhibit", "runcon", "dpkg", "apt-get", "apt",
		"ip", "chpst", "softlimit", "envdir", "setuidgid", "daemonize", "sponge", "faketime", "proxychains", "proxychains4", "torsocks",
		"diff3", "sdiff": // --diff-program (round 16)
		a.opaque("%s can run commands or code named in its arguments", name)
	case "find":
		a.find(rest, restStatic, depth)
	case "git":
		// Whatever its subcommand, git reads the repository's
		// configuration and attributes, which tools can write, and runs
		// the programs they name (core.fsmonitor on status, hooks, filter
		// and diff drivers, the pager): `cp x .git/config; git status`
		// runs anything (found from outside). The git built-in runs none
		// of them; a rule that allows every command still allows git here.
		a.opaque("git runs programs named in the repository's configuration and attributes (core.fsmonitor, hooks, filters, diff drivers), which tools can write; use the git built-in, which runs none of them")
	case "sed", "gsed":
		check(sedProblem(rest, restStatic))
	case "awk", "gawk", "mawk", "nawk", "busybox-awk":
		check(awkProblem(rest, restStatic))
	case "tar", "gtar", "bsdtar", "zip", "rsync", "ssh", "scp", "sftp", "less", "more", "man", "wget", "cpio", "split", "sort":
		check(optionProblem(name, rest, restStatic))
	case "mapfile", "readarray":
		check(varArgsProblem(name, rest, restStatic))
	case "read", "printf", "getopts", "unset", "wait":
		check(varArgsProblem(name, rest, restStatic))
	case "test", "[":
		for i, s := range rest {
			if s == "-v" || s == "-R" {
				if i+1 >= len(rest) || !restStatic[i+1] || strings.Contains(rest[i+1], "[") {
					a.opaque("%s -v on a subscript or a computed name, which bash evaluates", name)
				}
			}
		}
	case "cd", "pushd", "popd":
		// A relative redirection target after a cd is opaque; at run time
		// it is also checked against each static directory named here.
		a.cd = true
		for i, d := range rest {
			if restStatic[i] && !strings.HasPrefix(d, "-") {
				a.dirs = append(a.dirs, d)
			}
		}
	}
}

// shell follows `bash -c 'script'`; a shell reading a file or stdin runs
// what this check cannot read.
func (a *analysis) shell(name string, rest []string, static []bool, depth int) {
	script := false
	for i := 0; i < len(rest); i++ {
		s := rest[i]
		if !static[i] {
			a.opaque("%s with an argument computed when it runs", name)
			return
		}
		switch {
		case s == "--" || s == "-":
			i++
			if script && i < len(rest) {
				a.parse(rest[i], depth+1)
				return
			}
			a.opaque("%s running a script this check cannot read", name)
			return
		case s == "--rcfile" || s == "--init-file" || s == "-o" || s == "+o" || s == "-O" || s == "+O":
			i++
		case strings.HasPrefix(s, "--"):
			if strings.Contains(s, "rcfile") || strings.Contains(s, "init-file") {
				a.opaque("%s %s reads a startup file", name, s)
			}
		case (strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+")) && len(s) > 1:
			if strings.ContainsRune(s, 'c') {
				script = true
			}
			if strings.ContainsAny(s, "is") {
				a.opaque("%s %s reads commands from startup files or stdin", name, s)
			}
			if strings.ContainsAny(s[1:], "oO") {
				i++ // -o option / -O shopt: the value follows
			}
		default:
			if script {
				a.parse(s, depth+1)
			} else {
				a.opaque("%s running a script this check cannot read", name)
			}
			return
		}
	}
	// A shell reading stdin: what it runs is unknown.
	a.opaque("%s running a script this check cannot read", name)
}

// env follows env's command; options and assignments to variables that
// name programs are opaque.
func (a *analysis) env(rest []string, static []bool, depth int) {
	i := 0
	for ; i < len(rest); i++ {
		s := rest[i]
		if !static[i] {
			a.opaque("env with an argument computed when it runs")
			return
		}
		if s == "--" {
			i++
			break
		}
		if strings.HasPrefix(s, "-") {
			a.opaque("env %s: env options (-S, -i, -u, -C, …) change what runs or how it is found", s)
			if slices.Contains([]string{"-u", "-C", "-S", "--unset", "--chdir", "--split-string"}, s) {
				i++ // its value
			}
			continue
		}
		k, _, ok := strings.Cut(s, "=")
		if !ok {
			break
		}
		if r := varNameProblem(k); r != "" {
			a.opaque("env %s=…: %s", k, r)
		}
	}
	if i < len(rest) {
		a.command(rest[i:], static[i:], depth+1)
	}
}

// find reports find and the commands of -exec and friends.
func (a *analysis) find(rest []string, static []bool, depth int) {
	if !allStatic(static) {
		a.opaque("find with an argument computed when it runs (it could be -exec)")
	}
	for i, s := range rest {
		switch s {
		case "-exec", "-execdir", "-ok", "-okdir":
			a.opaque("find %s runs a command with file names as arguments", s)
			end := i + 1
			for end < len(rest) && rest[end] != ";" && rest[end] != "+" {
				end++
			}
			if i+1 < end {
				a.command(rest[i+1:end], static[i+1:end], depth+1)
			}
		case "-fprint", "-fprint0", "-fprintf", "-fls":
			a.opaque("find %s writes a file", s)
		}
	}
}

// wrapper follows the command a wrapper runs.
func (a *analysis) wrapper(name string, rest []string, static []bool, depth int) {
	i, ok := wrapperArgs(name, rest, static)
	if !ok {
		a.opaque("%s with options this check does not know", name)
		return
	}
	switch {
	case name == "watch":
		// watch runs its arguments joined, with sh -c.
		if i < len(rest) {
			a.parse(strings.Join(rest[i:], " "), depth+1)
		}
	case name == "flock" && i < len(rest) && (rest[i] == "-c" || rest[i] == "--command"):
		if i+1 < len(rest) {
			a.parse(rest[i+1], depth+1)
		}
	case name == "sudo" && i >= len(rest):
		// sudo -s, sudo -i, sudo -e and friends: no command.
		for _, s := range rest {
			if strings.HasPrefix(s, "-") && !strings.HasPrefix(s, "--") && strings.ContainsAny(s, "sie") {
				a.opaque("sudo %s starts a shell or an editor", s)
			}
		}
	default:
		if i < len(rest) {
			a.command(rest[i:], static[i:], depth+1)
		}
	}
}

// optSpec is what a wrapper's options look like: flags are short options
// without a value, values short options with one; long options are listed
// with a trailing '=' when they take a value.
type optSpec struct {
	flags, values string
	long          []string
	operands      int // fixed operands before the command (timeout's duration)
}

var wrapperSpecs = map[string]optSpec{
	"nohup":   {},
	"setsid":  {flags: "cfw", long: []string{"--ctty", "--fork", "--wait"}},
	"nice":    {values: "n", long: []string{"--adjustment="}},
	"ionice":  {flags: "t", values: "cnp", long: []string{"--class=", "--classdata=", "--ignore"}},
	"stdbuf":  {values: "ioe", long: []string{"--input=", "--output=", "--error="}},
	"chroot":  {long: []string{"--userspec=", "--groups=", "--skip-chdir"}, operands: 1},
	"doas":    {flags: "Lns", values: "uC"},
	"sudo":    {flags: "AbEeHiKklnPSsVv", values: "CDghpRrTtUu", long: []string{"--preserve-env", "--login", "--shell", "--non-interactive", "--user=", "--group="}},
	"timeout": {flags: "v", values: "ks", long: []string{"--foreground", "--preserve-status", "--verbose", "--kill-after=", "--signal="}, operands: 1},
	"flock":   {flags: "sexnuoF", values: "wE", long: []string{"--shared", "--exclusive", "--nonblock", "--unlock", "--close", "--no-fork", "--timeout=", "--conflict-exit-code=", "--verbose"}, operands: 1},
	"strace":  {flags: "cCdfFhiqrtTvVwxyzZ", values: "abeEIoOpPsSUuX"},
	"ltrace":  {flags: "bcCfhiLrStTV", values: "aAeFlnopsuwDx"},
	"time":    {flags: "pvaq", values: "fo", long: []string{"--portability", "--verbose", "--append", "--quiet", "--format=", "--output="}},
	"watch":   {flags: "bcdeghptx", values: "nq", long: []string{"--beep", "--color", "--differences", "--errexit", "--chgexit", "--no-title", "--precise", "--exec", "--interval="}},
	"xargs":   {flags: "0prtxo", values: "adEIiLlnPs", long: []string{"--null", "--interactive", "--verbose", "--exit", "--no-run-if-empty", "--open-tty", "--arg-file=", "--delimiter=", "--eof=", "--replace=", "--max-lines=", "--max-args=", "--max-procs=", "--max-chars=", "--process-slot-var="}},
	"exec":    {flags: "cl", values: "a"},
	"command": {flags: "pvV"},
	"builtin": {},
}

// wrapperArgs returns the index of the wrapped command in a wrapper's
// arguments, past its options and their values (getopt rules: -uroot,
// -Eu root, --user=root, --user root), VAR=x assignments (sudo) and fixed
// operands. ok is false for an option the spec does not list or an
// argument computed when it runs.
func wrapperArgs(name string, args []string, static []bool) (int, bool) {
	spec := wrapperSpecs[name]
	i := 0
	for i < len(args) {
		if !static[i] {
			return i, false
		}
		s := args[i]
		switch {
		case s == "--":
			i++
			goto operands
		case strings.HasPrefix(s, "--"):
			key, _, hasValue := strings.Cut(s, "=")
			switch {
			case slices.Contains(spec.long, key+"="):
				if !hasValue {
					i++
				}
			case slices.Contains(spec.long, key) && !hasValue:
			case slices.Contains(spec.long, key) && key == "--preserve-env":
			default:
				return i, false
			}
			i++
		case strings.HasPrefix(s, "-") && len(s) > 1:
			if name == "nice" && isNumber(s[1:]) {
				i++ // nice -10
				continue
			}
			for k := 1; k < len(s); k++ {
				switch {
				case strings.IndexByte(spec.flags, s[k]) >= 0:
				case strings.IndexByte(spec.values, s[k]) >= 0:
					if k == len(s)-1 {
						i++ // the value is the next argument
					}
					k = len(s)
				default:
					return i, false
				}
			}
			i++
		case name == "sudo" && strings.Contains(s, "=") && !strings.HasPrefix(s, "="):
			k, _, _ := strings.Cut(s, "=")
			if varNameProblem(k) != "" {
				return i, false
			}
			i++
		default:
			goto operands
		}
	}
operands:
	i += spec.operands
	return i, i <= len(args) || spec.operands == 0
}

// programVars are variables that name programs or files programs run, or
// change how names resolve: assigning one makes a line opaque.
var programVars = []string{
	"PATH", "HOME", "SHELL", "ENV", "BASH_ENV", "CDPATH", "PS4", "PROMPT_COMMAND", "PAGER", "EDITOR", "VISUAL",
	"BROWSER", "SHELLOPTS", "BASHOPTS", "GLOBIGNORE", "TMPDIR", "INPUTRC", "TERMINFO", "MAKEFLAGS", "MFLAGS",
	"CC", "CXX", "CPP", "LD", "AR", "AS", "FC", "ZIPOPT", "UNZIP", "TAR_OPTIONS", "GREP_OPTIONS", "LESSOPEN", "LESSCLOSE",
	"OLDPWD", "PWD", "PROMPT_DIRTRIM", "HISTFILE", "MAIL", "MAILPATH", "EXECIGNORE",
}

var programVarPrefixes = []string{
	"GIT_", "LD_", "DYLD_", "BASH_", "PYTHON", "PERL", "RUBY", "NODE_", "NPM_", "YARN_", "CARGO_", "RUSTC", "RUSTUP_",
	"GO", "CGO_", "JAVA", "_JAVA", "JDK_", "LESS", "SSH_", "SUDO_", "GPG", "GNUPG", "XDG_", "MAN", "DOCKER_", "KUBE",
	"RSYNC_", "CVS_", "PIP_", "CONDA", "VIRTUAL_ENV", "GEM_", "BUNDLE_", "COMPOSER", "PHP", "LUA_", "TCL", "R_",
	"MAVEN_", "GRADLE_", "ANT_", "SBT_", "DENO_", "BUN_", "HG", "SVN_", "OPENSSL_", "SSL_", "CURL_", "WGET",
}

var programVarSuffixes = []string{
	"PAGER", "EDITOR", "_OPTIONS", "OPTS", "_OPT", "FLAGS", "_COMMAND", "_CMD", "_PROGRAM", "_PROG", "ASKPASS",
	"SHELL", "RSH", "PATH", "HOME", "_CONFIG", "RC", "_HOOK", "_HOOKS", "_PLUGINS", "_EXEC", "_WRAPPER",
}

// varNameProblem says why assigning the variable name could change what a
// line runs ("" when it cannot): a name that is not a plain identifier
// (its subscript is evaluated), or one of programVars.
func varNameProblem(name string) string {
	if name == "" || strings.ContainsAny(name, "[]") || !validName(name) {
		return "not a plain variable name (bash evaluates subscripts)"
	}
	up := strings.ToUpper(name)
	if slices.Contains(programVars, up) {
		return "the variable names a program or changes how commands are found"
	}
	for _, p := range programVarPrefixes {
		if strings.HasPrefix(up, p) {
			return "the variable names a program or changes how commands are found"
		}
	}
	for _, s := range programVarSuffixes {
		if strings.HasSuffix(up, s) {
			return "the variable names a program or changes how commands are found"
		}
	}
	return ""
}

func validName(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// varArgsProblem checks the builtins that assign variables named in their
// arguments (read, printf -v, mapfile, getopts, unset, wait -p).
func varArgsProblem(name string, rest []string, static []bool) string {
	if name == "printf" && len(rest) > 0 && !static[0] {
		return "a first argument computed when it runs (it could be -v NAME)"
	}
	if !allStatic(static) && name != "printf" {
		return "an argument computed when it runs (it could name a variable)"
	}
	var names []string
	switch name {
	case "printf":
		if len(rest) >= 2 && rest[0] == "-v" {
			if !static[1] {
				return "printf -v into a computed name"
			}
			names = append(names, rest[1])
		} else if len(rest) >= 1 && strings.HasPrefix(rest[0], "-v") {
			if !static[0] {
				return "printf -v into a computed name"
			}
			names = append(names, strings.TrimPrefix(rest[0], "-v"))
		}
	case "getopts":
		if len(rest) >= 2 {
			names = append(names, rest[1])
		}
	case "wait":
		for i, s := range rest {
			if s == "-p" && i+1 < len(rest) {
				names = append(names, rest[i+1])
			}
		}
	default: // read, mapfile, readarray, unset
		values := map[string]string{"read": "adinNptu", "mapfile": "dnOsuCc", "readarray": "dnOsuCc", "unset": ""}[name]
		for i := 0; i < len(rest); i++ {
			s := rest[i]
			if strings.HasPrefix(s, "-") && len(s) > 1 {
				if (name == "mapfile" || name == "readarray") && strings.ContainsRune(s, 'C') {
					return "-C runs a callback"
				}
				if last := s[len(s)-1]; strings.IndexByte(values, last) >= 0 && i+1 < len(rest) {
					if last == 'a' {
						names = append(names, rest[i+1])
					}
					i++
				}
				continue
			}
			names = append(names, s)
		}
	}
	for _, n := range names {
		if r := varNameProblem(n); r != "" {
			return fmt.Sprintf("assigns %s: %s", n, r)
		}
	}
	return ""
}

// sedProblem says why a sed command line may run a program or write a file
// it does not name as an operand: the e command or s///e flag, the w and W
// commands or s///w flag, a script file, or a script this check cannot
// parse.
func sedProblem(rest []string, static []bool) string {
	var scripts []string
	explicit := false
	for i := 0; i < len(rest); i++ {
		if !static[i] {
			return "an argument computed when it runs"
		}
		s := rest[i]
		switch {
		case s == "--":
			i = len(rest)
		case s == "-e" || s == "--expression":
			if i+1 < len(rest) {
				scripts = append(scripts, rest[i+1])
			}
			explicit = true
			i++
		case strings.HasPrefix(s, "--expression="):
			scripts = append(scripts, strings.TrimPrefix(s, "--expression="))
			explicit = true
		case s == "-f" || strings.HasPrefix(s, "--file") || (strings.HasPrefix(s, "-") && !strings.HasPrefix(s, "--") && strings.ContainsRune(s, 'f')):
			return "a script file this check cannot read"
		case strings.HasPrefix(s, "-e"):
			scripts = append(scripts, s[2:])
			explicit = true
		case s == "-l" || s == "--line-length":
			i++
		case strings.HasPrefix(s, "-") && len(s) > 1:
			if !strings.HasPrefix(s, "--") && strings.ContainsRune(strings.TrimPrefix(s, "-"), 'e') && !strings.HasPrefix(s, "-i") {
				// -ne 'script': the e takes the next argument.
				if i+1 < len(rest) {
					scripts = append(scripts, rest[i+1])
				}
				explicit = true
				i++
			}
		default:
			if !explicit {
				scripts = append(scripts, s)
				explicit = true
			}
		}
	}
	for _, sc := range scripts {
		if r := sedScriptProblem(sc); r != "" {
			return r
		}
	}
	return ""
}

// sedScriptProblem parses a sed script far enough to find its commands.
func sedScriptProblem(sc string) string {
	i := 0
	skipSpace := func() {
		for i < len(sc) && strings.IndexByte(" \t\n;", sc[i]) >= 0 {
			i++
		}
	}
	// delimited reads up to the next unescaped d and returns false at the
	// end of the script.
	delimited := func(d byte) bool {
		for i < len(sc) {
			switch sc[i] {
			case '\\':
				i += 2
				continue
			case d:
				i++
				return true
			}
			i++
		}
		return false
	}
	// delimitedTwice skips the two sections of y/…/…/ and s/…/…/.
	delimitedTwice := func(d byte) bool {
		for range 2 {
			if !delimited(d) {
				return false
			}
		}
		return true
	}
	toEOL := func() {
		for i < len(sc) && sc[i] != '\n' {
			i++
		}
	}
	for {
		skipSpace()
		if i >= len(sc) {
			return ""
		}
		// Addresses: numbers, $, /re/, \cREc, first~step, addr1,+N, !.
		for i < len(sc) {
			c := sc[i]
			switch {
			case c >= '0' && c <= '9' || c == '$' || c == ',' || c == '~' || c == '+' || c == '!' || c == ' ':
				i++
			case c == '/':
				i++
				if !delimited('/') {
					return "a sed script this check cannot parse"
				}
				for i < len(sc) && (sc[i] == 'I' || sc[i] == 'M') {
					i++
				}
			case c == '\\' && i+1 < len(sc):
				d := sc[i+1]
				i += 2
				if !delimited(d) {
					return "a sed script this check cannot parse"
				}
			default:
				goto command
			}
		}
	command:
		if i >= len(sc) {
			return ""
		}
		c := sc[i]
		i++
		switch c {
		case '{', '}', '=', 'd', 'D', 'g', 'G', 'h', 'H', 'n', 'N', 'p', 'P', 'x', 'z', 'F':
		case 'q', 'Q', 'l', 'L':
			for i < len(sc) && sc[i] >= '0' && sc[i] <= '9' {
				i++
			}
		case ':', 'b', 't', 'T', 'v':
			for i < len(sc) && sc[i] != ';' && sc[i] != '\n' && sc[i] != '}' {
				i++
			}
		case 'a', 'i', 'c', 'r', 'R', '#':
			toEOL()
		case 'y':
			if i >= len(sc) {
				return "a sed script this check cannot parse"
			}
			d := sc[i]
			i++
			if !delimitedTwice(d) {
				return "a sed script this check cannot parse"
			}
		case 's':
			if i >= len(sc) {
				return "a sed script this check cannot parse"
			}
			d := sc[i]
			i++
			if !delimitedTwice(d) {
				return "a sed script this check cannot parse"
			}
			for i < len(sc) && sc[i] != ';' && sc[i] != '\n' && sc[i] != '}' {
				switch sc[i] {
				case 'e':
					return "the s///e flag runs the pattern space as a command"
				case 'w', 'W':
					return "the s///w flag writes a file"
				}
				i++
			}
		case 'e':
			return "the e command runs a command"
		case 'w', 'W':
			return "the w command writes a file"
		default:
			return "a sed script this check cannot parse"
		}
	}
}

// awkProblem says why an awk command line may run a program or write a
// file: a program file, extensions, or a program that uses system(),
// pipes, getline or output redirection (checked by looking for |, >,
// system and getline anywhere in it, so a comparison with > is opaque too).
func awkProblem(rest []string, static []bool) string {
	for i := 0; i < len(rest); i++ {
		if !static[i] {
			return "an argument computed when it runs"
		}
		s := rest[i]
		switch {
		case s == "-v" || s == "-F":
			i++
		case strings.HasPrefix(s, "-v") || strings.HasPrefix(s, "-F"):
		case s == "--":
			if i+1 < len(rest) {
				return awkProgramProblem(rest[i+1])
			}
			return ""
		case strings.HasPrefix(s, "-"):
			return fmt.Sprintf("the option %s (program files, extensions and the like)", s)
		default:
			return awkProgramProblem(s)
		}
	}
	return ""
}

func awkProgramProblem(prog string) string {
	for _, bad := range []string{"system", "|", ">", "getline", "@", "ENVIRON", "PROCINFO"} {
		if strings.Contains(prog, bad) {
			return fmt.Sprintf("the program uses %q (commands, pipes or output redirection)", bad)
		}
	}
	return ""
}

// optionProblems are options that make a program run another program or
// read a configuration that can (by program).
var optionProblems = map[string][]string{
	"tar":    {"--to-command", "--checkpoint-action", "--use-compress-program", "-I", "--rsh-command", "--info-script", "--new-volume-script", "-F", "--rmt-command"},
	"zip":    {"-T", "--test", "-TT", "--unzip-command"},
	"rsync":  {"-e", "--rsh", "--rsync-path", "--config", "--daemon"},
	"ssh":    {"-o", "-F", "-S", "-J", "-L", "-R", "-D", "-w", "-E", "-i"},
	"scp":    {"-o", "-F", "-S", "-J"},
	"sftp":   {"-o", "-F", "-S", "-D", "-J"},
	"less":   {"+", "-k", "--lesskey-file", "--lesskey-src"},
	"more":   {"+"},
	"man":    {"-P", "--pager", "-H", "--html", "-C", "--config-file", "-l", "--local-file"},
	"wget":   {"--use-askpass", "-e", "--execute", "--config", "-o", "-O", "--output-document", "--output-file", "-a", "--append-output"},
	"cpio":   {"--rsh-command", "-F", "--file", "-O", "-I"},
	"gtar":   {"--to-command", "--checkpoint-action", "--use-compress-program", "-I", "--rsh-command", "--info-script", "--new-volume-script", "-F", "--rmt-command"},
	"bsdtar": {"--use-compress-program", "-I", "--options"},
	"split":  {"--filter"},
	"sort":   {"--compress-program"},
}

// optionProblem checks a program's arguments against optionProblems,
// including short option clusters (tar -xvIcmd, rsync -avze ssh).
func optionProblem(name string, rest []string, static []bool) string {
	if !allStatic(static) {
		return "an argument computed when it runs (it could be an option that runs a program)"
	}
	bad := optionProblems[name]
	for i, s := range rest {
		if s == "--" {
			break
		}
		key, _, _ := strings.Cut(s, "=")
		if slices.Contains(bad, key) {
			return fmt.Sprintf("the option %s can run a program", key)
		}
		// GNU programs take any unambiguous abbreviation of a long
		// option: sort --compress=sh, tar --to-com=cmd.
		if strings.HasPrefix(key, "--") && len(key) > 2 {
			for _, b := range bad {
				if strings.HasPrefix(b, key) {
					return fmt.Sprintf("the option %s (%s) can run a program", key, b)
				}
			}
		}
		if strings.HasPrefix(s, "+") && slices.Contains(bad, "+") {
			return fmt.Sprintf("%s runs the commands in %s at start", name, s)
		}
		if strings.HasPrefix(s, "-") && !strings.HasPrefix(s, "--") && len(s) > 2 {
			for _, c := range s[1:] {
				if slices.Contains(bad, "-"+string(c)) {
					return fmt.Sprintf("the option -%c (in %s) can run a program", c, s)
				}
			}
		}
		// tar's old-style first argument: "xzf" without a dash.
		if i == 0 && (name == "tar" || name == "gtar") && !strings.HasPrefix(s, "-") && strings.ContainsAny(s, "IF") {
			return fmt.Sprintf("the option letters %s include one that can run a program", s)
		}
	}
	return ""
}

func allStatic(b []bool) bool {
	for _, v := range b {
		if !v {
			return false
		}
	}
	return true
}

// staticWord returns the value of a word that has no expansions, with
// quotes and backslash escapes removed as bash would. A word is not static
// when bash would expand it: parameters, substitutions, and unquoted
// globs (*, ?, [...]), braces ({a,b}, {1..3}) and a leading ~.
func staticWord(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for i, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			if expands(p.Value, i == 0) {
				return "", false
			}
			b.WriteString(unescape(p.Value))
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, dp := range p.Parts {
				lit, ok := dp.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(unescapeDouble(lit.Value))
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// expands reports whether an unquoted literal would be expanded by bash:
// an unescaped glob character, a brace expansion, or a tilde at the start.
func expands(s string, first bool) bool {
	if first && strings.HasPrefix(s, "~") {
		return true
	}
	brace := -1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '*', '?':
			return true
		case '[':
			if strings.IndexByte(s[i+1:], ']') >= 0 {
				return true
			}
		case '{':
			brace = i
		case '}':
			if brace >= 0 {
				inner := s[brace+1 : i]
				if strings.Contains(inner, ",") || strings.Contains(inner, "..") {
					return true
				}
			}
		}
	}
	return false
}

// unescape removes the backslashes of an unquoted literal ("\rm" is "rm").
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			if s[i] == '\n' {
				continue // line continuation
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unescapeDouble removes the backslashes bash removes inside double
// quotes: before $, `, ", \ and a newline.
func unescapeDouble(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// dynamicLoader reports whether name is the file name of a dynamic
// loader (glibc's ld-linux*.so.*, ld.so, musl's ld-musl-*.so.1), which
// runs the program its arguments name.
func dynamicLoader(name string) bool {
	return name == "ld.so" || (strings.HasPrefix(name, "ld-") || strings.HasPrefix(name, "ld64")) && strings.Contains(name, ".so")
}

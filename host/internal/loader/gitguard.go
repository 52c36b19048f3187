package loader

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/switchboard-mcp/switchboard/host/internal/builtins"
	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/sandbox"
	"github.com/switchboard-mcp/switchboard/internal/gitplaceholder"
	"github.com/switchboard-mcp/switchboard/internal/regularfile"
)

// WritableFolders lists the folders some server of cfg may write: the
// project, data_dir (the servers' state folders, external servers' homes),
// the built-ins' grants (the filesystem's roots) and every sandbox block's
// write list. Programs the host runs by name are not looked up there
// (sandbox.LookPath): a server could have put them there.
func WritableFolders(cfg *config.Config) []string {
	out := []string{cfg.ProjectDir, cfg.DataDir}
	for _, b := range cfg.Builtins {
		if bi, ok := builtins.Lookup(b.Name); ok {
			out = append(out, bi.Grants(cfg.ProjectDir, b.Settings).Write...)
		}
		out = append(out, b.Sandbox.Write...)
	}
	for _, p := range cfg.Plugins {
		out = append(out, p.Sandbox.Write...)
	}
	for _, x := range cfg.Externals {
		out = append(out, x.Sandbox.Write...)
	}
	home, _ := os.UserHomeDir()
	for i, p := range out {
		if rest, ok := strings.CutPrefix(p, "~/"); ok && home != "" {
			out[i] = filepath.Join(home, rest)
		}
	}
	return out
}

// gitProtected lists what a person's own git runs programs from, in the
// repositories whose work trees are the writable roots: each repository's
// hooks folder and config (which names fsmonitor, pager, editor, aliases,
// filter drivers, credential helpers, core.hooksPath…), the folder its
// core.hooksPath names, and the same for the repositories of its
// submodules. A server that may write a work tree could otherwise write a
// hook, and the person's next `git commit` in a terminal would run it,
// outside any sandbox: an agent allowed only the filesystem's tools would
// run any command it liked. The sandbox binds these read-only (as Codex and
// Claude Code protect .git's hooks and config); make lists the folders to
// create first when missing, since a folder that does not exist cannot be
// bound, and a hook written into a new one would run. A root that is no
// work tree gets its .git placeholder (repoPlaceholder), and a root whose
// .git is a file (a linked work tree) has that file read-only. A root
// inside another work tree has what of that repository lies in it
// protected too. Only the roots and the work trees around them are looked
// at (a repository deeper in a root is not).
func gitProtected(roots []string) (readOnly, make []string, files []sandbox.File) {
	readOnly, make, files, _ = gitProtectedAt(roots, true)
	return readOnly, make, files
}

// gitProtection is what a sandbox binds read-only of the person's git in
// the writable roots: gitProtected, and for every server but the git
// built-in the whole git folders (repoFolders). Without placehold, the
// .git placeholders are looked at, not made or registered (a check).
func gitProtection(roots []string, gitBuiltin, placehold bool) (readOnly, make []string, files []sandbox.File, refused *unprotectableError) {
	readOnly, make, files, unknown := gitProtectedAt(roots, placehold)
	var links []string
	if !gitBuiltin {
		readOnly = append(readOnly, repoFolders(roots)...)
	}
	// Where each leads, when that is through a link (outside the roots:
	// one inside them refuses the start, below): a read-only bind lands
	// there anyway, and listing it keeps the check honest.
	for _, p := range slices.Clone(readOnly) {
		for _, t := range withTarget(p)[1:] {
			if !slices.Contains(readOnly, t) {
				readOnly = append(readOnly, t)
			}
		}
	}
	for _, root := range roots {
		if l := filepath.Join(root, ".git"); isLink(l) && !slices.Contains(links, l) {
			links = append(links, l)
		}
		for _, p := range readOnly {
			if l := linkBelow(root, p); l != "" && !slices.Contains(links, l) {
				links = append(links, l)
			}
		}
	}
	if len(links) > 0 || len(unknown) > 0 {
		refused = &unprotectableError{links: links, unknown: unknown}
	}
	return readOnly, make, files, refused
}

// withTarget returns path and, when it leads elsewhere through a link,
// where it leads.
func withTarget(path string) []string {
	if r, err := filepath.EvalSymlinks(path); err == nil && r != filepath.Clean(path) {
		return []string{path, r}
	}
	return []string{path}
}

// programFiles returns the files a config value names by path, as the
// program to run or its arguments (programPaths), that are regular files
// or links: relative to the work tree's top, where git runs such
// programs, or after ~/. A bare name is looked up on the person's PATH,
// which the host does not look at. A link is listed even when it leads
// nowhere yet (a program the project builds later): the link itself is
// what a server could re-point or replace, so the start refuses it
// (linkBelow; red team round 18: core.fsmonitor = ./fsmon, a link to a
// tools/fsmon-built the agent then wrote).
func programFiles(value, top string, program bool) []string {
	paths, _ := programPathsOf(value, top)
	return existingPrograms(paths, program)
}

// existingPrograms is programFiles of paths programPaths found.
func existingPrograms(paths []programPath, program bool) []string {
	var out []string
	for _, pp := range paths {
		if pp.bare && !program {
			continue
		}
		matches := []string{pp.path}
		if strings.ContainsAny(pp.path, "*?[") {
			matches, _ = filepath.Glob(pp.path)
		}
		for _, m := range matches {
			if slices.Contains(out, m) {
				continue
			}
			if st, err := os.Stat(m); err == nil && st.Mode().IsRegular() || isLink(m) && errors.Is(err, fs.ErrNotExist) {
				out = append(out, m)
			}
		}
	}
	return out
}

// programPath is a path a command line in a config value names.
type programPath struct {
	path string
	// alt is set for another reading of the word that the host cannot rule
	// out (from the top when a cd came before it; a path after an
	// expansion taken as absolute): protected when something is there,
	// never made.
	alt bool
	// bare is set for a word without a slash, which names a file in the
	// folder only where a program takes it as one (alt too, unless it is a
	// script an interpreter runs or a redirection's input).
	bare bool
}

// programPaths reads a config value as the shell git hands it to reads
// it, enough to find the paths it names: an alias's "!" taken off, words
// split at blanks and at ; & | ( ) < >, quotes and backslashes removed,
// the words inside $(…) and `…` read too, a VAR= prefix taken off, and
// each word with a slash resolved from the folder the command line is in
// by then (the top, where git runs it, and after `cd DIR` that folder).
// A word that begins with an expansion ($GIT_PREFIX, ${PWD}, $(git
// rev-parse --show-toplevel), any $(…)) is read without it: relative to
// the top, and absolute as its alt when it then begins with a slash
// (found from outside: `$(git rev-parse --show-toplevel)/scripts/x`, `cd
// scripts && ./x`, `"$GIT_PREFIX"scripts/x`, `scripts\/x` and
// `bash<scripts/x` left their scripts writable, red team round 18).
func programPaths(value, top, home string) (paths []programPath, unknown bool) {
	return programPathsFrom(value, top, top, home, 0)
}

// programPathsFrom is programPaths of a command line run in the folder
// cwd of the work tree at top (depth: how deeply it is nested in sh -c).
func programPathsFrom(value, cwd, top, home string, depth int) (paths []programPath, unknown bool) {
	var quoted bool // the words are a quoted string's: maybe a command line, maybe a message
	add := func(pp programPath) {
		pp.alt = pp.alt || quoted // protected when there, never made
		if pp.path != "" && !slices.Contains(paths, pp) {
			paths = append(paths, pp)
		}
	}
	cwdKnown := true
	var cmd string       // the command's name (base), "" before it
	var next argKind     // what the next word is, from the option before it
	var operands int     // the command's operands so far
	var incDirs []string // perl -I, ruby -I
	sawScript := false   // the interpreter's script (or code, or input) is known
	var gitOps []string  // a git command's operands so far (bisect run, submodule foreach)
	known := unknown     // what the words before a quoted string made unknown
	reset := func() {
		// An interpreter given no script reads one from its input: a pipe
		// (cat x.sh | sh, echo x | xargs sh) names nothing literal (red
		// team round 21).
		if interpreters[cmd] && !sawScript {
			unknown = true
		}
		cmd, next, operands, incDirs, sawScript, gitOps = "", argNone, 0, nil, false, nil
	}
	// cd moves the folder the rest runs in.
	cd := func(word string) {
		switch d, rest, expanded := programWord(word, cwd, top, home); {
		case word == string(topMark):
			cwd = top
		case word == string(cwdMark):
		case expanded || strings.ContainsAny(word, "$"+string(expansionMark)):
			// cd "$d", cd $(dirname x): where the command goes on from is
			// not known.
			cwdKnown = false
		case d != "":
			cwd = d
		case rest == "" || rest == "-" || rest == "~":
			cwd = top
		default:
			cwd = filepath.Join(cwd, rest)
		}
	}
	// file adds a word that names a file: as a script (made when missing)
	// or not (protected when there).
	file := func(word string, script bool) {
		if script && !literalWord(word) {
			unknown = true // sh $X, sh $(echo x.sh), sh x.s?: what runs is not known
		}
		p, rest, expanded := programWord(word, cwd, top, home)
		if p == "" {
			if rest == "" || strings.ContainsAny(rest, "$"+string(expansionMark)) || strings.Contains(rest, "://") || filepath.IsAbs(rest) {
				return
			}
			// A bare name: a file in the folder when a program takes it as
			// one (sh fsmon.sh, bash <fmt.sh: red team round 19).
			p = filepath.Join(cwd, rest)
			if script && (rest == "." || isDir(p)) {
				p = scriptInFolder(cmd, p) // python3 ., node . (red team round 20)
			}
			add(programPath{path: p, alt: !script, bare: true})
			if !cwdKnown && script {
				unknown = true
			}
			return
		}
		if script && isDir(p) {
			p = scriptInFolder(cmd, p)
		}
		if !cwdKnown && !filepath.IsAbs(rest) && !strings.HasPrefix(rest, "~/") && !expanded {
			unknown = true
		}
		add(programPath{path: p})
		if cwd != top {
			if q, _, _ := programWord(word, top, top, home); q != p {
				add(programPath{path: q, alt: true})
			}
		}
		if expanded && filepath.IsAbs(rest) {
			add(programPath{path: filepath.Clean(rest), alt: true})
		}
	}
	// module adds what a module option loads (python3 -m tools.fsmon,
	// perl -Itools -Mfsmon, node -r ./x): the files in the folders it is
	// looked up in first, where servers may write; one of none there could
	// be put there, which refuses the start.
	module := func(kind argKind, name string) {
		cands, searched := moduleFiles(kind, name, cwd, incDirs)
		found := false
		for _, c := range cands {
			if _, err := os.Stat(c); err == nil {
				add(programPath{path: c})
				found = true
			}
		}
		if !found && searched {
			unknown = true
		}
	}
	// shell reads a command line a command runs (eval 'sh x.sh', trap
	// CMD EXIT, env -S, flock -c, git rebase -x, GIT_EDITOR=…: red team
	// round 22) as a command line of its own, from here.
	shell := func(line string) {
		if depth >= maxSubstitution {
			unknown = true
			return
		}
		inner, innerUnknown := programPathsFrom(line, cwd, top, home, depth+1)
		for _, pp := range inner {
			add(pp)
		}
		unknown = unknown || innerUnknown || !cwdKnown && len(inner) > 0
	}
	// gitConfig reads a git -c key=value: another config or repository
	// is unknown; a program value is read as one (git -c
	// alias.z='!sh z.sh' z, -c core.editor=vi).
	gitConfig := func(kv string) {
		switch runs, value := gitConfigRuns(kv); runs {
		case gitRunsUnknown:
			unknown = true
		case gitRunsProgram:
			shell(value)
		}
	}
	words := shellWords(markFolders(strings.TrimPrefix(strings.TrimSpace(value), "!")), 0)
	for k := 0; k < len(words); k++ {
		w := words[k]
		switch w {
		case commandEnd:
			reset()
			continue
		case quotedLine, runLine:
			reset()
			if quoted {
				unknown = known // a quoted string's words make nothing unknown
			}
			quoted, known = w == quotedLine, unknown
			continue
		case redirectIn:
			if k+1 < len(words) && words[k+1] != commandEnd {
				k++
				file(words[k], true)
				sawScript = true
			}
			continue
		}
		if ext, ok := cutPrefixFold(w, "ext::"); ok && depth < maxSubstitution {
			// git ls-remote "ext::sh e.sh": a command git runs (round 21).
			inner, innerUnknown := programPathsFrom(ext, cwd, top, home, depth+1)
			for _, pp := range inner {
				add(pp)
			}
			unknown = unknown || innerUnknown
			continue
		}
		if next != argNone {
			kind := next
			next = argNone
			switch kind {
			case argCd:
				cd(w)
			case argFile:
				file(w, true)
				sawScript = true
			case argUnknown:
				unknown = true
			case argShell:
				shell(w)
			case argGitConfig:
				gitConfig(w)
			case argGitDir:
				if d, _, expanded := programWord(w+"/.", cwd, top, home); expanded || filepath.Dir(d+"/x") != top {
					unknown = true // git -C sub: a repository the host does not know of
				}
			case argCode:
				sawScript = true
				if cmd == "python" && !literalWord(w) {
					unknown = true
				}
				switch {
				case cmd == "python":
					for _, m := range pythonImports(w) {
						module(argPyModule, m)
					}
					if pythonRuns.MatchString(w) {
						unknown = true // exec(open('x.py').read()), os.system (round 22)
					}
				case interpreters[cmd] && (strings.ContainsRune(w, expansionMark) || strings.HasPrefix(strings.TrimSpace(w), "$")):
					// sh -c "$(cat x.txt)", sh -c "$X": the code itself is
					// not known (its own $1 are the inner shell's, read below).
					unknown = true
				case cmd != "sh" && codeRuns(w):
					// perl -e 'system(…)', node -e "require('./x')": program
					// text that runs or loads more (round 22).
					unknown = true
				case cmd == "sh" && depth < maxSubstitution:
					// sh -c SCRIPT: read as a command line of its own, from
					// here (bash -c './a7{,}', bash -c 'cd tools; . x.sh').
					inner, innerUnknown := programPathsFrom(w, cwd, top, home, depth+1)
					for _, pp := range inner {
						add(pp)
					}
					unknown = unknown || innerUnknown || !cwdKnown && len(inner) > 0
				}
			case argIncDir:
				incDirs = append(incDirs, w)
			case argPyModule, argPlModule, argJsModule, argRbModule:
				module(kind, w)
				sawScript = sawScript || kind == argPyModule
				if kind == argPyModule {
					next = argRest // python3 -m x: the rest are its arguments
				}
			case argRest:
				next = argRest
			}
			continue
		}
		forms := wordForms(w)
		if cmd == "" {
			switch {
			case shellKeywords[w]:
				continue // do cd x, then ./y: the command is the next word
			case strings.Contains(w, "=") && !strings.HasPrefix(w, "-"):
				name, val, _ := strings.Cut(w, "=")
				if lookupVars[name] {
					unknown = true // GIT_CONFIG_GLOBAL=a.cfg git x: another config (round 21)
				}
				if commandVars[name] {
					shell(val) // GIT_EDITOR='sh x.sh' git commit (round 22)
				}
				for _, f := range forms {
					file(f, false) // VAR=./x: protected when there
				}
				continue
			case strings.ContainsRune(w, expansionMark) || positional(w):
				// eval "$(cat x.sh)", $(…) or a function's "$@" as the
				// command: f() { "$@"; }; f sh x.sh (round 22).
				unknown = true
				continue
			}
			base := commandName(w)
			if n, ok := commandStrings[base]; ok {
				// eval 'sh x.sh', trap 'sh x.sh' EXIT, sg GROUP 'sh x.sh':
				// the words (after n) are a command line (round 22).
				var rest []string
				for k+1 < len(words) && words[k+1] != commandEnd && !strings.HasPrefix(words[k+1], "\x00") {
					k++
					rest = append(rest, words[k])
				}
				if base == "trap" && len(rest) > 0 {
					shell(rest[0])
				} else if len(rest) > n {
					shell(strings.Join(rest[n:], " "))
				}
				continue
			}
			switch {
			case base == "cd" || base == "pushd":
				cmd = "cd"
			case runners[base]:
				// make, npm run, go run, …: what runs is in the project's
				// files (a Makefile, package.json), which servers may write.
				unknown = true
				cmd = base
				continue
			case wrappers[base]:
				// env, exec, nice, timeout 5 …: the command comes later.
				cmd = ""
				opts := optionArgs[base]
				{
					k = skipOptions(words, k+1, opts, func(kind argKind, v string) {
						switch kind {
						case argCd:
							cd(v)
						case argFile:
							file(v, true)
						case argSplit, argShell:
							shell(v) // env -S 'sh x.sh' (round 22)
						case argUnknown:
							unknown = true
						}
					}) - 1
				}
				if base == "timeout" && k+1 < len(words) && duration.MatchString(words[k+1]) {
					k++
				}
				// flock FILE cmd, chrt PRIO cmd, taskset MASK cmd.
				for n := wrapperOperands[base]; n > 0 && k+1 < len(words) && words[k+1] != commandEnd; n-- {
					k++
				}
				if wrapperOperands[base] > 0 {
					// flock FILE -c 'sh x.sh': options after the operand.
					k = skipOptions(words, k+1, opts, func(kind argKind, v string) {
						switch kind {
						case argShell:
							shell(v)
						case argUnknown:
							unknown = true
						}
					}) - 1
				}
				continue
			default:
				cmd = base
				if base == "python3" || strings.HasPrefix(base, "python") {
					cmd = "python"
				}
			}
			for _, f := range forms {
				file(f, false) // the command itself, by path
			}
			continue
		}
		if cmd == "cd" {
			if strings.HasPrefix(w, "-") && w != "-" {
				continue // cd -P, cd --
			}
			cd(w)
			cmd = "cd done"
			continue
		}
		if strings.HasPrefix(w, "-") && len(w) > 1 {
			if kind, val, ok := optionKind(cmd, w); ok {
				if val != "" {
					switch kind {
					case argCd:
						cd(val)
					case argCode:
						sawScript = true // perl -e1
					case argUnknown:
						unknown = true // git --git-dir=fake, --exec-path=tools
					case argShell:
						shell(val) // git grep -O'sh x.sh', --upload-pack=…
					case argGitConfig:
						gitConfig(val)
					case argGitDir:
						unknown = true
					case argFile:
						file(val, true)
						sawScript = true
					case argIncDir:
						incDirs = append(incDirs, val)
					case argPyModule, argPlModule, argJsModule, argRbModule:
						module(kind, val)
					}
				} else {
					next = kind
				}
			}
			if cmd == "find" && (w == "-exec" || w == "-execdir" || w == "-ok" || w == "-okdir") {
				cmd = "" // find … -exec CMD …: CMD is a command
			}
			continue
		}
		operands++
		if cmd == "git" {
			gitOps = append(gitOps, w)
			switch strings.Join(gitOps, " ") {
			case "bisect run":
				cmd, operands = "", 0 // git bisect run sh x.sh: a command (round 22)
				continue
			case "submodule foreach":
				var rest []string
				for k+1 < len(words) && words[k+1] != commandEnd && !strings.HasPrefix(words[k+1], "\x00") {
					k++
					rest = append(rest, words[k])
				}
				shell(strings.Join(rest, " "))
				continue
			}
		}
		if (cmd == "awk" || cmd == "sed") && operands == 1 && !sawScript {
			// awk's and sed's first operand is their program, unless -f
			// or -e gave it: awk 'BEGIN{system(…)}', sed '1e …' (round 22).
			sawScript = true
			if codeRuns(w) || cmd == "sed" && sedRuns(w) {
				unknown = true
			}
			continue
		}
		script := interpreters[cmd] && operands == 1 && next != argRest
		if script {
			sawScript = true
			if w == "-" {
				continue // python3 - < x.py: its input, read above
			}
		}
		for _, f := range forms {
			file(f, script)
		}
	}
	reset()
	if quoted {
		unknown = known
	}
	return paths, unknown
}

// argKind is what an option's argument (or the word after it) is.
type argKind int

const (
	argNone      argKind = iota
	argSkip              // a value: -o errexit, -s KILL
	argCd                // a folder the command runs in: env -C DIR, make -C DIR
	argFile              // a script or a file read as one: awk -f x, --rcfile x
	argCode              // program text: sh -c, python3 -c, perl -e
	argIncDir            // a folder modules are looked up in: perl -I, ruby -I
	argPyModule          // python3 -m mod
	argPlModule          // perl -M mod
	argJsModule          // node -r mod
	argRbModule          // ruby -r lib
	argSplit             // env -S 'a b': a command line
	argRest              // the rest are the program's own arguments
	argUnknown           // a value that makes what runs unknown: git --git-dir, --exec-path
	argGitConfig         // git -c key=value
	argGitDir            // git -C dir
	argShell             // a command line the program runs: git rebase -x, difftool -x, flock -c
)

// optionArgs are, for the commands whose options matter, the options that
// take an argument and what it is (red team round 20: sh -o errexit x.sh,
// timeout -s KILL 5 sh x.sh, python3 -W ignore x.py, perl -I lib x.pl
// left x writable).
var optionArgs = map[string]map[string]argKind{
	"sh":     {"-c": argCode, "-o": argSkip, "+o": argSkip, "-O": argSkip, "+O": argSkip, "--rcfile": argFile, "--init-file": argFile},
	"python": {"-c": argCode, "-m": argPyModule, "-W": argSkip, "-X": argSkip, "-Q": argSkip},
	"perl":   {"-e": argCode, "-E": argCode, "-I": argIncDir, "-M": argPlModule, "-m": argPlModule},
	"ruby":   {"-e": argCode, "-I": argIncDir, "-r": argRbModule, "-C": argCd},
	"node":   {"-e": argCode, "--eval": argCode, "-p": argCode, "--print": argCode, "-r": argJsModule, "--require": argJsModule, "--import": argJsModule, "--loader": argJsModule, "--experimental-loader": argJsModule},
	"awk":    {"-f": argFile, "-v": argSkip, "-F": argSkip},
	"sed":    {"-f": argFile, "--file": argFile, "-e": argCode, "--expression": argCode},
	"make":   {"-f": argFile, "--file": argFile, "--makefile": argFile, "-C": argCd, "--directory": argCd, "-I": argSkip, "-o": argSkip, "-W": argSkip, "-j": argSkip, "-l": argSkip},
	"git": {
		"-C": argGitDir, "-c": argGitConfig, "--git-dir": argUnknown, "--work-tree": argUnknown, "--exec-path": argUnknown, "--config-env": argUnknown, "--namespace": argSkip,
		// Subcommands' options that run a command line (round 22).
		"-x": argShell, "--exec": argShell, "--extcmd": argShell, "-O": argShell, "--open-files-in-pager": argShell,
		"--upload-pack": argShell, "--receive-pack": argShell, "--tree-filter": argShell, "--index-filter": argShell,
		"--msg-filter": argShell, "--env-filter": argShell, "--commit-filter": argShell, "--parent-filter": argShell, "--tag-name-filter": argShell,
	},
	"java":    {"-cp": argSkip, "-classpath": argSkip, "--class-path": argSkip, "-jar": argFile, "-p": argSkip, "--module-path": argSkip},
	"gdb":     {"-x": argFile, "--command": argFile, "-ex": argUnknown, "-ix": argFile, "-iex": argUnknown},
	"flock":   {"-w": argSkip, "--timeout": argSkip, "-E": argSkip, "-c": argShell, "--command": argShell},
	"script":  {"-c": argShell, "--command": argShell},
	"setpriv": {},
	"prlimit": {"-p": argSkip, "--pid": argSkip},
	"runuser": {"-u": argSkip, "-g": argSkip, "-G": argSkip, "-c": argUnknown},
	"nsenter": {"-t": argSkip, "--target": argSkip, "-S": argSkip, "-G": argSkip},
	"strace":  {"-o": argSkip, "-e": argSkip, "-p": argSkip, "-s": argSkip, "-u": argSkip, "-E": argSkip},
	"watch":   {"-n": argSkip, "--interval": argSkip, "-d": argSkip},
	"chrt":    {"-p": argSkip},
	"taskset": {"-p": argSkip},
	"su":      {"-c": argUnknown, "-s": argSkip, "-g": argSkip},
	"env":     {"-u": argSkip, "--unset": argSkip, "-C": argCd, "--chdir": argCd, "-S": argShell, "--split-string": argShell},
	"timeout": {"-s": argSkip, "--signal": argSkip, "-k": argSkip, "--kill-after": argSkip},
	"nice":    {"-n": argSkip, "--adjustment": argSkip},
	"ionice":  {"-c": argSkip, "-n": argSkip, "-p": argSkip},
	"stdbuf":  {"-i": argSkip, "-o": argSkip, "-e": argSkip},
	"sudo":    {"-u": argSkip, "-g": argSkip, "-C": argSkip, "-h": argSkip, "-p": argSkip, "-r": argSkip, "-t": argSkip, "-U": argSkip, "-D": argCd},
	"xargs":   {"-a": argFile, "--arg-file": argFile, "-I": argSkip, "-n": argSkip, "-P": argSkip, "-d": argSkip, "-E": argSkip, "-L": argSkip, "-s": argSkip},
	"exec":    {"-a": argSkip},
}

// optionKind is what option w of cmd takes: its kind, and its value when
// it is in the same word (--rcfile=x, -Itools, -mtools.x).
func optionKind(cmd, w string) (argKind, string, bool) {
	opts := optionArgs[cmd]
	if interpreters[cmd] && optionArgs[cmd] == nil {
		opts = optionArgs["sh"]
	}
	if name, val, ok := strings.Cut(w, "="); ok && strings.HasPrefix(w, "--") {
		if k, found := opts[name]; found {
			return k, val, true
		}
		return argNone, "", false
	}
	if k, found := opts[w]; found {
		return k, "", true
	}
	if !strings.HasPrefix(w, "--") && len(w) > 2 {
		if k, found := opts[w[:2]]; found && k != argSkip && k != argCode || found && (cmd == "perl" || cmd == "ruby") {
			return k, w[2:], true
		}
		// sh -ec 'script', sh -eo pipefail x: a cluster ending in an option
		// that takes the next word.
		if opts["-c"] == argCode && strings.ContainsRune(w[1:], 'c') && (cmd == "sh" || shells[cmd]) {
			return argCode, "", true
		}
		if k, found := opts["-"+w[len(w)-1:]]; found {
			return k, "", true
		}
	}
	return argNone, "", false
}

// skipOptions reads a wrapper's options from words[k:] (opts says which
// take an argument, given to use) and returns the index of the first word
// after them.
func skipOptions(words []string, k int, opts map[string]argKind, use func(argKind, string)) int {
	for ; k < len(words); k++ {
		w := words[k]
		if w == commandEnd || !strings.HasPrefix(w, "-") || w == "-" {
			return k
		}
		if w == "--" {
			return k + 1
		}
		if name, val, ok := strings.Cut(w, "="); ok && strings.HasPrefix(w, "--") {
			if kind, found := opts[name]; found {
				use(kind, val)
			}
			continue
		}
		if kind, found := opts[w]; found && k+1 < len(words) {
			k++
			use(kind, words[k])
		}
	}
	return k
}

// shells are the interpreters that read sh's options.
var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true, "ash": true}

// commandName is a command word's base name, as the tables know it.
func commandName(w string) string {
	base := filepath.Base(w)
	switch {
	case shells[base]:
		return "sh"
	case base == "nodejs":
		return "node"
	case base == "gawk" || base == "mawk" || base == "nawk":
		return "awk"
	case base == "gmake":
		return "make"
	case strings.HasPrefix(base, "python"):
		return "python"
	case base == "rbash":
		return "sh"
	}
	// perl5.36.0, ruby3.2, node18, php8.2: the interpreter.
	for _, name := range []string{"perl", "ruby", "node", "php", "lua", "tclsh"} {
		if v, ok := strings.CutPrefix(base, name); ok && v != "" && strings.Trim(v, "0123456789.") == "" {
			return name
		}
	}
	return base
}

// literalWord reports whether w is a word the shell leaves as it is: no
// expansion (but $GIT_PREFIX and the folders markFolders marked) and no
// glob.
func literalWord(w string) bool {
	w = strings.NewReplacer("${GIT_PREFIX}", "", "$GIT_PREFIX", "", string(topMark), "", string(cwdMark), "").Replace(w)
	return !strings.ContainsAny(w, "$*?%["+string(expansionMark)) && !strings.Contains(w, "{}") &&
		!strings.HasPrefix(w, "/proc/") && !strings.HasPrefix(w, "/dev/fd/")
}

// isDir reports whether p is a folder.
func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// scriptInFolder is the file an interpreter runs when its script operand
// is the folder dir: python3 . runs __main__.py, node . its index.js.
func scriptInFolder(cmd, dir string) string {
	if cmd == "node" || cmd == "deno" {
		return filepath.Join(dir, "index.js")
	}
	return filepath.Join(dir, "__main__.py")
}

// moduleFiles lists the files a module option loads from the folders
// servers may write first, and reports whether it searched any (a
// module found elsewhere, such as perl's without -I, is not the host's).
func moduleFiles(kind argKind, name, cwd string, incDirs []string) ([]string, bool) {
	dirs := func() []string {
		var out []string
		for _, d := range incDirs {
			if !filepath.IsAbs(d) {
				d = filepath.Join(cwd, d)
			}
			out = append(out, d)
		}
		return out
	}
	switch kind {
	case argPyModule:
		// python3 -m and -c put the current folder first on sys.path.
		rel := filepath.FromSlash(strings.ReplaceAll(name, ".", "/"))
		out := []string{filepath.Join(cwd, rel+".py"), filepath.Join(cwd, rel, "__main__.py"), filepath.Join(cwd, rel, "__init__.py")}
		for d := filepath.Dir(rel); d != "." && d != "/"; d = filepath.Dir(d) {
			out = append(out, filepath.Join(cwd, d, "__init__.py"))
		}
		return out, true
	case argPlModule, argRbModule:
		name, _, _ = strings.Cut(name, "=") // -Mmod=args
		ext := ".pm"
		if kind == argRbModule {
			ext = ".rb"
		}
		rel := filepath.FromSlash(strings.ReplaceAll(name, "::", "/")) + ext
		var out []string
		for _, d := range dirs() {
			out = append(out, filepath.Join(d, rel))
		}
		return out, len(out) > 0
	case argJsModule:
		if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "/") {
			p := name
			if !filepath.IsAbs(p) {
				p = filepath.Join(cwd, p)
			}
			return []string{p, p + ".js", p + ".cjs", p + ".mjs", filepath.Join(p, "index.js")}, true
		}
		m := filepath.Join(cwd, "node_modules", filepath.FromSlash(name))
		return []string{filepath.Join(m, "package.json"), filepath.Join(m, "index.js"), m + ".js"}, true
	}
	return nil, false
}

// pythonImport finds the modules Python code imports (import a.b, from a
// import b).
var pythonImport = regexp.MustCompile(`(?:^|[;\s])(?:import|from)\s+([A-Za-z_][A-Za-z0-9_.]*)`)

// pythonImports lists the modules code (python3 -c's) imports.
func pythonImports(code string) []string {
	var out []string
	for _, m := range pythonImport.FindAllStringSubmatch(code, -1) {
		out = append(out, m[1])
	}
	return out
}

// programPathsOf is programPaths from the person's home.
func programPathsOf(value, top string) ([]programPath, bool) {
	home, _ := os.UserHomeDir()
	return programPaths(value, top, home)
}

// interpreters are the programs whose first operand is a script they run
// (sh x.sh, python3 tool.py).
var interpreters = map[string]bool{
	"sh": true, "fish": true, "python": true, "perl": true, "ruby": true, "node": true, "deno": true,
	"php": true, "lua": true, "tclsh": true, "Rscript": true, "pwsh": true, "source": true, ".": true,
	"java": true,
}

// shellKeywords come before a command's name.
var shellKeywords = map[string]bool{"do": true, "then": true, "else": true, "elif": true, "if": true, "while": true, "until": true, "!": true, "{": true}

// duration is a timeout's first operand (timeout 5 ./x, timeout 1.5m ./x).
var duration = regexp.MustCompile(`^[0-9.]+[smhd]?$`)

// wrappers are the programs that run the command their operands name
// (env sh x.sh, timeout 5 ./x).
var wrappers = map[string]bool{
	"env": true, "exec": true, "command": true, "nice": true, "nohup": true, "timeout": true, "setsid": true,
	"stdbuf": true, "time": true, "xargs": true, "sudo": true, "doas": true, "chrt": true, "ionice": true, "taskset": true,
	"busybox": true, "builtin": true,
	// Round 21: launchers that run the command after their operands.
	"flock": true, "ssh-agent": true, "runuser": true, "unshare": true, "nsenter": true, "strace": true, "ltrace": true,
	"fakeroot": true, "watch": true, "chronic": true, "caffeinate": true, "systemd-run": true, "firejail": true,
	"setpriv": true, "prlimit": true, "script": true,
}

// commandStrings run their operands (after the first n) as a command
// line: eval, trap (its first operand), sg GROUP, watch 'cmd'.
var commandStrings = map[string]int{"eval": 0, "trap": 0, "sg": 1}

// commandVars name a command in their value (GIT_EDITOR='sh x.sh' git
// commit ran it, red team round 22).
var commandVars = map[string]bool{
	"GIT_EDITOR": true, "GIT_SEQUENCE_EDITOR": true, "GIT_EXTERNAL_DIFF": true, "GIT_SSH_COMMAND": true, "GIT_SSH": true,
	"GIT_PAGER": true, "PAGER": true, "EDITOR": true, "VISUAL": true, "GIT_ASKPASS": true, "SSH_ASKPASS": true,
	"GIT_PROXY_COMMAND": true, "LESSOPEN": true, "MANPAGER": true,
}

// codeRuns reports whether program text (perl -e, node -e, python3 -c,
// ruby -e, awk's) can run a command or load a file: the host does not
// read those languages, so such text makes what runs unknown.
func codeRuns(code string) bool { return runsCode.MatchString(code) }

var runsCode = regexp.MustCompile("system|exec|popen|spawn|require|import|open|\\bdo\\b|eval|getline|load|source|child_process|subprocess|os\\.|qx|`|\\|\\s*\"|\"\\s*\\||\\|&")

// pythonRuns is Python code that runs or loads more than its imports.
var pythonRuns = regexp.MustCompile(`exec|eval|open|system|popen|spawn|subprocess|os\.|__import__|runpy|compile|importlib`)

// sedRuns reports whether a sed script has GNU sed's e command or flag,
// or writes a file (w), which run or plant a program.
func sedRuns(script string) bool { return sedExec.MatchString(script) }

var sedExec = regexp.MustCompile(`(^|[;{}\s0-9$,/!])e(\s|;|$)|/[gpiIm0-9]*e|(^|[;{}\s0-9$,/!])[wW]\s|/[gpiIm0-9]*w\s`)

// positional reports whether a command word is a parameter the host
// cannot know: "$@", "$1", $*, ${1} (a function's arguments).
func positional(w string) bool {
	w = strings.Trim(w, "{}")
	return strings.HasPrefix(w, "$@") || strings.HasPrefix(w, "$*") || len(w) > 1 && w[0] == '$' && (w[1] >= '0' && w[1] <= '9' || w[1] == '{' && len(w) > 2 && (w[2] >= '0' && w[2] <= '9' || w[2] == '@' || w[2] == '*'))
}

// wrapperOperands are the operands a wrapper takes before the command
// (flock FILE cmd, chrt PRIO cmd, taskset MASK cmd).
var wrapperOperands = map[string]int{"flock": 1, "chrt": 1, "taskset": 1}

// runners run what a file of the project says (a Makefile, package.json's
// scripts, a go package): a value that runs one cannot be protected
// without taking the file from the servers (red team round 21: make, npm
// run, go run . ran the agent's).
var runners = map[string]bool{
	"make": true, "gmake": true, "npm": true, "npx": true, "yarn": true, "pnpm": true, "bun": true, "deno": true,
	"go": true, "cargo": true, "uv": true, "uvx": true, "poetry": true, "pipenv": true, "just": true, "task": true,
	"rake": true, "bundle": true, "gradle": true, "gradlew": true, "mvn": true, "ant": true, "tox": true, "nox": true,
	"pre-commit": true, "lefthook": true, "husky": true, "composer": true, "dotnet": true, "mix": true, "sbt": true,
}

// lookupVars change which configs git reads or which programs the shell
// finds, when a value sets them (GIT_CONFIG_GLOBAL=a.cfg git x).
var lookupVars = map[string]bool{
	"GIT_CONFIG_GLOBAL": true, "GIT_CONFIG_SYSTEM": true, "GIT_CONFIG_COUNT": true, "GIT_CONFIG_PARAMETERS": true,
	"GIT_CONFIG": true, "GIT_DIR": true, "GIT_WORK_TREE": true, "GIT_EXEC_PATH": true, "GIT_COMMON_DIR": true,
	"HOME": true, "XDG_CONFIG_HOME": true, "PATH": true, "ENV": true, "BASH_ENV": true, "PYTHONPATH": true,
	"PERL5LIB": true, "RUBYLIB": true, "NODE_PATH": true, "NODE_OPTIONS": true, "LD_PRELOAD": true, "LD_LIBRARY_PATH": true,
}

// What a git -c key=value can do: nothing of note, run a program (its
// value a command line), or read another config or repository.
const (
	gitRunsNothing = iota
	gitRunsProgram
	gitRunsUnknown
)

// gitConfigRuns says what a git -c key=value can do, and the command
// line it runs (a plain alias's as a git command).
func gitConfigRuns(kv string) (int, string) {
	key, value, _ := strings.Cut(kv, "=")
	section, rest, _ := strings.Cut(strings.ToLower(key), ".")
	name := rest
	if i := strings.LastIndexByte(rest, '.'); i >= 0 {
		name = rest[i+1:]
	}
	if section == "include" || section == "includeif" || name == "hookspath" || name == "worktree" {
		return gitRunsUnknown, ""
	}
	if line, program := programValue(gitVar{section: section, key: name, value: value}); program {
		return gitRunsProgram, line
	}
	return gitRunsNothing, ""
}

// programValue is the command line a config variable runs and whether it
// is a program-valued one (programKey): an ext:: URL's command, and a plain
// alias as the git command it is (alias.x = rebase -x 'sh x.sh', round 22).
// Any other variable's value is returned as it is, for its paths.
func programValue(v gitVar) (string, bool) {
	if ext, ok := extCommand(v); ok {
		return ext, true
	}
	if v.section == "alias" && !strings.HasPrefix(strings.TrimSpace(v.value), "!") {
		return "git " + v.value, true
	}
	return v.value, programKey(v)
}

// wordForms returns the words a shell word can stand for, as far as paths
// go: its brace expansions (./a{,b}: ./a and ./ab), and the defaults of
// ${VAR:-word} in it, which run when VAR is unset (red team round 19).
func wordForms(w string) []string {
	out := braceForms(w, 16)
	for _, f := range slices.Clone(out) {
		for rest := f; ; {
			i := strings.Index(rest, "${")
			if i < 0 {
				break
			}
			end := strings.IndexByte(rest[i:], '}')
			if end < 0 {
				break
			}
			inner := rest[i+2 : i+end]
			for _, op := range []string{":-", ":=", "-", "="} {
				if _, def, ok := strings.Cut(inner, op); ok {
					out = append(out, def)
					break
				}
			}
			rest = rest[i+end+1:]
		}
	}
	return out
}

// braceForms expands the first {a,b,…} in w (without nesting), at most
// limit forms in all.
func braceForms(w string, limit int) []string {
	open := strings.IndexByte(w, '{')
	if open < 0 || open > 0 && w[open-1] == '$' {
		return []string{w}
	}
	end := strings.IndexByte(w[open:], '}')
	if end < 0 || !strings.Contains(w[open:open+end], ",") {
		return []string{w}
	}
	var out []string
	for _, alt := range strings.Split(w[open+1:open+end], ",") {
		for _, f := range braceForms(w[:open]+alt+w[open+end+1:], limit) {
			if len(out) < limit {
				out = append(out, f)
			}
		}
	}
	return out
}

// markFolders marks the expansions that name the top of the work tree
// ($(git rev-parse --show-toplevel), in backticks too) and the current
// folder ($PWD, ${PWD}, $(pwd)) with topMark and cwdMark, so that a path
// after them is read from there.
func markFolders(v string) string {
	v = strings.NewReplacer("$(git rev-parse --show-toplevel)", string(topMark), "`git rev-parse --show-toplevel`", string(topMark),
		"${PWD}", string(cwdMark), "$(pwd)", string(cwdMark), "`pwd`", string(cwdMark)).Replace(v)
	return pwdVar.ReplaceAllString(v, string(cwdMark)+"$1")
}

// pwdVar is $PWD not followed by more of a name.
var pwdVar = regexp.MustCompile(`\$PWD([^A-Za-z0-9_]|$)`)

// expansionMark stands in a word for a command substitution, $(…) or
// `…`, whose words shellWords returns on their own; commandEnd is the word
// shellWords puts where a command ends (; & | ( ) or a new line).
const (
	expansionMark = '\x00'
	commandEnd    = "\x00;"
	quotedLine    = "\x00'" // the start of a quoted string's words (shellWords)
	runLine       = "\x00$" // the start of a substitution's words
	redirectIn    = "\x00<"
	topMark       = '\x01'
	cwdMark       = '\x02'
)

// maxSubstitution is how deeply shellWords reads nested command lines.
const maxSubstitution = 8

// shellWords splits a command line into words as a shell would, enough
// for programPaths: quotes and backslashes removed, each $(…) and `…`
// replaced by expansionMark in its word, and the words of each of them,
// and of each quoted string with blanks or operators in it (a script for
// `sh -c`), appended after the line's own.
func shellWords(s string, depth int) []string {
	var words, inner []string
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
		}
		cur.Reset()
		inWord = false
	}
	// nested appends a command line found inside the line: one that runs
	// ($(…), backticks, <(…)) or a quoted string that may be one (an
	// sh -c script, or only a message): its words are read for paths, and
	// only the first kind can make what runs unknown.
	nested := func(line string, runs bool) {
		if depth < maxSubstitution {
			start := quotedLine
			if runs {
				start = runLine
			}
			inner = append(append(inner, start), shellWords(line, depth+1)...)
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			if s[i] != '\n' {
				cur.WriteByte(s[i])
				inWord = true
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				j = len(s) - i - 1
			}
			quoted := s[i+1 : i+1+j]
			cur.WriteString(quoted)
			if strings.ContainsAny(quoted, shellOperators) {
				nested(quoted, false)
			}
			i += j + 1
			inWord = true
		case c == '"':
			var quoted strings.Builder
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				switch {
				case s[j] == '\\' && j+1 < len(s):
					j++
					quoted.WriteByte(s[j])
				case s[j] == '$' && j+1 < len(s) && s[j+1] == '(':
					end := closing(s, j+1)
					nested(s[j+2:end], true)
					quoted.WriteRune(expansionMark)
					j = end
				case s[j] == '$' && j+1 < len(s) && nameByte(s[j+1]):
					// "$GIT_PREFIX"x: the name kept apart from what follows
					// the quotes, as ${GIT_PREFIX}.
					n := j + 1
					for n < len(s) && nameByte(s[n]) {
						n++
					}
					quoted.WriteString("${" + s[j+1:n] + "}")
					j = n - 1
				case s[j] == '`':
					end := closingBacktick(s, j)
					nested(s[j+1:end], true)
					quoted.WriteRune(expansionMark)
					j = end
				default:
					quoted.WriteByte(s[j])
				}
			}
			cur.WriteString(quoted.String())
			if strings.ContainsAny(quoted.String(), shellOperators) {
				nested(quoted.String(), false)
			}
			i = j
			inWord = true
		case c == '$' && i+1 < len(s) && s[i+1] == '(':
			end := closing(s, i+1)
			nested(s[i+2:end], true)
			cur.WriteRune(expansionMark)
			i = end
			inWord = true
		case c == '`':
			end := closingBacktick(s, i)
			nested(s[i+1:end], true)
			cur.WriteRune(expansionMark)
			i = end
			inWord = true
		case (c == '<' || c == '>') && i+1 < len(s) && s[i+1] == '(':
			// <(…), >(…): process substitution, a file named by nothing
			// literal (bash <(cat x.sh)).
			end := closing(s, i+1)
			nested(s[i+2:end], true)
			cur.WriteRune(expansionMark)
			i = end
			inWord = true
		case c == '<':
			flush()
			words = append(words, redirectIn)
		case c == ' ' || c == '\t' || c == '>':
			flush()
		case strings.IndexByte(shellOperators, c) >= 0:
			flush()
			words = append(words, commandEnd)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return append(words, inner...)
}

// shellOperators are the bytes that end a shell word besides blanks and
// redirections, or a command: ; & | ( ) and a new line (and, in a quoted
// string, the blanks that make it a command line).
const shellOperators = ";&|()\n \t"

// stripExpansions removes the variables ($NAME, ${…}, $@, $1) and
// substitutions (expansionMark) from s.
func stripExpansions(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == byte(expansionMark):
		case s[i] == '$' && i+1 < len(s) && s[i+1] == '{':
			if end := strings.IndexByte(s[i:], '}'); end > 0 {
				i += end
			}
		case s[i] == '$' && i+1 < len(s) && strings.IndexByte("@*#?!$-0123456789", s[i+1]) >= 0:
			i++
		case s[i] == '$' && i+1 < len(s) && nameByte(s[i+1]):
			for i+1 < len(s) && nameByte(s[i+1]) {
				i++
			}
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// nameByte reports whether c may be in a shell variable's name.
func nameByte(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// closingBacktick returns the index of the backtick that closes the one
// at open in s (len(s) when none does).
func closingBacktick(s string, open int) int {
	if j := strings.IndexByte(s[open+1:], '`'); j >= 0 {
		return open + 1 + j
	}
	return len(s)
}

// closing returns the index of the parenthesis that closes the one at
// open in s (len(s) when none does).
func closing(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return len(s)
}

// programWord is one word of a config value (shellWords) as the path it
// names from the folder dir ("" for none), and the word as read, without
// the expansions it began with (expanded: it did, each read as nothing).
func programWord(word, dir, top, home string) (path, rest string, expanded bool) {
	// The top ($(git rev-parse --show-toplevel)) and the current folder
	// ($PWD, $(pwd)), which programPaths marked.
	switch {
	case strings.HasPrefix(word, string(topMark)):
		dir, word = top, "."+strings.TrimPrefix(word, string(topMark))
	case strings.HasPrefix(word, string(cwdMark)):
		word = "." + strings.TrimPrefix(word, string(cwdMark))
	}
	word = strings.Trim(word, "{}")
	if i := strings.LastIndexByte(word, '='); i >= 0 && !strings.HasPrefix(word, "/") && !strings.HasPrefix(word, ".") {
		word = word[i+1:]
	}
	// $GIT_PREFIX./x, ${GIT_PREFIX}x: git sets it to the folder the
	// command was started in below the top, often nothing; ${PWD}/x and
	// $(git rev-parse --show-toplevel)/x: the top.
	for {
		if r, ok := strings.CutPrefix(word, string(expansionMark)); ok {
			word, expanded = r, true
			continue
		}
		r, ok := strings.CutPrefix(word, "$")
		if !ok {
			break
		}
		expanded = true
		if strings.HasPrefix(r, "{") {
			_, after, ok := strings.Cut(r, "}")
			if !ok {
				return "", "", true
			}
			word = after
			continue
		}
		n := strings.IndexFunc(r, func(c rune) bool {
			return !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9')
		})
		if n < 0 {
			return "", "", true
		}
		word = r[n:]
	}
	// What follows inside the word: an unset variable ($NOPE, "$@",
	// $IFS) or a substitution is read as nothing (sh t/x${NOPE}.sh runs
	// t/x.sh; red team round 19).
	if i := strings.IndexAny(word, "$"+string(expansionMark)); i > 0 {
		word, expanded = word[:i]+stripExpansions(word[i:]), true
	}
	rest = strings.Trim(word, "{}")
	word = rest
	if strings.ContainsRune(word, expansionMark) || !strings.Contains(word, "/") || strings.Contains(word, "://") {
		return "", rest, expanded
	}
	if expanded && strings.HasPrefix(word, "/") {
		word = "." + word
	}
	if r, ok := strings.CutPrefix(word, "~/"); ok {
		if home == "" {
			return "", rest, expanded
		}
		word = filepath.Join(home, r)
	} else if !filepath.IsAbs(word) {
		word = filepath.Join(dir, word)
	}
	return filepath.Clean(word), rest, expanded
}

// missingPrograms returns the paths a config value names (programPaths,
// not their alts) where nothing is: a program the project builds later,
// which a server could write first (red team round 16, an alias's
// !./later/x). Globs are left out.
func missingPrograms(value, top string) []string {
	paths, _ := programPathsOf(value, top)
	return missingOf(paths)
}

// missingOf is missingPrograms of paths programPaths found.
func missingOf(paths []programPath) []string {
	var out []string
	for _, pp := range paths {
		if pp.alt || strings.ContainsAny(pp.path, "*?[") {
			continue
		}
		if _, err := os.Lstat(pp.path); errors.Is(err, fs.ErrNotExist) && !slices.Contains(out, pp.path) {
			out = append(out, pp.path)
		}
	}
	return out
}

// programKey reports whether a config variable names a program git runs
// (its value a command line): the ones whose missing programs are made
// (missingPrograms). A path in any other variable is protected only when
// it is there.
func programKey(v gitVar) bool {
	switch v.section {
	case "alias", "filter", "pager", "mergetool", "difftool", "trailer", "browser", "credential":
		return true
	case "core":
		switch v.key {
		case "fsmonitor", "pager", "editor", "sshcommand", "askpass", "gitproxy", "alternaterefscommand":
			return true
		}
	case "diff":
		return v.key == "external" || v.key == "textconv" || v.key == "command"
	case "merge":
		return v.key == "driver"
	case "gpg": // gpg.program, gpg.ssh.program, gpg.ssh.defaultKeyCommand
		return v.key == "program" || v.key == "defaultkeycommand"
	// Red team round 19: the person's commit, fetch, push and archive ran
	// these.
	case "remote":
		return v.key == "uploadpack" || v.key == "receivepack"
	case "tar":
		return v.key == "command"
	case "submodule":
		return v.key == "update"
	case "sendemail":
		switch v.key {
		case "smtpserver", "tocmd", "cccmd", "headercmd", "sendmailcmd":
			return true
		}
	case "man":
		return v.key == "cmd" || v.key == "path"
	case "guitool":
		return v.key == "cmd"
	case "imap":
		return v.key == "tunnel"
	case "instaweb":
		return v.key == "httpd"
	case "sequence":
		return v.key == "editor"
	case "interactive":
		return v.key == "difffilter"
	case "uploadpack":
		return v.key == "packobjectshook"
	case "web":
		return v.key == "browser"
	}
	return false
}

// extCommand returns the command of an ext:: URL a variable names: a
// remote's url or pushurl, or the URL an insteadOf rewrites to ([url
// "ext::sh tools/x.sh #"]). git runs it for a fetch or push once
// protocol.ext.allow lets it (red team round 20: the person's fetch ran
// the agent's tools/x.sh).
func extCommand(v gitVar) (string, bool) {
	switch {
	case v.section == "remote" && (v.key == "url" || v.key == "pushurl"):
		return cutPrefixFold(v.value, "ext::")
	case v.section == "url" && (v.key == "insteadof" || v.key == "pushinsteadof"):
		return cutPrefixFold(v.sub, "ext::")
	}
	return "", false
}

// cutPrefixFold is strings.CutPrefix, ignoring case.
func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

// isLink reports whether path is a symbolic link.
func isLink(path string) bool {
	st, err := os.Lstat(path)
	return err == nil && st.Mode()&os.ModeSymlink != 0
}

// linkBelow returns the first symbolic link on the way from root down to
// p (p itself included, root not), or "" when there is none or p is not
// below root. A read-only bind lands on where a link leads, and the link
// itself stays replaceable where servers may write: re-pointed, it sent
// the person's git to an include or hooks folder of the agent's (red team
// round 14).
func linkBelow(root, p string) string {
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return ""
	}
	cur := root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, part)
		st, err := os.Lstat(cur)
		if err != nil {
			return ""
		}
		if st.Mode()&os.ModeSymlink != 0 {
			return cur
		}
	}
	return ""
}

// unprotectableError is a start refused because what the person's git runs
// from lies behind symbolic links a server may replace.
type unprotectableError struct{ links, unknown []string }

func (e *unprotectableError) Error() string {
	if len(e.links) == 0 {
		return fmt.Sprintf("sandbox: your git config runs a program from a folder the host cannot work out (%s): a server could put a program there that your next git command runs; write the program's path out (from the top of the work tree, or absolute), or set sandbox { mode = \"best-effort\" } in the server's block to start it with that program unprotected", strings.Join(e.unknown, "; "))
	}
	return fmt.Sprintf("sandbox: %s is a symbolic link in a folder this server may write, on the way to what your git runs programs from (the repository, its config, includes or hooks folder): the server could point it elsewhere, and your next git command would run what it put there; replace the link with what it points to (for a .git link: t=$(readlink -f .git) && rm .git && printf 'gitdir: %%s\\n' \"$t\" > .git; a link to a program not built yet: build it, then replace the link with it), or set sandbox { mode = \"best-effort\" } in the server's block to start it with the link unprotected", strings.Join(e.links, ", "))
}

// gitProtectedAt is gitProtected; without placehold it only looks at the
// placeholders (placeholderAt).
func gitProtectedAt(roots []string, placehold bool) (readOnly, make []string, files []sandbox.File, unknown []string) {
	if len(roots) == 0 {
		return nil, nil, nil, nil // nothing writable: nothing of git's to protect (and no config to read)
	}
	add := func(p string, k made) {
		if k == madeUnknown {
			if !slices.Contains(unknown, p) {
				unknown = append(unknown, p)
			}
			return
		}
		readOnly = append(readOnly, p)
		switch k {
		case madeFolder:
			make = append(make, p)
		case madeFile:
			files = append(files, sandbox.File{Path: p})
		}
	}
	// The person's own configs and what they include, where servers may
	// write them (a project in the home folder).
	// Reached through a link outside them too (a dotfiles repository as
	// the project, ~/.gitconfig or ~/.config/git a link into it: red team
	// round 15), so each path counts where it leads.
	for _, f := range personConfigs() {
		for _, p := range append([]string{f}, readGitConfig(f).includes...) {
			for _, c := range withTarget(p) {
				for _, root := range roots {
					if within(c, root) {
						add(c, madeFile) // a missing one too (GIT_CONFIG_GLOBAL=./a.cfg)
						break
					}
				}
			}
		}
	}
	for _, root := range roots {
		placeholderOf := repoPlaceholder
		if !placehold {
			placeholderOf = placeholderAt
		}
		if ph, file, ok := placeholderOf(root); ok {
			if file {
				readOnly = append(readOnly, ph)
				files = append(files, sandbox.File{Path: ph, Content: gitplaceholder.Content})
			} else {
				add(ph, madeFolder)
			}
			// Inside another work tree, what of that repository lies in
			// root: a submodule's .git file (with project_dir a folder of
			// a superproject, one replaced by a repository of the agent's
			// was entered by the person's `git status` there, red team
			// round 11), the folder core.hooksPath names.
			if top := outerWorkTree(root); top != "" {
				if gitDir, common := repoDirs(top); gitDir != "" {
					repoProtected(top, gitDir, common, maxNested, func(p string, k made) {
						if within(p, root) {
							add(p, k)
						}
					})
				}
			}
			continue
		}
		if gitDir, common := repoDirs(root); gitDir != "" {
			repoProtected(root, gitDir, common, maxNested, add)
		}
	}
	return readOnly, make, files, unknown
}

// made says what gitProtected makes of a path it protects when nothing is
// there: a path where nothing exists cannot be bound read-only, and what a
// server put there would run.
type made int

const (
	madeNothing made = iota
	madeFolder       // a hooks folder, the core.hooksPath folder
	madeFile         // an empty file: a config file an include names
	// madeUnknown is no path but a config value that runs a program from
	// a folder the host cannot work out (`cd "$d" && ./x`): the start is
	// refused (unprotectableError).
	madeUnknown
)

// repoProtected passes add what a person's git runs programs from in the
// repository whose work tree's top is top (gitProtected), and what to
// make there when it is missing.
func repoProtected(top, gitDir, common string, depth int, add func(path string, k made)) {
	// A config file and the files it includes (include.path,
	// includeIf.*.path: a project's documented `git config include.path
	// ../.gitconfig` had the agent write a core.fsmonitor there, red team
	// round 13).
	config := func(path string) {
		add(path, madeNothing)
		for _, inc := range readGitConfig(path).includes {
			add(inc, madeFile)
		}
	}
	// The programs the configs git reads for a work tree name by path
	// (core.fsmonitor = .tools/fsmon, a filter's clean = sh
	// scripts/fmt, an alias's !./x), resolved from that work tree's top
	// as git runs them: rewritten, the person's git ran them (red team
	// rounds 15 and 16, in the main and linked work trees, a submodule,
	// and from the person's global config). One that is not there yet is
	// made empty first, where servers may write it.
	programs := func(wtTop string, configs ...string) {
		for _, cfg := range append(personConfigs(), configs...) {
			for _, v := range readGitConfig(cfg).vars {
				value, program := programValue(v)
				paths, unknown := programPathsOf(value, wtTop)
				for _, f := range existingPrograms(paths, program) {
					add(f, madeNothing)
				}
				if program {
					for _, f := range missingOf(paths) {
						add(f, madeFile)
					}
					if unknown {
						add(fmt.Sprintf("%s.%s = %s (in %s)", v.section, v.key, v.value, cfg), madeUnknown)
					}
				}
			}
		}
	}
	if gitDir != filepath.Join(top, ".git") {
		// The .git file itself (a linked work tree, a submodule checked
		// out as the project): rewritten, it would send the person's git
		// to a repository of the agent's.
		add(filepath.Join(top, ".git"), madeNothing)
	}
	// The hooks and config of the repository proper (a linked work tree
	// keeps them in the common folder).
	add(filepath.Join(common, "hooks"), madeFolder)
	config(filepath.Join(common, "config"))
	// The work tree's own config (extensions.worktreeConfig): its
	// hooksPath and includes, like the config's (red team round 14).
	config(filepath.Join(gitDir, "config.worktree"))
	programs(top, filepath.Join(common, "config"), filepath.Join(gitDir, "config.worktree"))
	// core.worktree moves the work tree, where git runs programs and
	// finds a relative hooks path (red team round 20: core.worktree =
	// ../sub had the person's git run sub/x.sh and sub/.husky's hook).
	tops := []string{top}
	if wt := configValue(filepath.Join(common, "config"), "core", "worktree"); wt != "" {
		if !filepath.IsAbs(wt) {
			wt = filepath.Join(gitDir, wt)
		}
		if wt = filepath.Clean(wt); wt != top {
			tops = append(tops, wt)
			programs(wt, filepath.Join(common, "config"), filepath.Join(gitDir, "config.worktree"))
		}
	}
	if hp := effectiveHooksPath(common, gitDir); hp != "" {
		for _, t := range tops {
			if filepath.IsAbs(hp) {
				add(filepath.Clean(hp), madeFolder)
			} else {
				add(filepath.Join(t, hp), madeFolder)
			}
		}
	}
	// The repository's linked work trees (git worktree add): each one's
	// .git file, which rewritten sent the person's git there to a
	// repository of the agent's, its config.worktree, and the relative
	// hooksPath as git resolves it there (husky's .husky in the linked
	// work tree; red team round 12). The top's own, when it is one, is
	// above.
	for _, wt := range linkedWorkTrees(common) {
		config(filepath.Join(wt.gitDir, "config.worktree"))
		if wt.top == top {
			continue
		}
		add(filepath.Join(wt.top, ".git"), madeNothing)
		programs(wt.top, filepath.Join(common, "config"), filepath.Join(wt.gitDir, "config.worktree"))
		whp := effectiveHooksPath(common, wt.gitDir)
		switch {
		case whp == "":
		case filepath.IsAbs(whp):
			add(filepath.Clean(whp), madeFolder)
		default:
			add(filepath.Join(wt.top, whp), madeFolder)
		}
	}
	for _, m := range submoduleRepos(filepath.Join(common, "modules"), 4) {
		add(filepath.Join(m, "hooks"), madeFolder)
		config(filepath.Join(m, "config"))
		wt := configValue(filepath.Join(m, "config"), "core", "worktree")
		if wt != "" && !filepath.IsAbs(wt) {
			wt = filepath.Join(m, wt)
		}
		// The submodule's work tree's .git (a file naming m): replaced by
		// a folder with a config of its own, the person's `git status` in
		// the project would go into it and run that.
		if wt != "" {
			if dot := filepath.Join(filepath.Clean(wt), ".git"); within(dot, top) {
				if _, err := os.Lstat(dot); err == nil {
					add(dot, madeNothing)
				}
			}
			programs(filepath.Clean(wt), filepath.Join(m, "config"))
		}
		// The folder the submodule's core.hooksPath names (relative to
		// its work tree): a hook written there ran at the person's next
		// commit in the submodule (red team round 12).
		if hp := effectiveHooksPath(m, m); hp != "" && (filepath.IsAbs(hp) || wt != "") {
			if !filepath.IsAbs(hp) {
				hp = filepath.Join(wt, hp)
			}
			add(filepath.Clean(hp), madeFolder)
		}
	}

	// The repositories of its gitlinks that live in their work trees
	// (nestedRepos): the same for each, and its git folder read-only for
	// every server but the git built-in (repoFolders).
	for _, n := range nestedRepos(top, gitDir, common, depth) {
		repoProtected(n, filepath.Join(n, ".git"), filepath.Join(n, ".git"), depth-1, add)
	}
}

// maxNested is how deep gitlinks' repositories are followed.
const maxNested = 4

// nestedRepos lists the work trees of the repository's gitlinks (its
// index's mode 160000 entries) whose git folder is a .git folder in the
// work tree: a submodule added from an existing repository ("Adding
// existing repo at …"), an embedded repository committed as a gitlink.
// The person's `git status` in the superproject enters each and runs what
// its config names, and nothing else covered them (red team round 12: an
// fsmonitor written into vend/.git/config ran). A gitlink whose .git is a
// file (an absorbed submodule) is covered through .git/modules.
func nestedRepos(top, gitDir, common string, depth int) []string {
	if depth <= 0 {
		return nil
	}
	oidLen := 20
	if strings.EqualFold(configValue(filepath.Join(common, "config"), "extensions", "objectformat"), "sha256") {
		oidLen = 32
	}
	var out []string
	for _, link := range gitlinks(filepath.Join(gitDir, "index"), oidLen) {
		wt := filepath.Join(top, filepath.FromSlash(link))
		if !within(wt, top) || wt == top {
			continue
		}
		dot := filepath.Join(wt, ".git")
		if st, err := os.Lstat(dot); err == nil && st.IsDir() && !emptyDir(dot) {
			out = append(out, wt)
		}
	}
	return out
}

// linkedWorkTree is one linked work tree of a repository.
type linkedWorkTree struct {
	gitDir string // common/worktrees/NAME
	top    string // its work tree's top, where its .git file is
}

// linkedWorkTrees lists a repository's linked work trees from its common
// folder's worktrees/*/gitdir files (each names the work tree's .git
// file).
func linkedWorkTrees(common string) []linkedWorkTree {
	entries, err := os.ReadDir(filepath.Join(common, "worktrees"))
	if err != nil {
		return nil
	}
	var out []linkedWorkTree
	for _, e := range entries {
		if !e.IsDir() || len(out) >= 256 {
			continue
		}
		gd := filepath.Join(common, "worktrees", e.Name())
		b, err := regularfile.Read(filepath.Join(gd, "gitdir"), 4096)
		if err != nil {
			continue
		}
		dot := strings.TrimSpace(string(b))
		if !filepath.IsAbs(dot) {
			dot = filepath.Join(gd, dot)
		}
		if filepath.Base(dot) != ".git" {
			continue
		}
		out = append(out, linkedWorkTree{gitDir: gd, top: filepath.Dir(filepath.Clean(dot))})
	}
	return out
}

// repoFolders lists the git folders of the work trees at the roots (each
// repository's own and, for a linked work tree, the common one). Every
// server but the git built-in sees them read-only: git reads more of them
// than hooks and config (a `commondir` file written into .git sent the
// person's git to a config and hooks of the agent's, red team round 6),
// and only git, run by the git built-in, has any business writing there.
func repoFolders(roots []string) []string {
	var out []string
	var walk func(top, gitDir, common string, depth int)
	walk = func(top, gitDir, common string, depth int) {
		for _, d := range []string{gitDir, common} {
			if d != "" && !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
		for _, n := range nestedRepos(top, gitDir, common, depth) {
			walk(n, filepath.Join(n, ".git"), filepath.Join(n, ".git"), depth-1)
		}
	}
	for _, root := range roots {
		if gitDir, common := repoDirs(root); gitDir != "" {
			walk(root, gitDir, common, maxNested)
			continue
		}
		// Inside another work tree: its gitlinks' repositories in root.
		if top := outerWorkTree(root); top != "" {
			if gitDir, common := repoDirs(top); gitDir != "" {
				for _, n := range nestedRepos(top, gitDir, common, maxNested) {
					if within(n, root) {
						walk(n, filepath.Join(n, ".git"), filepath.Join(n, ".git"), maxNested-1)
					}
				}
			}
		}
	}
	return out
}

// emptyDir reports whether dir is a folder with nothing in it.
func emptyDir(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	names, err := f.Readdirnames(1)
	return len(names) == 0 && errors.Is(err, io.EOF)
}

// repoDirs returns the git folder of the work tree at root (root/.git, or
// where a .git file points) and its common folder (the main repository's,
// for a linked work tree), or "" when root is not a work tree's top.
func repoDirs(root string) (gitDir, common string) {
	dot := filepath.Join(root, ".git")
	st, err := os.Lstat(dot)
	if err == nil && st.Mode()&os.ModeSymlink != 0 {
		// A .git link to the repository (its protection then binds where
		// it leads; the link itself a sandbox start refuses, see
		// linkBelow).
		if r, err := filepath.EvalSymlinks(dot); err == nil {
			if rst, err := os.Stat(r); err == nil && rst.IsDir() && !emptyDir(r) {
				return r, r
			}
		}
		return "", ""
	}
	switch {
	case err != nil:
		return "", ""
	case st.IsDir():
		if emptyDir(dot) {
			return "", "" // a placeholder (repoPlaceholder)
		}
		return dot, dot
	case !st.Mode().IsRegular() || st.Size() > 4096:
		return "", ""
	}
	b, err := regularfile.Read(dot, 4096)
	if err != nil {
		return "", ""
	}
	target, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if !ok {
		return "", ""
	}
	gitDir = strings.TrimSpace(target)
	if !filepath.IsAbs(gitDir) {
		gitDir = filepath.Join(root, gitDir)
	}
	gitDir = filepath.Clean(gitDir)
	common = gitDir
	if c, err := regularfile.Read(filepath.Join(gitDir, "commondir"), 4096); err == nil {
		if cd := strings.TrimSpace(string(c)); cd != "" {
			if !filepath.IsAbs(cd) {
				cd = filepath.Join(gitDir, cd)
			}
			common = filepath.Clean(cd)
		}
	}
	return gitDir, common
}

// submoduleRepos lists the repositories under a modules folder (each has a
// config file), depth levels down (submodules of submodules).
func submoduleRepos(dir string, depth int) []string {
	if depth == 0 {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		if _, err := os.Stat(filepath.Join(sub, "config")); err == nil {
			out = append(out, sub)
			out = append(out, submoduleRepos(filepath.Join(sub, "modules"), depth-1)...)
		} else {
			// A submodule at a nested path (modules/a/b).
			out = append(out, submoduleRepos(sub, depth-1)...)
		}
	}
	return out
}

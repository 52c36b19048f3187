package bash

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
)

// maxDepth bounds how deep Commands follows `bash -c '…'` and friends.
const maxDepth = 8

// Commands returns one permission pattern per command a bash command line
// would run: every command in lists, pipelines, subshells, $(...),
// backticks, process substitutions and function bodies, with VAR=x
// prefixes and directories stripped (/usr/bin/sudo is "sudo", \rm is
// "rm"). Commands that run other commands (bash -c, eval, xargs, find
// -exec, env, sudo, timeout, …) are reported as themselves and as the
// inner command when it can be read, or with an opaque pattern when it
// cannot. A line that does not parse yields a single opaque pattern, which
// no allow rule matches. The result is sorted and free of duplicates.
func Commands(line string) []string {
	c := &collector{}
	c.parse(line, 0)
	slices.Sort(c.out)
	return slices.Compact(c.out)
}

type collector struct {
	out []string
}

func (c *collector) add(s string) { c.out = append(c.out, s) }

func (c *collector) opaque(format string, args ...any) {
	c.add(protocol.Opaque(fmt.Sprintf(format, args...)))
}

func (c *collector) parse(line string, depth int) {
	if depth > maxDepth {
		c.opaque("commands nested more than %d levels deep", maxDepth)
		return
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(line), "")
	if err != nil {
		c.opaque("the command line does not parse: %v", err)
		return
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		if call, ok := n.(*syntax.CallExpr); ok && len(call.Args) > 0 {
			c.call(call.Args, depth)
		}
		return true // nested $(...), <(...) and bodies are walked too
	})
}

// call reports the command named by args[0] and, for wrappers, the
// command they run.
func (c *collector) call(args []*syntax.Word, depth int) {
	words := make([]string, len(args))
	static := make([]bool, len(args))
	for i, w := range args {
		words[i], static[i] = staticWord(w)
	}
	if !static[0] {
		c.opaque("a command whose name is computed when it runs")
		return
	}
	c.command(words, static, depth)
}

// command reports words[0] and follows wrappers. static[i] says whether
// words[i] could be read.
func (c *collector) command(words []string, static []bool, depth int) {
	if len(words) == 0 {
		return
	}
	if !static[0] {
		c.opaque("a command whose name is computed when it runs")
		return
	}
	name := filepath.Base(words[0])
	if name == "" || name == "." && words[0] != "." {
		c.opaque("an empty command name")
		return
	}
	c.add(name)
	rest, restStatic := words[1:], static[1:]
	inner := func(i int) { c.command(rest[i:], restStatic[i:], depth+1) }

	switch name {
	case "bash", "sh", "zsh", "dash", "ksh", "mksh", "busybox":
		for i, a := range rest {
			if a == "-c" || (strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "c")) {
				if i+1 < len(rest) && restStatic[i+1] {
					c.parse(rest[i+1], depth+1)
				} else {
					c.opaque("%s -c with a script computed when it runs", name)
				}
				return
			}
		}
		// A shell reading a script file or stdin: what it runs is unknown.
		c.opaque("%s running a script this check cannot read", name)
	case "eval":
		if allStatic(restStatic) {
			c.parse(strings.Join(rest, " "), depth+1)
		} else {
			c.opaque("eval of a string computed when it runs")
		}
	case "exec", "command", "builtin", "nohup", "setsid", "time", "nice", "ionice", "stdbuf", "chroot", "doas", "sudo", "su", "env", "timeout", "xargs", "watch", "flock", "strace", "ltrace":
		i := skipOptions(name, rest)
		if i < len(rest) {
			inner(i)
		} else if name == "xargs" {
			c.add("echo") // xargs runs echo by default
		} else if name == "su" {
			c.opaque("su starting a shell")
		}
	case "find":
		for i, a := range rest {
			if a == "-exec" || a == "-execdir" || a == "-ok" || a == "-okdir" {
				end := i + 1
				for end < len(rest) && rest[end] != ";" && rest[end] != "+" {
					end++
				}
				if i+1 < end {
					c.command(rest[i+1:end], restStatic[i+1:end], depth+1)
				}
			}
		}
	case "git":
		// Configuration on the command line can define aliases or helpers
		// that run arbitrary programs (CVE-2026-55582).
		for i, a := range rest {
			kv := ""
			switch {
			case a == "-c" && i+1 < len(rest):
				kv = rest[i+1]
			case strings.HasPrefix(a, "-c") && len(a) > 2:
				kv = a[2:]
			case strings.HasPrefix(a, "--config-env"):
				kv = "config-env"
			}
			if kv != "" && gitConfigRunsPrograms(kv) {
				c.opaque("git -c %s can run arbitrary programs", kv)
			}
		}
	}
}

// gitConfigRunsPrograms reports whether a -c key=value setting may make git
// run a program.
func gitConfigRunsPrograms(kv string) bool {
	key, value, _ := strings.Cut(strings.ToLower(kv), "=")
	switch {
	case key == "config-env":
		return true
	case strings.HasPrefix(key, "alias.") && strings.HasPrefix(strings.TrimSpace(value), "!"):
		return true
	case strings.HasPrefix(key, "alias."):
		return false
	}
	for _, k := range []string{
		"core.sshcommand", "core.pager", "core.editor", "core.fsmonitor", "core.hookspath", "core.askpass",
		"diff.external", "gpg.program", "credential.helper", "sequence.editor", "uploadpack.packobjectshook", "protocol.ext.allow",
	} {
		if key == k {
			return true
		}
	}
	return strings.HasPrefix(key, "filter.") || strings.HasSuffix(key, ".textconv") || strings.HasSuffix(key, ".command") ||
		strings.HasPrefix(key, "credential.") || strings.HasPrefix(key, "gpg.")
}

// skipOptions returns the index of the wrapped command in a wrapper's
// arguments: past its options, their values, VAR=x assignments (env) and
// the duration (timeout).
func skipOptions(name string, args []string) int {
	withValue := map[string][]string{
		"sudo":    {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"},
		"doas":    {"-u", "-C"},
		"su":      {"-c", "-s", "-g", "-G"},
		"env":     {"-u", "-C", "-S", "--unset", "--chdir", "--split-string"},
		"timeout": {"-s", "-k", "--signal", "--kill-after"},
		"xargs":   {"-a", "-d", "-E", "-I", "-i", "-L", "-l", "-n", "-P", "-s", "--arg-file", "--delimiter", "--max-args", "--max-procs", "--replace"},
		"nice":    {"-n", "--adjustment"},
		"ionice":  {"-c", "-n", "-p", "-t"},
		"stdbuf":  {"-i", "-o", "-e"},
		"watch":   {"-n", "-d", "--interval"},
		"flock":   {"-w", "-E", "--timeout", "--conflict-exit-code"},
		"strace":  {"-e", "-o", "-p", "-s", "-u"},
		"chroot":  {"--userspec", "--groups"},
		"command": {},
		"exec":    {"-a"},
	}
	i := 0
	for i < len(args) {
		a := args[i]
		switch {
		case a == "--":
			i++
			goto operands
		case strings.HasPrefix(a, "-") && len(a) > 1:
			if slices.Contains(withValue[name], a) {
				i++
			}
			i++
		case name == "env" && strings.Contains(a, "=") && !strings.HasPrefix(a, "="):
			i++
		default:
			goto operands
		}
	}
operands:
	switch name {
	case "timeout":
		i++ // the duration
	case "chroot", "flock":
		i++ // the new root, the lock file
	}
	if name == "su" {
		return len(args) // su runs a shell, not its arguments
	}
	return i
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
// quotes and backslash escapes removed as bash would.
func staticWord(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
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
				b.WriteString(lit.Value)
			}
		default:
			return "", false
		}
	}
	return b.String(), true
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

package builtins

import (
	"debug/elf"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/switchboard-mcp/switchboard/host/internal/pathguard"
)

// gitPrograms lists what the git built-in may execute: the git binary on
// PATH (not in untrusted folders), the folder of git's own programs (git-core) beside it, and the ELF
// interpreter each program needs (the kernel asks for the right to execute
// it too). Empty without git: the built-in then runs nothing but itself.
func gitPrograms(untrusted []string) []string {
	p, err := pathguard.LookPath("git", untrusted)
	if err != nil {
		return nil
	}
	bin, err := filepath.EvalSymlinks(p)
	if err != nil {
		return nil
	}
	out := []string{bin}
	prefix := filepath.Dir(filepath.Dir(bin))
	for _, d := range []string{filepath.Join(prefix, "lib", "git-core"), filepath.Join(prefix, "libexec", "git-core")} {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			out = append(out, d)
		}
	}
	return ExecWithInterpreter(out...)
}

// ExecWithInterpreter returns the programs with the ELF interpreter each
// names, as named and as the file it links to (the kernel asks for the
// right to execute the interpreter too): a sandbox's Exec list.
func ExecWithInterpreter(programs ...string) []string {
	out := slices.Clone(programs)
	for _, p := range programs {
		interp := elfInterpreter(p)
		if interp == "" {
			continue
		}
		names := []string{interp}
		if r, err := filepath.EvalSymlinks(interp); err == nil {
			names = append(names, r)
		}
		for _, n := range names {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// elfInterpreter returns the interpreter an ELF executable names (its
// dynamic loader), or "" for a static or unreadable one.
func elfInterpreter(path string) string {
	f, err := elf.Open(path)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return ""
		}
		return strings.TrimRight(string(b), "\x00")
	}
	return ""
}

package git

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// The guard keeps every program named in configuration from running. It
// works by construction: not by a list of known keys, but by matching
// families of key names (neutral) against every key actually present in
// the configuration git will read:
//
//  1. Before git runs on a repository, the guard lists the effective
//     configuration (git config --list --includes) of that repository and
//     of every submodule git could open from it: each gitlink in the index
//     whose work tree is populated, recursively, found the way git's own
//     child processes find them. Every include.path and includeIf.*.path
//     is followed whatever its condition, so a condition that turns true
//     later (onbranch: after a checkout) changes nothing.
//  2. Every key found whose name belongs to a program-valued family
//     (see neutral) is overridden with a harmless value, together with a
//     fixed set of overrides, through GIT_CONFIG_COUNT/GIT_CONFIG_KEY_n/
//     GIT_CONFIG_VALUE_n. That is command-line scope: it beats every
//     file, and git passes it on to the child processes it starts in
//     submodules and for lazy fetches.
//  3. GIT_ALLOW_PROTOCOL names no transport, so no fetch or push of any
//     kind can start (it is read before any protocol.* configuration):
//     a partial clone's lazy fetch fails before it runs an ssh command,
//     a proxy, remote.<name>.uploadpack or a credential helper, whose
//     first-wins values no override could beat.
//
// Keys and values travel in separate variables, so a driver name holding
// '=' (filter."a=b".clean) cannot shift the split the way `-c k=v` would.
// Each repository's scan is cached in two parts, reused while every file
// it was computed from has the same content (hashed, not stat'ed): the
// config part (config files, include targets, missing ones too) and the
// index part (the index and each gitlink's .git). An unchanged repository
// costs a few small file reads per call; a changed index one git ls-files.
type guard struct {
	allowHooks, allowFilters bool

	mu    sync.Mutex
	cache map[string]*repoScan // by depth (top or not), git dir and work tree
}

// Limits of a scan; a repository beyond them is refused, not half-guarded.
const (
	maxRepos       = 256
	maxDepth       = 16
	maxConfigFiles = 256
	maxOverrides   = 20000
)

// errTooMany is returned when a repository has more submodules, include
// files or program-valued keys than a scan follows.
var errTooMany = errors.New("too many submodules, include files or program settings to check")

// fixedOverrides apply to every git process whatever its configuration
// says. Program-valued keys that have no subsection are here too, so they
// are neutral even before a listing has seen them.
func (g *guard) fixedOverrides() [][2]string {
	kv := [][2]string{
		{"core.fsmonitor", "false"},
		{"core.pager", "cat"},
		{"core.editor", ":"},
		{"sequence.editor", ":"},
		{"core.askPass", ""},
		{"core.sshCommand", ""},
		{"core.alternateRefsCommand", ""},
		{"credential.helper", ""},
		{"diff.external", ""},
		{"diff.submodule", "short"},
		{"status.submoduleSummary", "false"},
		{"gpg.program", ""},
		{"gpg.openpgp.program", ""},
		{"gpg.ssh.program", ""},
		{"gpg.x509.program", ""},
		{"gpg.ssh.defaultKeyCommand", ""},
		{"log.showSignature", "false"},
		{"commit.gpgSign", "false"},
		{"tag.gpgSign", "false"},
		{"merge.verifySignatures", "false"},
		{"protocol.allow", "never"},
		{"protocol.file.allow", "never"},
		{"protocol.git.allow", "never"},
		{"protocol.ssh.allow", "never"},
		{"protocol.http.allow", "never"},
		{"protocol.https.allow", "never"},
		{"protocol.ext.allow", "never"},
		{"submodule.recurse", "false"},
		{"fetch.recurseSubmodules", "false"},
		{"uploadpack.packObjectsHook", ""},
		{"maintenance.auto", "false"},
		{"gc.auto", "0"},
	}
	if !g.allowHooks {
		kv = append(kv, [2]string{"core.hooksPath", "/dev/null"})
	}
	return kv
}

// splitKey splits a canonical key (as git config --list prints it: section
// and name lowercased, subsection as written) into its three parts.
func splitKey(key string) (section, sub, name string) {
	i := strings.IndexByte(key, '.')
	j := strings.LastIndexByte(key, '.')
	if i < 0 {
		return strings.ToLower(key), "", ""
	}
	section, name = strings.ToLower(key[:i]), strings.ToLower(key[j+1:])
	if j > i {
		sub = key[i+1 : j]
	}
	return section, sub, name
}

// programSuffixes end the names of keys whose value is a program (or a
// command line) git may run: core.sshCommand, diff.<driver>.command,
// gpg.<format>.program, credential.<url>.helper, merge.<driver>.driver,
// difftool.<tool>.cmd, trailer.<token>.cmd, uploadpack.packObjectsHook and
// whatever later versions of git add in the same style.
//
// remote.<name>.uploadpack and .receivepack are not here: for them git
// keeps the first value it reads, so no override can win (it only adds an
// error line). They run only when a transport starts, and none can:
// GIT_ALLOW_PROTOCOL=none (see baseEnv) refuses every transport before
// any of these is consulted. core.gitProxy is first-wins too, and
// GIT_PROXY_COMMAND, read before it, is set empty.
var programSuffixes = []string{"program", "command", "cmd", "helper", "driver", "askpass", "hook", "tunnel"}

// toolSections hold user-defined tools whose path names a program.
var toolSections = map[string]bool{"difftool": true, "mergetool": true, "man": true, "browser": true, "guitool": true}

// neutral returns the value that makes key harmless, or ok false when key
// does not name a program (or is one of the include keys, which cannot be
// overridden and are followed instead). Matching ignores the case of the
// section and name, as git does.
func (g *guard) neutral(key string) (value string, ok bool) {
	section, sub, name := splitKey(key)
	switch {
	case section == "include" || section == "includeif":
		return "", false
	case section == "filter":
		if g.allowFilters {
			return "", false
		}
		switch name {
		case "clean", "smudge", "process":
			return "", true
		case "required":
			return "false", true
		}
		return "", false
	case section == "diff" && sub != "" && name == "textconv":
		if g.allowFilters {
			return "", false
		}
		return "", true
	case section == "core" && name == "hookspath":
		if g.allowHooks {
			return "", false
		}
		return "/dev/null", true
	case section == "diff" && sub == "" && name == "external":
		return "", true
	case section == "core" && name == "fsmonitor":
		return "false", true
	case section == "core" && name == "pager":
		return "cat", true
	case section == "pager":
		return "false", true
	case section == "core" && name == "gitproxy":
		// First match wins for this key, so an override cannot beat the
		// repository's; GIT_PROXY_COMMAND (set by env) is read first.
		return "none", true
	case strings.HasSuffix(name, "editor"):
		return ":", true
	case section == "protocol" && name == "allow":
		return "never", true
	case section == "log" && name == "showsignature":
		return "false", true
	case strings.HasSuffix(name, "gpgsign"):
		return "false", true
	case section == "submodule" && sub != "" && name == "update":
		return "none", true
	case section == "alias":
		return "", true
	case section == "sendemail" && name == "smtpserver":
		return "", true
	case toolSections[section] && name == "path":
		return "", true
	}
	for _, s := range programSuffixes {
		if strings.HasSuffix(name, s) {
			return "", true
		}
	}
	return "", false
}

// repoScan is what the guard learnt about one repository, in two parts
// that go stale separately: its configuration (with includes) and its
// index (the submodules git could start a child in).
type repoScan struct {
	configDeps map[string]fileSum
	overrides  [][2]string // this repository's program-valued keys, neutralised
	workTree   string      // after core.worktree, for a submodule

	indexDeps map[string]fileSum // nil until the index part is computed
	subs      []subRepo
}

// subRepo is a populated submodule: its git directory and work tree.
type subRepo struct{ gitDir, workTree string }

// fileSum identifies a file's content; the zero value means it is missing.
type fileSum struct {
	kind byte // 0 missing, 'f' regular file, 'd' directory, 'o' other
	sum  [sha256.Size]byte
}

// fresh reports whether every file in deps is unchanged.
func fresh(deps map[string]fileSum) bool {
	for path, sum := range deps {
		if sumFile(path) != sum {
			return false
		}
	}
	return true
}

// sumFile hashes a regular file's content. Anything else is recorded by
// kind only: a FIFO is never opened.
func sumFile(path string) fileSum {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return fileSum{}
	case st.IsDir():
		return fileSum{kind: 'd'}
	case !st.Mode().IsRegular():
		return fileSum{kind: 'o'}
	}
	// Streamed, and without waiting: the file may be large, or replaced
	// by a FIFO since the Lstat.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fileSum{kind: 'o'}
	}
	defer func() { _ = f.Close() }()
	if fst, err := f.Stat(); err != nil || !fst.Mode().IsRegular() {
		return fileSum{kind: 'o'}
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fileSum{kind: 'o'}
	}
	sum := fileSum{kind: 'f'}
	h.Sum(sum.sum[:0])
	return sum
}

// environ returns the GIT_CONFIG_* variables that neutralise the
// repository at gitDir (work tree workTree) and every submodule reachable
// from it. base is the environment every git process gets. Only the parts
// of the scan whose files changed are computed again.
func (g *guard) environ(ctx context.Context, base []string, gitDir, workTree string) ([]string, error) {
	sc := &scanner{g: g, ctx: ctx, base: base, seen: map[string]bool{}, visited: map[string]bool{}}
	for _, kv := range g.fixedOverrides() {
		sc.add(kv[0], kv[1])
	}
	if err := sc.repo(gitDir, workTree, 0); err != nil {
		return nil, err
	}
	return sc.env(), nil
}

// scanner carries one call's walk over the repositories.
type scanner struct {
	g         *guard
	ctx       context.Context
	base      []string
	overrides [][2]string
	seen      map[string]bool // override keys already present
	visited   map[string]bool // git dirs visited
}

// add records an override, keeping the first value for a key (the fixed
// ones come first, and a key's neutral value does not depend on where it
// was found).
func (sc *scanner) add(key, value string) {
	canon := canonicalKey(key)
	if sc.seen[canon] {
		return
	}
	sc.seen[canon] = true
	sc.overrides = append(sc.overrides, [2]string{key, value})
}

// canonicalKey lowercases a key's section and name, as git does.
func canonicalKey(key string) string {
	section, sub, name := splitKey(key)
	if sub == "" && name == "" {
		return section
	}
	if sub == "" {
		return section + "." + name
	}
	return section + "." + sub + "." + name
}

// env renders the overrides as GIT_CONFIG_COUNT variables.
func (sc *scanner) env() []string {
	env := make([]string, 0, 2*len(sc.overrides)+1)
	env = append(env, fmt.Sprintf("GIT_CONFIG_COUNT=%d", len(sc.overrides)))
	for i, kv := range sc.overrides {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, kv[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, kv[1]))
	}
	return env
}

// git runs a git command for the scan itself. Listing config runs nothing;
// listing the index could start core.fsmonitor, so it runs with the
// overrides found so far (the fixed ones and the repository's own).
func (sc *scanner) git(dir string, extra []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(sc.ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(append(append([]string(nil), sc.base...), extra...), sc.env()...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	// The scan changes nothing (GIT_OPTIONAL_LOCKS=0), so git may write
	// nowhere (it lists config, and the index with fsmonitor held off).
	if err := runNarrowed(cmd, []string{}); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("git %s: %s", args[0], msg)
	}
	return out.Bytes(), nil
}

// repo adds the overrides for one repository and walks its submodules,
// computing again whichever part of its scan is stale.
func (sc *scanner) repo(gitDir, workTree string, depth int) error {
	if real, err := filepath.EvalSymlinks(gitDir); err == nil {
		gitDir = real
	}
	if sc.visited[gitDir] {
		return nil
	}
	if len(sc.visited) >= maxRepos || depth > maxDepth {
		return errTooMany
	}
	sc.visited[gitDir] = true
	id := fmt.Sprintf("%d\x00%s\x00%s", min(depth, 1), gitDir, workTree)
	sc.g.mu.Lock()
	old := sc.g.cache[id]
	sc.g.mu.Unlock()
	rs := &repoScan{}
	if old != nil && fresh(old.configDeps) {
		*rs = *old
	} else {
		cs, err := sc.config(gitDir, workTree, depth)
		if err != nil {
			return err
		}
		rs = cs
	}
	for _, kv := range rs.overrides {
		sc.add(kv[0], kv[1])
	}
	if rs.indexDeps == nil || !fresh(rs.indexDeps) {
		if err := sc.index(gitDir, rs); err != nil {
			return err
		}
	}
	sc.g.mu.Lock()
	if sc.g.cache == nil {
		sc.g.cache = map[string]*repoScan{}
	}
	sc.g.cache[id] = rs
	sc.g.mu.Unlock()
	for _, s := range rs.subs {
		if err := sc.repo(s.gitDir, s.workTree, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// configScan collects one repository's configuration: the effective list
// and every include target listed on its own.
type configScan struct {
	g      *guard
	sc     *scanner
	rs     *repoScan
	seen   map[string]bool
	listed map[string]bool
}

func (c *configScan) dep(path string) {
	if _, ok := c.rs.configDeps[path]; !ok {
		c.rs.configDeps[path] = sumFile(path)
	}
}

// config lists the effective configuration of a repository (global and
// worktree files and includes as git itself resolves them) and records
// the neutral value of every program-valued key in it.
func (sc *scanner) config(gitDir, workTree string, depth int) (*repoScan, error) {
	rs := &repoScan{configDeps: map[string]fileSum{}, workTree: workTree}
	c := &configScan{g: sc.g, sc: sc, rs: rs, seen: map[string]bool{}, listed: map[string]bool{}}
	home, _ := os.UserHomeDir()
	xdg := os.Getenv("XDG_CONFIG_HOME")
	if xdg == "" && home != "" {
		xdg = filepath.Join(home, ".config")
	}
	for _, p := range []string{filepath.Join(home, ".gitconfig"), filepath.Join(xdg, "git", "config")} {
		c.dep(p)
	}
	for _, f := range []string{"config", "config.worktree", "commondir"} {
		c.dep(filepath.Join(gitDir, f))
	}
	if b, err := readSmall(filepath.Join(gitDir, "commondir")); err == nil {
		common := strings.TrimSpace(string(b))
		if !filepath.IsAbs(common) {
			common = filepath.Join(gitDir, common)
		}
		c.dep(filepath.Join(common, "config"))
	}
	dir, extra := gitDir, []string{"GIT_DIR=" + gitDir}
	if st, err := os.Stat(workTree); err == nil && st.IsDir() {
		dir = workTree
		if depth == 0 {
			extra = append(extra, "GIT_WORK_TREE="+workTree)
		}
	}
	out, err := sc.git(dir, extra, "config", "--list", "--show-origin", "--includes", "-z")
	if err != nil {
		return nil, fmt.Errorf("checking the configuration of %s: %w", gitDir, err)
	}
	coreWorktree := ""
	own := "file:" + filepath.Join(gitDir, "config")
	if err := c.entries(parseConfigList(out), dir, func(e configEntry) {
		if canonicalKey(e.key) == "core.worktree" && e.origin == own {
			coreWorktree = e.value
		}
	}); err != nil {
		return nil, err
	}
	if depth > 0 && coreWorktree != "" {
		// A submodule's git runs with GIT_DIR set and no GIT_WORK_TREE, so
		// its core.worktree names its work tree.
		if !filepath.IsAbs(coreWorktree) {
			coreWorktree = filepath.Join(gitDir, coreWorktree)
		}
		rs.workTree = filepath.Clean(coreWorktree)
	}
	return rs, nil
}

// configEntry is one entry of git config --list --show-origin -z.
type configEntry struct {
	origin, key, value string
}

func parseConfigList(b []byte) []configEntry {
	var out []configEntry
	fields := bytes.Split(b, []byte{0})
	for i := 0; i+1 < len(fields); i += 2 {
		key, value, _ := strings.Cut(string(fields[i+1]), "\n")
		out = append(out, configEntry{origin: string(fields[i]), key: key, value: value})
	}
	return out
}

// entries records the overrides for a listing and follows every include in
// it, whatever its condition. dir is where relative origins resolve.
func (c *configScan) entries(list []configEntry, dir string, each func(configEntry)) error {
	for _, e := range list {
		if e.origin == "command line:" {
			continue // the overrides themselves
		}
		if each != nil {
			each(e)
		}
		file, isFile := strings.CutPrefix(e.origin, "file:")
		if isFile {
			if !filepath.IsAbs(file) {
				file = filepath.Join(dir, file)
			}
			c.dep(file)
		}
		if v, ok := c.g.neutral(e.key); ok {
			if canon := canonicalKey(e.key); !c.seen[canon] {
				c.seen[canon] = true
				c.rs.overrides = append(c.rs.overrides, [2]string{e.key, v})
				if len(c.rs.overrides) > maxOverrides {
					return errTooMany
				}
			}
			continue
		}
		section, _, name := splitKey(e.key)
		if (section == "include" || section == "includeif") && name == "path" && isFile {
			if err := c.include(e.value, filepath.Dir(file)); err != nil {
				return err
			}
		}
	}
	return nil
}

// include lists an included file on its own (git config --file), so that
// its keys are neutral even when git would not include it now.
func (c *configScan) include(path, from string) error {
	switch {
	case path == "":
		return nil
	case strings.HasPrefix(path, "~/"):
		home, _ := os.UserHomeDir()
		path = filepath.Join(home, path[2:])
	case !filepath.IsAbs(path):
		path = filepath.Join(from, path)
	}
	path = filepath.Clean(path)
	if c.listed[path] {
		return nil
	}
	c.listed[path] = true
	if len(c.listed) > maxConfigFiles {
		return errTooMany
	}
	c.dep(path)
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	out, err := c.sc.git(filepath.Dir(path), nil, "config", "--file", path, "--list", "--show-origin", "--includes", "-z")
	if err != nil {
		return fmt.Errorf("checking the included configuration %s: %w", path, err)
	}
	return c.entries(parseConfigList(out), filepath.Dir(path), nil)
}

// index finds the populated submodules: every gitlink in the index whose
// work tree has a .git, the repositories git status and git diff start a
// child git in.
func (sc *scanner) index(gitDir string, rs *repoScan) error {
	rs.indexDeps = map[string]fileSum{filepath.Join(gitDir, "index"): sumFile(filepath.Join(gitDir, "index"))}
	rs.subs = nil
	if rs.indexDeps[filepath.Join(gitDir, "index")].kind == 0 {
		return nil
	}
	if st, err := os.Stat(rs.workTree); err != nil || !st.IsDir() {
		return nil // no work tree: nothing is populated
	}
	out, err := sc.git(rs.workTree, []string{"GIT_DIR=" + gitDir, "GIT_WORK_TREE=" + rs.workTree}, "ls-files", "--stage", "-z")
	if err != nil {
		rs.indexDeps = nil
		return fmt.Errorf("listing the submodules of %s: %w", rs.workTree, err)
	}
	for _, rec := range bytes.Split(out, []byte{0}) {
		meta, path, ok := strings.Cut(string(rec), "\t")
		if !ok || !strings.HasPrefix(meta, "160000 ") {
			continue
		}
		subTree := filepath.Join(rs.workTree, path)
		dotGit := filepath.Join(subTree, ".git")
		sum := sumFile(dotGit)
		rs.indexDeps[dotGit] = sum
		subDir := dotGit
		switch sum.kind {
		case 'd':
		case 'f':
			b, err := readSmall(dotGit)
			if err != nil {
				continue
			}
			target, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
			if !ok {
				continue
			}
			subDir = strings.TrimSpace(target)
			if !filepath.IsAbs(subDir) {
				subDir = filepath.Join(subTree, subDir)
			}
		default:
			continue
		}
		rs.subs = append(rs.subs, subRepo{gitDir: subDir, workTree: subTree})
	}
	return nil
}

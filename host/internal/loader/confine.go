package loader

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/switchboard-mcp/switchboard/host/internal/builtins"
	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/host/internal/sandbox"
	"github.com/switchboard-mcp/switchboard/plugins/git"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
)

// defaultMode is the sandbox mode a server gets without a sandbox block:
// required for built-ins and plugins where the kernel sandbox exists
// (Linux), best-effort for external servers and elsewhere.
func defaultMode(kind registry.Kind) sandbox.Mode {
	if kind == registry.KindExternal || runtime.GOOS != "linux" {
		return sandbox.ModeBestEffort
	}
	return sandbox.ModeRequired
}

// hostFiles is a config's control plane (config.ControlPlane) and the
// plugin binaries among it, resolved once for every server the config
// starts: resolved per server, a host with n servers resolved n² paths
// (140 ms of a 100-plugin start).
type hostFiles struct {
	control, binaries []string
	// links resolves paths once for every server whose sandbox is made
	// with these files (one config load): the same folders (the project,
	// data_dir, the host's binaries) are in every policy.
	links *linkMemo
}

func hostFilesOf(cfg *config.Config) hostFiles {
	return hostFiles{control: cfg.ControlPlane(), binaries: cfg.Binaries(), links: &linkMemo{}}
}

// linkMemo is a memo of filepath.EvalSymlinks and of the files beside the
// host's binary (beside), for the sandboxes made from one config load;
// safe for concurrent use.
type linkMemo struct {
	mu    sync.Mutex
	links map[string]linkResult
	self  map[string]selfFiles
}

type linkResult struct {
	path string
	err  error
}

// eval is filepath.EvalSymlinks, remembered. A nil memo does not remember.
func (m *linkMemo) eval(p string) (string, error) {
	if m == nil {
		return filepath.EvalSymlinks(p)
	}
	m.mu.Lock()
	r, ok := m.links[p]
	m.mu.Unlock()
	if ok {
		return r.path, r.err
	}
	r.path, r.err = filepath.EvalSymlinks(p)
	m.mu.Lock()
	if m.links == nil {
		m.links = map[string]linkResult{}
	}
	m.links[p] = r
	m.mu.Unlock()
	return r.path, r.err
}

// resolved is resolved(p), remembered.
func (m *linkMemo) resolved(p string) string {
	if r, err := m.eval(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

// selfFiles is what a sandbox names beside the host's binary self: the
// helper (HelperFor) and the built-ins' binary (builtinBinaryPaths).
type selfFiles struct {
	helper   string
	builtins []string
}

// beside is selfFiles of self, remembered.
func (m *linkMemo) beside(self string) selfFiles {
	if m == nil {
		return selfFiles{HelperFor(self), builtinBinaryPaths(self)}
	}
	m.mu.Lock()
	f, ok := m.self[self]
	m.mu.Unlock()
	if ok {
		return f
	}
	f = selfFiles{HelperFor(self), builtinBinaryPaths(self)}
	m.mu.Lock()
	if m.self == nil {
		m.self = map[string]selfFiles{}
	}
	m.self[self] = f
	m.mu.Unlock()
	return f
}

// confinement returns the sandbox of one server: the defaults of its kind
// (README, Security), widened or narrowed by its sandbox block. stateDir is
// the server's own folder under data_dir, the one part of it the server
// sees.
func confinement(cfg *config.Config, files hostFiles, kind registry.Kind, name string, block config.Sandbox, settings []byte, stateDir, self string) *sandbox.Sandbox {
	home, _ := os.UserHomeDir()
	p := sandbox.Policy{Mode: defaultMode(kind)}
	switch kind {
	case registry.KindBuiltin:
		if b, ok := builtins.Lookup(name); ok {
			g := b.Grants(cfg.ProjectDir, settings)
			p.Write, p.Network, p.DefaultProcesses, p.DefaultMemory = g.Write, g.Network, g.Processes, g.Memory
			p.ExecOnly, p.Exec, p.Env = g.ExecOnly, g.Exec, g.Env
		}
	case registry.KindExternal:
		// Package runners (npx, uvx) fetch packages from the network and
		// keep them under the home folder, from one start to the next.
		// Not in the person's own caches: programs outside any sandbox run
		// what is there unchecked (npx runs ~/.npm/_npx's code, uv's
		// tools and Pythons run from ~/.local/share/uv), so a server that
		// wrote them had its code run unconfined later (red team round 4).
		// Each server has a home folder of its own in its state folder;
		// the runners' settings are read where the person keeps them.
		p.Network = true
		p.Write = []string{cfg.ProjectDir}
		p.Read = append([]string{filepath.Join(home, ".npmrc")}, packageConfigs(home)...)
		if stateDir != "" {
			own := filepath.Join(stateDir, "home")
			p.Make = []string{own}
			p.Env = privateHome(own, home)
		}
	default: // third-party plugins: read the project, write their own folder
		p.Read = []string{cfg.ProjectDir}
	}
	p.State = stateDir
	if block.Mode != "" {
		p.Mode = sandbox.Mode(block.Mode)
	}
	if block.Network != nil {
		p.Network = *block.Network
	}
	p.Read = append(p.Read, block.Read...)
	p.Write = append(p.Write, block.Write...)
	p.Memory, p.Processes = block.Memory, block.Processes
	p.ReadOnly = append(p.ReadOnly, self)
	beside := files.links.beside(self)
	helper := beside.helper
	if helper != self {
		p.ReadOnly = append(p.ReadOnly, helper)
	}
	// The built-ins' binary the host runs (builtinbin.go): a plugin that
	// may write its folder cannot change it.
	p.ReadOnly = append(p.ReadOnly, beside.builtins...)
	p = p.CleanWith(home, files.links.eval)
	// What the person's git runs, in the work trees the server may write:
	// hooks, config and the hooksPath folder for the git built-in (which
	// runs git alone and must commit), the whole git folder for every
	// other server.
	gitBuiltin := kind == registry.KindBuiltin && name == git.Name
	ro, mk, mf, _ := gitProtection(p.Write, gitBuiltin, true)
	p.ReadOnly, p.Make, p.Files = append(p.ReadOnly, ro...), append(p.Make, mk...), append(p.Files, mf...)
	// The control plane: hidden where a grant would show it; binaries
	// (and the host's own) read-only. Its paths are resolved already, once
	// for every server (hostFiles).
	for _, c := range files.control {
		switch {
		case slices.Contains(files.binaries, c):
			if !slices.Contains(p.ReadOnly, c) {
				p.ReadOnly = append(p.ReadOnly, c)
			}
		case !slices.Contains(p.Hide, c):
			p.Hide = append(p.Hide, c)
		}
	}
	if dir := configFolderInReach(cfg, p, files.links); dir != "" {
		p.ReadOnly = append(p.ReadOnly, dir)
	}
	return &sandbox.Sandbox{Name: name, Policy: p, Helper: helper, Preparer: &cover{readOnly: ro, gitBuiltin: gitBuiltin}}
}

// cover is what each start of a sandbox does before it is built: bind
// what the person's git runs from as it is at that start (gitProtection:
// a submodule, linked work tree, hooks path or include the person added
// while the host ran was writable to the servers started before, red
// team round 13), hold the .git placeholders it binds while the sandbox
// may bind them (holdPlaceholders), and cover the files of other running
// hosts that lie in its writable folders (othersFiles), remembering which
// (others), holding their placeholders too: the other host removes its
// own when it stops only if no host holds it, and a command of this
// host's waiting for it to go made a repository there (red team round
// 13).
type cover struct {
	readOnly   []string // the git protection when the policy was made
	gitBuiltin bool     // the git built-in's sandbox (its git folders stay writable)
	mu         sync.Mutex
	git        []string // the git protection at the last start
	others     []string // other hosts' files covered at the last start
}

var _ sandbox.Preparer = (*cover)(nil)

// Prepare implements sandbox.Preparer: what the person's git runs from
// now, and the other hosts' files.
func (c *cover) Prepare(p *sandbox.Policy) error {
	ro, mk, mf, refused := gitProtection(p.Write, c.gitBuiltin, true)
	if refused != nil && p.Mode == sandbox.ModeRequired {
		return refused
	}
	for _, f := range ro {
		if !slices.Contains(p.ReadOnly, f) {
			p.ReadOnly = append(p.ReadOnly, f)
		}
	}
	for _, f := range mk {
		if !slices.Contains(p.Make, f) {
			p.Make = append(p.Make, f)
		}
	}
	for _, f := range mf {
		if !slices.ContainsFunc(p.Files, func(g sandbox.File) bool { return g.Path == f.Path }) {
			p.Files = append(p.Files, f)
		}
	}
	if err := tooManyToMake(p); err != nil {
		return err
	}
	hide, others, _ := othersFiles(p.Write)
	for _, f := range hide {
		if !slices.Contains(p.Hide, f) {
			p.Hide = append(p.Hide, f)
		}
	}
	for _, f := range others {
		if !slices.Contains(p.ReadOnly, f) {
			p.ReadOnly = append(p.ReadOnly, f)
		}
	}
	c.mu.Lock()
	c.git = ro
	c.others = append(hide, others...)
	c.mu.Unlock()
	return nil
}

// maxMadeFiles is how many missing files (includes, programs a git config
// names) a sandbox's start makes empty, at most.
const maxMadeFiles = 100

// tooManyToMake refuses a start that would make more than maxMadeFiles
// files: a repository's config with 20,000 include.path lines had the host
// make 20,000 empty files in the project (red team round 18). Unmade, what
// they name could be written by the server and read by the person's git,
// so the start is refused; best-effort starts without making them.
func tooManyToMake(p *sandbox.Policy) error {
	var missing []string
	for _, f := range p.Files {
		if _, err := os.Lstat(f.Path); errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, f.Path)
		}
	}
	if len(missing) <= maxMadeFiles {
		return nil
	}
	if p.Mode == sandbox.ModeRequired {
		return fmt.Errorf("sandbox: the git configs in the folders this server may write name %d files that do not exist (include.path, programs; %s, …): the host makes at most %d empty ones to keep the server from writing them; remove the entries the repository does not need, or set sandbox { mode = \"best-effort\" } in the server's block to start it with them unprotected", len(missing), strings.Join(missing[:3], ", "), maxMadeFiles)
	}
	p.Files = slices.DeleteFunc(p.Files, func(f sandbox.File) bool { return slices.Contains(missing, f.Path) })
	return nil
}

// Made implements sandbox.Preparer: the placeholders bound, the host's
// own and other hosts', are held.
func (c *cover) Made(p *sandbox.Policy) {
	c.mu.Lock()
	own := append(slices.Clone(c.readOnly), c.git...)
	c.mu.Unlock()
	holdPlaceholders(own)
	_, _, phs := othersFiles(p.Write)
	adoptPlaceholders(phs)
	holdPlaceholders(phs)
}

// gitStale reports whether what the person's git runs from in the
// sandbox's writable folders now holds a path its last start did not
// bind (a submodule, a linked work tree, a hooks path or an include added
// since).
func (c *cover) gitStale(p sandbox.Policy, protection func(write []string, gitBuiltin bool) []string) bool {
	now := protection(p.Write, c.gitBuiltin)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.git == nil {
		return false // not started since the policy was made
	}
	for _, f := range now {
		if !slices.Contains(c.git, f) {
			return true
		}
	}
	return false
}

// binds reports whether the sandbox's last start bound path read-only:
// its own policy's, or another host's file it covered.
func (c *cover) binds(p sandbox.Policy, path string) bool {
	if slices.Contains(p.ReadOnly, path) {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.others, path)
}

// bindsPath is cover.binds for any sandbox (one without a cover binds
// only what its policy names).
func bindsPath(sb *sandbox.Sandbox, path string) bool {
	if c, ok := sb.Preparer.(*cover); ok {
		return c.binds(sb.Policy, path)
	}
	return slices.Contains(sb.Policy.ReadOnly, path)
}

// uncovered reports whether another running host (of recs) has files in
// reach of the sandbox that its last start did not cover.
func (c *cover) uncovered(recs []hostRecord, p sandbox.Policy) bool {
	hide, ro, _ := filesOf(recs, p.Write)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range append(hide, ro...) {
		if !slices.Contains(c.others, f) {
			return true
		}
	}
	return false
}

// privateHome is the environment that makes own an external server's home
// folder: its caches, data and state there, and the package runners'
// settings (npm's, uv's, pip's) read from the person's home where they
// exist.
func privateHome(own, home string) map[string]string {
	env := map[string]string{
		"HOME":             own,
		"XDG_CACHE_HOME":   filepath.Join(own, ".cache"),
		"XDG_DATA_HOME":    filepath.Join(own, ".local", "share"),
		"XDG_STATE_HOME":   filepath.Join(own, ".local", "state"),
		"npm_config_cache": filepath.Join(own, ".npm"),
	}
	if home == "" {
		return env
	}
	configDir := xdgDir(home, "XDG_CONFIG_HOME", ".config")
	for name, f := range map[string]string{
		"npm_config_userconfig": filepath.Join(home, ".npmrc"),
		"UV_CONFIG_FILE":        filepath.Join(configDir, "uv", "uv.toml"),
		"PIP_CONFIG_FILE":       filepath.Join(configDir, "pip", "pip.conf"),
	} {
		if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() {
			env[name] = f
		}
	}
	return env
}

// xdgDir returns the folder the XDG variable env names when it is an
// absolute path (as the specification asks), else home/fallback.
func xdgDir(home, env, fallback string) string {
	if x := os.Getenv(env); filepath.IsAbs(x) {
		return x
	}
	return filepath.Join(home, fallback)
}

// under returns dir/name for each name.
func under(dir string, names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, filepath.Join(dir, n))
	}
	return out
}

// packageConfigNames are the folders under the config folder
// ($XDG_CONFIG_HOME or ~/.config) that an external stdio server may read:
// the package runners' settings (an index URL, a registry). Not the config
// folder as a whole: it holds other programs' credentials (gh's token in
// gh/hosts.yml, gcloud's, a git credential store), which a server from the
// network could read and send out. A server that needs another one is
// granted it with sandbox { read = [...] }.
var packageConfigNames = []string{"uv", "pip", "pipx", "pypoetry", "pnpm", "yarn", "deno"}

// packageConfigs returns the package runners' config folders in the home
// folder.
func packageConfigs(home string) []string {
	if home == "" {
		return nil
	}
	return under(xdgDir(home, "XDG_CONFIG_HOME", ".config"), packageConfigNames)
}

// configFolderInReach returns the folder that holds the config (and the
// lock file beside it) when it lies inside a folder the policy lets the
// server write, and is not that folder itself: the sandbox then binds the
// whole folder read-only. Covering the files alone is not enough, because
// a person's save replaces the file (an editor, `git pull`, `plugin lock`),
// and the cover stays on the old one: a command waiting for the new file
// could write it before the host restarts the server (found from outside:
// the next reload applied the agent's config). A config in the writable
// folder itself (the project's root) cannot be covered this way; README
// (Security) advises a subfolder.
func configFolderInReach(cfg *config.Config, p sandbox.Policy, links *linkMemo) string {
	dir := links.resolved(filepath.Dir(cfg.File))
	for _, w := range append(slices.Clone(p.Write), p.State) {
		if w == "" {
			continue
		}
		if w = links.resolved(w); dir != w && within(dir, w) {
			return dir
		}
	}
	return ""
}

// HelperBinary is the sandbox helper's file name, beside the switchboard
// binary.
const HelperBinary = "switchboard-sandbox"

// HelperPin is the SHA-256 (hex) of the switchboard-sandbox built with
// this host, set at link time by make build (-X …/loader.HelperPin=…).
// Empty in a plain `go build`: the host then runs its own binary as the
// helper.
var HelperPin string

// helperPin is HelperPin as HelperFor reads it (tests set it, while the
// goroutines of hosts started before may still read it).
var helperPin atomic.Pointer[string]

func init() {
	p := HelperPin
	helperPin.Store(&p)
	// The spawner is started from the helper file it checks here, through
	// its descriptor (sandbox.startSpawner): the file HelperFor chose may
	// have been replaced since.
	sandbox.VerifyHelper = func(path string, f *os.File) bool {
		if filepath.Base(path) != HelperBinary {
			return true // a switchboard binary serving as its own helper
		}
		pin := *helperPin.Load()
		fi, err := f.Stat()
		if pin == "" || err != nil {
			return false
		}
		// The descriptor's file: hashed unless HelperFor already hashed
		// a file of this identity.
		return helperSums.matches(path, fi, pin, func() (string, error) {
			h := sha256.New()
			if _, err := io.Copy(h, f); err != nil {
				return "", err
			}
			return hex.EncodeToString(h.Sum(nil)), nil
		})
	}
}

// HelperFor returns the sandbox helper to use with the switchboard binary
// self: the small switchboard-sandbox beside it (a start in a few
// milliseconds) when that file hashes to HelperPin, else self, which runs
// the same code as `switchboard sandbox-exec` after loading everything the
// host links. The helper runs before any sandbox exists: a file there that
// is not the one this build pins (from another build, or written by a
// server that may write the folder while no helper was there to protect)
// is never run. Red team: a bash command wrote one beside a host that had
// none, and the next start ran it as the host's user, unconfined.
func HelperFor(self string) string {
	pin := *helperPin.Load()
	if pin == "" {
		return self
	}
	h := filepath.Join(filepath.Dir(self), HelperBinary)
	st, err := os.Stat(h)
	if err != nil || !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		return self
	}
	if helperSums.matches(h, st, pin, func() (string, error) { return launcher.FileSHA256(h) }) {
		return h
	}
	return self
}

// helperSums remembers, by file identity, whether a helper hashed to the
// pin: the host asks at start-up and at every config load.
var helperSums sumMemo

type sumMemo struct {
	mu   sync.Mutex
	seen map[string]helperSum
}

type helperSum struct {
	id  FileIdentity
	pin string
	ok  bool
}

// matches says whether the file at path that fi describes hashes to pin,
// hashing it (sum) only when no file of its identity was hashed before.
func (m *sumMemo) matches(path string, fi os.FileInfo, pin string, sum func() (string, error)) bool {
	id, err := identityOf(path, fi)
	if err != nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.seen[path]; ok && v.id == *id && v.pin == pin {
		return v.ok
	}
	got, err := sum()
	ok := err == nil && got == pin
	if m.seen == nil {
		m.seen = map[string]helperSum{}
	}
	m.seen[path] = helperSum{id: *id, pin: pin, ok: ok}
	return ok
}

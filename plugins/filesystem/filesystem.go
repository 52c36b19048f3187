// Package filesystem is the built-in filesystem plugin: file tools confined
// to the project directory (and any extra roots in its config block).
//
// Every path is resolved (symlinks followed) and must lie inside a root by
// whole path components; the operation itself then runs through os.Root,
// relative to the root's directory descriptor, so a symlink swapped in
// after the check cannot lead outside. The host's protected paths (its
// config, lock file, plugins and data dir) are refused by resolved path
// before, and on the opened descriptor after, every open (see package
// confine); listings and walks leave them out. Walks (directory_tree,
// search_files, grep) open each folder once through confine.Dir and what is
// below it relative to the folder's descriptor without following symlinks:
// path checks per folder (before and after its files are read), identity
// and hard-link checks per file. Writes go to a temporary file in the
// same folder that is renamed over the target, and `if_match` (a sha256
// the caller saw) refuses a write to a file that changed since.
package filesystem

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/switchboard-mcp/switchboard/plugins/internal/confine"
	"github.com/switchboard-mcp/switchboard/sdk"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/tuning"
)

// Name is the built-in's server name.
const Name = "filesystem"

// Version is the plugin's version.
const Version = "0.2.0"

// DefaultMaxReadBytes caps what one read returns.
const DefaultMaxReadBytes = 10 << 20

// Settings is the `builtin "filesystem" {}` block.
type Settings struct {
	// Roots are extra directories the tools may use besides project_dir.
	Roots []string `hcl:"roots,optional" json:"roots,omitempty"`
	// MaxReadBytes caps one read (default 10 MB).
	MaxReadBytes int64 `hcl:"max_read_bytes,optional" json:"max_read_bytes,omitempty"`
}

// ResolvePaths makes relative roots absolute.
func (s *Settings) ResolvePaths(resolve func(string) string) {
	for i, r := range s.Roots {
		s.Roots[i] = resolve(r)
	}
}

type plugin struct {
	roots   *confine.Roots
	maxRead int64

	mu      sync.Mutex
	osRoots map[string]*os.Root

	hashes hashCache
	trim   tuning.Trimmer // a large read's or search's heap goes back a second after
}

// New returns the filesystem plugin.
func New() *sdk.Server {
	s := sdk.NewServer(Name, Version, sdk.WithInstructions(
		"Reads, writes and searches files inside the allowed directories. Relative paths are relative to the project directory. "+
			"Pass if_match (the sha256 from a read or get_file_info) when writing to avoid overwriting someone else's change."))
	p := &plugin{osRoots: map[string]*os.Root{}}
	s.OnConfigure(func(_ context.Context, cfg sdk.Config) error {
		var st Settings
		if err := cfg.Decode(&st); err != nil {
			return err
		}
		roots, err := confine.New(append([]string{cfg.ProjectDir}, st.Roots...)...)
		if err != nil {
			return fmt.Errorf("filesystem: %w", err)
		}
		// ProtectedPaths includes HostDataDir; both are named in case a
		// host sends only the latter.
		roots.Protect(append([]string{cfg.HostDataDir}, cfg.ProtectedPaths...)...)
		p.roots = roots
		p.maxRead = st.MaxReadBytes
		if p.maxRead <= 0 {
			p.maxRead = DefaultMaxReadBytes
		}
		return nil
	})
	s.OnShutdown(p.close)
	p.addReadTools(s)
	p.addWriteTools(s)
	p.addSearchTools(s)
	return s
}

func (p *plugin) close() {
	p.trim.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.osRoots {
		_ = r.Close()
	}
	p.osRoots = map[string]*os.Root{}
}

// root returns the os.Root for a root directory, opening it once.
func (p *plugin) root(dir string) (*os.Root, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.osRoots[dir]; ok {
		return r, nil
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	p.osRoots[dir] = r
	return r, nil
}

// loc is a located path with its os.Root.
type loc struct {
	confine.Location
	root *os.Root
	arg  string // the path as the caller wrote it
}

// locate resolves a caller's path. Paths with characters the OS would read
// differently than a human (NUL, trailing spaces or quotes that some
// checkers strip) are refused rather than guessed at.
func (p *plugin) locate(path string) (loc, error) {
	if path == "" {
		return loc{}, fmt.Errorf("path is empty")
	}
	if strings.TrimRight(path, " \t\r\n'\"") != path || strings.TrimLeft(path, " \t\r\n'\"") != path {
		return loc{}, fmt.Errorf("path %q starts or ends with spaces or quotes; pass the exact path", path)
	}
	l, err := p.roots.Locate(path)
	if err != nil {
		return loc{}, err
	}
	r, err := p.root(l.Root)
	if err != nil {
		return loc{}, err
	}
	return loc{Location: l, root: r, arg: path}, nil
}

func (p *plugin) display(l loc) string { return p.roots.Display(l.Real) }

// pathPatterns makes the root-relative path(s) of a call its permission
// patterns, so rules like "filesystem.write_file:docs/*" work.
// denied reports whether the host's deny rules for the call (req.Denied)
// match the entry at fsPath (slash-separated, below the root that root
// opens) in the form pathPatterns gives paths: a folder's entry the call
// did not name is left out of listings, walks and searches, as a call
// naming it would be refused (found from outside: with
// "filesystem.*:*.env" denied, grep over the project printed .env).
func (p *plugin) denied(req *sdk.Request, root *os.Root, fsPath string) bool {
	if req == nil || len(req.Denied) == 0 {
		return false
	}
	return req.DeniedPath(p.roots.Display(filepath.Join(root.Name(), filepath.FromSlash(fsPath))))
}

func (p *plugin) pathPatterns(fields ...string) func(context.Context, json.RawMessage) ([]string, error) {
	return func(_ context.Context, args json.RawMessage) ([]string, error) {
		var m map[string]any
		if err := json.Unmarshal(args, &m); err != nil {
			return nil, err
		}
		var out []string
		add := func(v string) {
			if real, err := p.roots.Resolve(v); err == nil {
				out = append(out, p.roots.Display(real))
			} else {
				// Refused by the tool anyway; no allow rule for the roots
				// should match it.
				out = append(out, "outside:"+v)
			}
		}
		for _, f := range fields {
			switch v := m[f].(type) {
			case string:
				add(v)
			case []any:
				for _, e := range v {
					if s, ok := e.(string); ok {
						add(s)
					}
				}
			case nil:
				if f == "path" {
					add(".")
				}
			}
		}
		return out, nil
	}
}

// Package git is the built-in git plugin. It runs the real git binary
// (never through a shell) on repositories inside the project directory
// only, with every setting that could run a program neutralised in the
// repository and in every submodule git could open from it (see guard),
// no transport allowed (so no lazy fetch), and every user-supplied
// revision resolved to an object id before it reaches a git command line.
package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/switchboard-mcp/switchboard/internal/gitplaceholder"
	"github.com/switchboard-mcp/switchboard/internal/regularfile"
	"github.com/switchboard-mcp/switchboard/plugins/internal/confine"
	"github.com/switchboard-mcp/switchboard/sdk"
)

// Name is the built-in's server name.
const Name = "git"

// Version is the plugin's version.
const Version = "0.2.0"

// DefaultOutputCap bounds the characters of git output returned.
const DefaultOutputCap = 60000

// Settings is the `builtin "git" {}` block.
type Settings struct {
	// AllowHooks lets repository hooks run (off by default: a cloned
	// repository's hooks are someone else's code).
	AllowHooks bool `hcl:"allow_hooks,optional" json:"allow_hooks,omitempty"`
	// AllowFilters lets clean/smudge/process filter drivers (Git LFS
	// among them) and textconv run.
	AllowFilters bool `hcl:"allow_filters,optional" json:"allow_filters,omitempty"`
	// OutputCap is the number of characters of output returned.
	OutputCap int `hcl:"output_cap,optional" json:"output_cap,omitempty"`
}

type plugin struct {
	roots    *confine.Roots
	settings Settings
	guard    *guard
}

// New returns the git plugin.
func New() *sdk.Server {
	s := sdk.NewServer(Name, Version, sdk.WithInstructions(
		"Git tools for repositories inside the project directory. repo_path defaults to the project directory."))
	p := &plugin{}
	s.OnConfigure(func(_ context.Context, cfg sdk.Config) error {
		if err := cfg.Decode(&p.settings); err != nil {
			return err
		}
		if p.settings.OutputCap <= 0 {
			p.settings.OutputCap = DefaultOutputCap
		}
		var err error
		if p.roots, err = confine.New(cfg.ProjectDir); err != nil {
			return err
		}
		p.roots.Exclude(cfg.HostDataDir)
		p.guard = &guard{allowHooks: p.settings.AllowHooks, allowFilters: p.settings.AllowFilters}
		return nil
	})
	p.addTools(s)
	return s
}

func read(name, title, desc string) sdk.Tool {
	return sdk.Tool{Name: name, Title: title, Description: desc, ReadOnly: true, Idempotent: sdk.Bool(true), OpenWorld: sdk.Bool(false)}
}

func write(name, title, desc string, destructive bool) sdk.Tool {
	return sdk.Tool{Name: name, Title: title, Description: desc, Destructive: sdk.Bool(destructive), OpenWorld: sdk.Bool(false)}
}

func (p *plugin) addTools(s *sdk.Server) {
	sdk.AddTool(s, read("git_status", "Git status", "Show the working tree status of a repository."), p.status)
	sdk.AddTool(s, read("git_diff_unstaged", "Diff of unstaged changes", "Show changes in the working tree that are not staged."), p.diffUnstaged)
	sdk.AddTool(s, read("git_diff_staged", "Diff of staged changes", "Show changes staged for the next commit."), p.diffStaged)
	sdk.AddTool(s, read("git_diff", "Diff against a revision", "Show the differences between the working tree and a branch, tag or commit."), p.diff)
	sdk.AddTool(s, read("git_log", "Commit log", "Show commit history, optionally limited by count, dates and path."), p.log)
	sdk.AddTool(s, read("git_show", "Show a commit", "Show a commit (or another object) and its changes."), p.show)
	sdk.AddTool(s, read("git_branch", "List branches", "List local, remote or all branches, optionally only those containing (or not containing) a commit."), p.branch)
	sdk.AddTool(s, read("git_blame", "Blame a file", "Show which commit last changed each line of a file."), p.blame)
	sdk.AddTool(s, write("git_add", "Stage files", "Add files' contents to the index.", false), p.add)
	sdk.AddTool(s, write("git_commit", "Commit", "Record the staged changes as a new commit with a message.", false), p.commit)
	sdk.AddTool(s, write("git_reset", "Unstage files", "Unstage the given files, or everything when files is empty. The working tree is not touched.", true), p.reset)
	sdk.AddTool(s, write("git_create_branch", "Create a branch", "Create a new branch from the current HEAD or from base_branch.", false), p.createBranch)
	sdk.AddTool(s, write("git_checkout", "Switch branches", "Switch to an existing local branch.", true), p.checkout)
}

// newGitlinks lists the paths under rels that the index now holds as
// gitlinks (mode 160000) and HEAD does not.
// The whole listing, not the output cap's share: a gitlink listed after
// the cut was missed (red team round 8).
func newGitlinks(ctx context.Context, r *repo, rels []string) ([]string, error) {
	out, err := r.rawGit(ctx, append([]string{"diff", "--cached", "--raw", "--no-renames", "-z", "--"}, rels...)...)
	if err != nil {
		return nil, err
	}
	var found []string
	fields := strings.Split(out, "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		modes := strings.Fields(strings.TrimPrefix(fields[i], ":"))
		if len(modes) >= 2 && modes[1] == "160000" && modes[0] != "160000" {
			found = append(found, fields[i+1])
		}
	}
	return found, nil
}

type repoArgs struct {
	RepoPath string `json:"repo_path,omitempty" jsonschema:"description=Repository path inside the project directory (default: the project directory)"`
}

type diffArgs struct {
	RepoPath     string `json:"repo_path,omitempty" jsonschema:"description=Repository path inside the project directory (default: the project directory)"`
	ContextLines *int   `json:"context_lines,omitempty" jsonschema:"description=Lines of context around each change (default 3),minimum=0,maximum=1000"`
}

func contextFlag(n *int) (string, error) {
	if n == nil {
		return "--unified=3", nil
	}
	if *n < 0 || *n > 1000 {
		return "", fmt.Errorf("context_lines must be between 0 and 1000")
	}
	return fmt.Sprintf("--unified=%d", *n), nil
}

func (p *plugin) status(ctx context.Context, _ *sdk.Request, in repoArgs) (*sdk.Result, error) {
	return p.run(ctx, in.RepoPath, func(r *repo) (string, error) {
		out, err := r.git(ctx, "status")
		return "Repository status:\n" + out, err
	})
}

func (p *plugin) diffUnstaged(ctx context.Context, _ *sdk.Request, in diffArgs) (*sdk.Result, error) {
	return p.run(ctx, in.RepoPath, func(r *repo) (string, error) {
		u, err := contextFlag(in.ContextLines)
		if err != nil {
			return "", err
		}
		return orNone(r.git(ctx, "diff", "--no-ext-diff", r.textconv(), u))
	})
}

func (p *plugin) diffStaged(ctx context.Context, _ *sdk.Request, in diffArgs) (*sdk.Result, error) {
	return p.run(ctx, in.RepoPath, func(r *repo) (string, error) {
		u, err := contextFlag(in.ContextLines)
		if err != nil {
			return "", err
		}
		return orNone(r.git(ctx, "diff", "--cached", "--no-ext-diff", r.textconv(), u))
	})
}

type targetArgs struct {
	RepoPath     string `json:"repo_path,omitempty" jsonschema:"description=Repository path inside the project directory (default: the project directory)"`
	Target       string `json:"target" jsonschema:"description=Branch, tag or commit to compare the working tree with"`
	ContextLines *int   `json:"context_lines,omitempty" jsonschema:"description=Lines of context around each change (default 3),minimum=0,maximum=1000"`
}

func (p *plugin) diff(ctx context.Context, _ *sdk.Request, in targetArgs) (*sdk.Result, error) {
	return p.run(ctx, in.RepoPath, func(r *repo) (string, error) {
		u, err := contextFlag(in.ContextLines)
		if err != nil {
			return "", err
		}
		id, err := r.resolve(ctx, in.Target, "commit")
		if err != nil {
			return "", err
		}
		return orNone(r.git(ctx, "diff", "--no-ext-diff", r.textconv(), u, id, "--"))
	})
}

type logArgs struct {
	RepoPath string `json:"repo_path,omitempty" jsonschema:"description=Repository path inside the project directory (default: the project directory)"`
	MaxCount int    `json:"max_count,omitempty" jsonschema:"description=Number of commits to show (default 10),minimum=1,maximum=1000"`
	Since    string `json:"since,omitempty" jsonschema:"description=Only commits after this date (e.g. 2026-01-01 or '2 weeks ago')"`
	Until    string `json:"until,omitempty" jsonschema:"description=Only commits before this date"`
	Path     string `json:"path,omitempty" jsonschema:"description=Only commits touching this path"`
}

func (p *plugin) log(ctx context.Context, _ *sdk.Request, in logArgs) (*sdk.Result, error) {
	return p.run(ctx, in.RepoPath, func(r *repo) (string, error) {
		n := in.MaxCount
		if n <= 0 {
			n = 10
		}
		if n > 1000 {
			return "", fmt.Errorf("max_count must be at most 1000")
		}
		args := []string{
			"log", fmt.Sprintf("--max-count=%d", n), "--no-ext-diff", r.textconv(),
			"--format=commit %H%nAuthor: %an <%ae>%nDate:   %aI%n%n%w(0,4,4)%B",
		}
		if in.Since != "" {
			args = append(args, "--since="+in.Since)
		}
		if in.Until != "" {
			args = append(args, "--until="+in.Until)
		}
		args = append(args, "--end-of-options", "HEAD", "--")
		if in.Path != "" {
			rel, err := r.path(in.Path)
			if err != nil {
				return "", err
			}
			args = append(args, rel)
		}
		return orNone(r.git(ctx, args...))
	})
}

type showArgs struct {
	RepoPath string `json:"repo_path,omitempty" jsonschema:"description=Repository path inside the project directory (default: the project directory)"`
	Revision string `json:"revision" jsonschema:"description=Commit, branch or tag to show"`
}

func (p *plugin) show(ctx context.Context, _ *sdk.Request, in showArgs) (*sdk.Result, error) {
	return p.run(ctx, in.RepoPath, func(r *repo) (string, error) {
		id, err := r.resolve(ctx, in.Revision, "")
		if err != nil {
			return "", err
		}
		return r.git(ctx, "show", "--no-ext-diff", r.textconv(), id, "--")
	})
}

type branchArgs struct {
	RepoPath    string `json:"repo_path,omitempty" jsonschema:"description=Repository path inside the project directory (default: the project directory)"`
	BranchType  string `json:"branch_type,omitempty" jsonschema:"description=Which branches: local (default) or remote or all,enum=local,enum=remote,enum=all"`
	Contains    string `json:"contains,omitempty" jsonschema:"description=Only branches that contain this commit"`
	NotContains string `json:"not_contains,omitempty" jsonschema:"description=Only branches that do not contain this commit"`
}

func (p *plugin) branch(ctx context.Context, _ *sdk.Request, in branchArgs) (*sdk.Result, error) {
	return p.run(ctx, in.RepoPath, func(r *repo) (string, error) {
		args := []string{"branch", "--no-color"}
		switch in.BranchType {
		case "", "local":
		case "remote":
			args = append(args, "--remotes")
		case "all":
			args = append(args, "--all")
		default:
			return "", fmt.Errorf("branch_type %q must be local, remote or all", in.BranchType)
		}
		for flag, rev := range map[string]string{"--contains=": in.Contains, "--no-contains=": in.NotContains} {
			if rev == "" {
				continue
			}
			id, err := r.resolve(ctx, rev, "commit")
			if err != nil {
				return "", err
			}
			args = append(args, flag+id)
		}
		return orNone(r.git(ctx, args...))
	})
}

type blameArgs struct {
	RepoPath  string `json:"repo_path,omitempty" jsonschema:"description=Repository path inside the project directory (default: the project directory)"`
	Path      string `json:"path" jsonschema:"description=File to blame"`
	StartLine int    `json:"start_line,omitempty" jsonschema:"description=First line (1-based),minimum=1"`
	EndLine   int    `json:"end_line,omitempty" jsonschema:"description=Last line,minimum=1"`
}

func (p *plugin) blame(ctx context.Context, _ *sdk.Request, in blameArgs) (*sdk.Result, error) {
	return p.run(ctx, in.RepoPath, func(r *repo) (string, error) {
		rel, err := r.path(in.Path)
		if err != nil {
			return "", err
		}
		args := []string{"blame", r.textconv()}
		if in.StartLine > 0 || in.EndLine > 0 {
			start, end := max(in.StartLine, 1), in.EndLine
			if end > 0 && end < start {
				return "", fmt.Errorf("end_line %d is before start_line %d", end, start)
			}
			if end > 0 {
				args = append(args, fmt.Sprintf("-L%d,%d", start, end))
			} else {
				args = append(args, fmt.Sprintf("-L%d,", start))
			}
		}
		return r.git(ctx, append(args, "--", rel)...)
	})
}

type filesArgs struct {
	RepoPath string   `json:"repo_path,omitempty" jsonschema:"description=Repository path inside the project directory (default: the project directory)"`
	Files    []string `json:"files" jsonschema:"description=Paths to stage, inside the repository"`
}

func (p *plugin) add(ctx context.Context, _ *sdk.Request, in filesArgs) (*sdk.Result, error) {
	return p.run(ctx, in.RepoPath, func(r *repo) (string, error) {
		if len(in.Files) == 0 {
			return "", fmt.Errorf("files is empty: name the paths to stage")
		}
		rels, err := r.paths(in.Files)
		if err != nil {
			return "", err
		}
		if _, err := r.git(ctx, append([]string{"add", "--"}, rels...)...); err != nil {
			return "", err
		}
		// A repository inside the work tree, staged, is a gitlink: the
		// person's `git status` then goes into it and runs what its own
		// config names (core.fsmonitor), outside any sandbox, and its git
		// folder is one a server may write (red team round 7). Such a new
		// gitlink is unstaged again and refused.
		embedded, err := newGitlinks(ctx, r, rels)
		if err != nil {
			// Unchecked is refused: nothing of this add stays staged.
			_, _ = r.git(ctx, append([]string{"reset", "-q", "--"}, rels...)...)
			return "", fmt.Errorf("could not check the staged paths for repositories inside this one, so nothing was staged: %w", err)
		}
		if len(embedded) > 0 {
			_, _ = r.git(ctx, append([]string{"reset", "-q", "--"}, embedded...)...)
			return "", fmt.Errorf("refused to stage %s: a git repository of its own inside this one (a gitlink); the person's git would run what its config names. Add its files from a folder that is not a repository, or add it as a submodule yourself", strings.Join(embedded, ", "))
		}
		return "Staged: " + strings.Join(rels, ", "), nil
	})
}

type commitArgs struct {
	RepoPath string `json:"repo_path,omitempty" jsonschema:"description=Repository path inside the project directory (default: the project directory)"`
	Message  string `json:"message" jsonschema:"description=The commit message"`
}

func (p *plugin) commit(ctx context.Context, _ *sdk.Request, in commitArgs) (*sdk.Result, error) {
	return p.run(ctx, in.RepoPath, func(r *repo) (string, error) {
		if strings.TrimSpace(in.Message) == "" {
			return "", fmt.Errorf("message is empty")
		}
		if _, err := r.git(ctx, "commit", "--quiet", "--no-edit", "--message", in.Message); err != nil {
			return "", err
		}
		id, err := r.git(ctx, "rev-parse", "--verify", "--end-of-options", "HEAD")
		return "Committed " + strings.TrimSpace(id), err
	})
}

type resetArgs struct {
	RepoPath string   `json:"repo_path,omitempty" jsonschema:"description=Repository path inside the project directory (default: the project directory)"`
	Files    []string `json:"files,omitempty" jsonschema:"description=Paths to unstage (default: everything)"`
}

func (p *plugin) reset(ctx context.Context, _ *sdk.Request, in resetArgs) (*sdk.Result, error) {
	return p.run(ctx, in.RepoPath, func(r *repo) (string, error) {
		rels, err := r.paths(in.Files)
		if err != nil {
			return "", err
		}
		if _, err := r.git(ctx, append([]string{"reset", "--quiet", "--"}, rels...)...); err != nil {
			return "", err
		}
		if len(rels) == 0 {
			return "Unstaged everything.", nil
		}
		return "Unstaged: " + strings.Join(rels, ", "), nil
	})
}

type createBranchArgs struct {
	RepoPath   string `json:"repo_path,omitempty" jsonschema:"description=Repository path inside the project directory (default: the project directory)"`
	BranchName string `json:"branch_name" jsonschema:"description=Name of the new branch"`
	BaseBranch string `json:"base_branch,omitempty" jsonschema:"description=Branch or commit to start from (default: HEAD)"`
}

func (p *plugin) createBranch(ctx context.Context, _ *sdk.Request, in createBranchArgs) (*sdk.Result, error) {
	return p.run(ctx, in.RepoPath, func(r *repo) (string, error) {
		if err := r.checkBranchName(ctx, in.BranchName); err != nil {
			return "", err
		}
		base := "HEAD"
		if in.BaseBranch != "" {
			base = in.BaseBranch
		}
		id, err := r.resolve(ctx, base, "commit")
		if err != nil {
			return "", err
		}
		if _, err := r.git(ctx, "branch", "--end-of-options", in.BranchName, id); err != nil {
			return "", err
		}
		return fmt.Sprintf("Created branch %s at %s", in.BranchName, id[:min(12, len(id))]), nil
	})
}

type checkoutArgs struct {
	RepoPath   string `json:"repo_path,omitempty" jsonschema:"description=Repository path inside the project directory (default: the project directory)"`
	BranchName string `json:"branch_name" jsonschema:"description=Existing local branch to switch to"`
}

func (p *plugin) checkout(ctx context.Context, _ *sdk.Request, in checkoutArgs) (*sdk.Result, error) {
	return p.run(ctx, in.RepoPath, func(r *repo) (string, error) {
		if err := r.checkBranchName(ctx, in.BranchName); err != nil {
			return "", err
		}
		if _, err := r.git(ctx, "show-ref", "--verify", "--quiet", "refs/heads/"+in.BranchName); err != nil {
			return "", fmt.Errorf("there is no local branch %q; list them with git_branch", in.BranchName)
		}
		if _, err := r.git(ctx, "checkout", "--quiet", in.BranchName, "--"); err != nil {
			return "", err
		}
		return "Switched to branch " + in.BranchName, nil
	})
}

// run resolves the repository and runs fn, turning an error into an error
// result.
func (p *plugin) run(ctx context.Context, repoPath string, fn func(*repo) (string, error)) (*sdk.Result, error) {
	r, err := p.open(ctx, repoPath)
	if err != nil {
		return sdk.ErrorResult("%v", err), nil
	}
	out, err := fn(r)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return sdk.ErrorResult("%v", err), nil
	}
	return sdk.Text(out), nil
}

func orNone(out string, err error) (string, error) {
	if err == nil && strings.TrimSpace(out) == "" {
		return "(no output)", nil
	}
	return out, err
}

// repo is a repository whose work tree and git directories were checked to
// be inside the project.
type repo struct {
	p      *plugin
	dir    string   // work tree
	gitDir string   // git directory
	env    []string // the environment every git process gets
	// writable is where git may change files (runNarrowed): the work
	// tree, the git directory and the common one; nil: anywhere the
	// server's sandbox allows (allow_hooks, allow_filters).
	writable []string
}

// open resolves repo_path inside the project and finds its git directory:
// a .git folder, or a .git file whose gitdir (and that git directory's
// commondir) must be inside the project too. Nothing else is searched, so
// a repository above the project is never used.
func (p *plugin) open(ctx context.Context, path string) (*repo, error) {
	dir, err := p.roots.Resolve(path)
	if err != nil {
		return nil, fmt.Errorf("repo_path refused: %w", err)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("repo_path %s is not a directory", dir)
	}
	dotGit := filepath.Join(dir, ".git")
	st, err := os.Lstat(dotGit)
	if err != nil {
		return nil, fmt.Errorf("%s is not a git repository (no .git); this server does not create repositories", dir)
	}
	if st.IsDir() {
		if names, _ := readDirNames(dotGit, 1); len(names) == 0 {
			// An empty .git: the placeholder a host binds where a
			// server could otherwise make a repository (git, too, takes
			// it for none).
			return nil, fmt.Errorf("%s is not a git repository (its .git is empty); this server does not create repositories", dir)
		}
	}
	if gitplaceholder.IsFile(dotGit) {
		return nil, fmt.Errorf("%s is not a git repository (its .git is the host's placeholder); this server does not create repositories", dir)
	}
	gitDir := dotGit
	if !st.IsDir() {
		b, err := readSmall(dotGit)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %v", dotGit, err)
		}
		target, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
		if !ok {
			return nil, fmt.Errorf("%s is neither a directory nor a gitdir file", dotGit)
		}
		gitDir = strings.TrimSpace(target)
		if !filepath.IsAbs(gitDir) {
			gitDir = filepath.Join(dir, gitDir)
		}
	}
	real, err := p.roots.Resolve(gitDir)
	if err != nil {
		return nil, fmt.Errorf("repo_path %s: its git directory lies outside the project (%s)", dir, gitDir)
	}
	gitDir = real
	common := gitDir
	if b, err := readSmall(filepath.Join(gitDir, "commondir")); err == nil {
		common = strings.TrimSpace(string(b))
		if !filepath.IsAbs(common) {
			common = filepath.Join(gitDir, common)
		}
		rc, err := p.roots.Resolve(common)
		if err != nil {
			return nil, fmt.Errorf("repo_path %s: its commondir lies outside the project (%s)", dir, common)
		}
		common = rc
		// Only a linked work tree (git worktree add) shares another
		// repository's objects and refs, and its git directory lies in
		// that repository's worktrees/. One of the agent's elsewhere
		// (an index of its own, a commondir naming the project's
		// repository) had git_commit put a gitlink on the project's
		// branch, which the person's next checkout took in and `git
		// status` then entered (red team round 11).
		if filepath.Dir(filepath.Clean(gitDir)) != filepath.Join(filepath.Clean(common), "worktrees") {
			return nil, fmt.Errorf("repo_path %s: its git directory %s shares the objects and refs of %s without being one of its linked work trees (%s/worktrees/NAME); refused", dir, gitDir, common, common)
		}
	}
	// Nor does a repository's git directory link its objects or refs
	// elsewhere: one that linked them to the project's repository had
	// git_commit move the project's branch (red team round 11).
	for _, d := range []string{"objects", "refs"} {
		if st, err := os.Lstat(filepath.Join(gitDir, d)); err == nil && st.Mode()&os.ModeSymlink != 0 {
			return nil, fmt.Errorf("repo_path %s: %s is a link; refused (git makes none there)", dir, filepath.Join(gitDir, d))
		}
	}
	// git reads these at every call: a FIFO there held the call, and the
	// server, for ever (red team round 10).
	for _, f := range []string{filepath.Join(gitDir, "config"), filepath.Join(common, "config"), filepath.Join(gitDir, "config.worktree")} {
		if st, err := os.Lstat(f); err == nil && !st.Mode().IsRegular() && st.Mode()&os.ModeSymlink == 0 {
			return nil, fmt.Errorf("repo_path %s: %s is not a regular file; git would wait on it", dir, f)
		}
	}
	r := &repo{p: p, dir: dir, gitDir: gitDir, writable: []string{dir, gitDir, common}}
	if p.settings.AllowHooks || p.settings.AllowFilters {
		// The repository's programs run, by the operator's choice, and
		// write where they like inside the server's sandbox (a hook of a
		// repository of the agent's could write anything git could).
		r.writable = nil
	}
	base := baseEnv()
	overrides, err := p.guard.environ(ctx, base, gitDir, dir)
	if err != nil {
		return nil, fmt.Errorf("repo_path %s: %w", dir, err)
	}
	r.env = append(append(base, "GIT_DIR="+gitDir, "GIT_WORK_TREE="+dir), overrides...)
	return r, nil
}

// baseEnv is the plugin's own environment without any GIT_ variable, plus
// the settings that hold whatever the configuration says: no system
// config, no prompts, no pager or editor, no external diff, no proxy
// command, and no transport at all (GIT_ALLOW_PROTOCOL is read before any
// protocol.* key; "none" is a transport name no helper has).
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return append(env,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_PAGER=cat",
		"PAGER=cat",
		"GIT_EDITOR=:",
		"GIT_SEQUENCE_EDITOR=:",
		"GIT_ASKPASS=",
		"SSH_ASKPASS=",
		"GIT_EXTERNAL_DIFF=",
		"GIT_PROXY_COMMAND=",
		"GIT_ALLOW_PROTOCOL=none",
		"GIT_PROTOCOL_FROM_USER=0",
		"GIT_OPTIONAL_LOCKS=0",
	)
}

// textconv is the diff flag for textconv drivers: they run only when
// allow_filters is on.
func (r *repo) textconv() string {
	if r.p.settings.AllowFilters {
		return "--textconv"
	}
	return "--no-textconv"
}

// git runs a git subcommand with the safe configuration and returns its
// output, capped.
func (r *repo) git(ctx context.Context, args ...string) (string, error) {
	out, err := r.rawGit(ctx, args...)
	if err != nil {
		return "", err
	}
	if capped := capOutput(out, r.p.settings.OutputCap); capped != out {
		return capped, nil
	}
	return out, nil
}

// rawGit runs git with the repository's guarded environment; the output
// is not capped.
func (r *repo) rawGit(ctx context.Context, args ...string) (string, error) {
	full := append([]string{"--no-pager", "--literal-pathspecs"}, args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Dir = r.dir
	cmd.Env = r.env
	cmd.Stdin = nil
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	run := cmd.Run
	if r.writable != nil {
		run = func() error { return runNarrowed(cmd, r.writable) }
	}
	if err := run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(capOutput(out.String(), 2000)) // git commit says "nothing to commit" on stdout
		}
		if msg == "" {
			msg = err.Error()
		}
		return out.String(), fmt.Errorf("git %s failed: %s", args[0], msg)
	}
	return out.String(), nil
}

func capOutput(s string, max int) string {
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max]) + fmt.Sprintf("\n[... output cut at %d of %d characters ...]", max, len(r))
}

var errDash = errors.New("must not start with '-'")

// resolve turns a user's revision into an object id, so that no user text
// reaches a git command line as a revision. kind ("commit", or "" for any
// object) is what it must peel to.
func (r *repo) resolve(ctx context.Context, rev, kind string) (string, error) {
	rev = strings.TrimSpace(rev)
	switch {
	case rev == "":
		return "", fmt.Errorf("revision is empty")
	case strings.HasPrefix(rev, "-"):
		return "", fmt.Errorf("revision %q refused: %w", rev, errDash)
	case strings.ContainsAny(rev, "\x00\n"):
		return "", fmt.Errorf("revision %q contains control characters", rev)
	}
	spec := rev
	if kind != "" {
		spec += "^{" + kind + "}"
	}
	out, err := r.rawGit(ctx, "rev-parse", "--verify", "--quiet", "--end-of-options", spec)
	if err != nil || strings.TrimSpace(out) == "" {
		return "", fmt.Errorf("%q is not a known revision in %s", rev, r.dir)
	}
	return strings.TrimSpace(out), nil
}

// checkBranchName refuses names git would read as options or reject.
func (r *repo) checkBranchName(ctx context.Context, name string) error {
	if name == "" {
		return fmt.Errorf("branch_name is empty")
	}
	if strings.HasPrefix(name, "-") {
		return fmt.Errorf("branch name %q refused: %w", name, errDash)
	}
	if _, err := r.rawGit(ctx, "check-ref-format", "--branch", name); err != nil {
		return fmt.Errorf("%q is not a valid branch name", name)
	}
	return nil
}

// path resolves a user path inside both the project and the repository's
// work tree and returns it relative to the work tree.
func (r *repo) path(p string) (string, error) {
	if strings.HasPrefix(p, "-") {
		return "", fmt.Errorf("path %q refused: %w", p, errDash)
	}
	full := p
	if !filepath.IsAbs(full) {
		full = filepath.Join(r.dir, p)
	}
	real, err := r.p.roots.Resolve(full)
	if err != nil {
		return "", fmt.Errorf("path refused: %w", err)
	}
	if !confine.Within(real, r.dir) {
		return "", fmt.Errorf("path refused: %s is outside the repository %s", p, r.dir)
	}
	if strings.HasPrefix(real, r.gitDir+string(filepath.Separator)) || real == r.gitDir {
		return "", fmt.Errorf("path refused: %s is inside the git directory", p)
	}
	rel, err := filepath.Rel(r.dir, real)
	if err != nil {
		return "", err
	}
	return rel, nil
}

func (r *repo) paths(ps []string) ([]string, error) {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		rel, err := r.path(p)
		if err != nil {
			return nil, err
		}
		out = append(out, rel)
	}
	return out, nil
}

// maxGitFile bounds what the server reads of a .git file or a commondir
// (a path, a line).
const maxGitFile = 4096

// readSmall reads a .git file or commondir (regularfile.Read).
func readSmall(path string) ([]byte, error) { return regularfile.Read(path, maxGitFile) }

// readDirNames returns up to n names in dir.
func readDirNames(dir string, n int) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return f.Readdirnames(n)
}

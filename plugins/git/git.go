// Package git is the built-in git plugin. It runs the real git binary
// (never through a shell) with every repository-configured program
// neutralised, on repositories inside the project directory only.
package git

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/switchboard-mcp/switchboard/plugins/internal/confine"
	"github.com/switchboard-mcp/switchboard/sdk"
)

// Name is the built-in's server name.
const Name = "git"

// Version is the plugin's version.
const Version = "0.1.0"

// outputCap bounds the characters of git output returned.
const outputCap = 60000

// Settings is the `builtin "git" {}` block.
type Settings struct {
	// AllowHooks lets repository hooks run (off by default: a cloned
	// repository's hooks are someone else's code).
	AllowHooks bool `hcl:"allow_hooks,optional" json:"allow_hooks,omitempty"`
}

type plugin struct {
	roots    *confine.Roots
	settings Settings
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
		var err error
		p.roots, err = confine.New(cfg.ProjectDir)
		return err
	})
	sdk.AddTool(s, sdk.Tool{
		Name:        "git_status",
		Title:       "Git status",
		Description: "Show the working tree status of a repository.",
		ReadOnly:    true,
		Idempotent:  sdk.Bool(true),
		OpenWorld:   sdk.Bool(false),
	}, p.status)
	return s
}

type statusArgs struct {
	RepoPath string `json:"repo_path,omitempty" jsonschema:"description=Repository path inside the project directory (default: the project directory)"`
}

func (p *plugin) status(ctx context.Context, _ *sdk.Request, in statusArgs) (*sdk.Result, error) {
	repo, err := p.repo(in.RepoPath)
	if err != nil {
		return sdk.Errorf("%v", err), nil
	}
	out, err := p.git(ctx, repo, "status")
	if err != nil {
		return sdk.Errorf("%v", err), nil
	}
	return sdk.Text("Repository status:\n" + out), nil
}

// repo resolves repo_path inside the project and checks that it is a work
// tree whose git directory is inside the project too.
func (p *plugin) repo(path string) (string, error) {
	dir, err := p.roots.Resolve(path)
	if err != nil {
		return "", fmt.Errorf("repo_path refused: %w", err)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return "", fmt.Errorf("repo_path %s is not a directory", dir)
	}
	// A .git file may point anywhere; the repository it names must be
	// inside the project as well.
	if gitFile, err := os.ReadFile(filepath.Join(dir, ".git")); err == nil {
		line := strings.TrimSpace(string(gitFile))
		if target, ok := strings.CutPrefix(line, "gitdir:"); ok {
			target = strings.TrimSpace(target)
			if !filepath.IsAbs(target) {
				target = filepath.Join(dir, target)
			}
			if _, err := p.roots.Resolve(target); err != nil {
				return "", fmt.Errorf("repo_path %s: its .git file points outside the project (%s)", dir, target)
			}
		}
	}
	return dir, nil
}

// safeConfig neutralises every repository setting that can run a program.
func (p *plugin) safeConfig() []string {
	c := []string{
		"core.fsmonitor=false",
		"core.sshCommand=false",
		"core.pager=cat",
		"core.editor=false",
		"core.askPass=false",
		"credential.helper=",
		"diff.external=",
		"gpg.program=false",
		"protocol.ext.allow=never",
		"uploadpack.packObjectsHook=",
	}
	if !p.settings.AllowHooks {
		c = append(c, "core.hooksPath=/dev/null")
	}
	args := make([]string, 0, 2*len(c))
	for _, kv := range c {
		args = append(args, "-c", kv)
	}
	return args
}

// git runs git in repo with the safe configuration and returns its capped
// output.
func (p *plugin) git(ctx context.Context, repo string, args ...string) (string, error) {
	full := append(append([]string{"--no-pager", "--no-optional-locks"}, p.safeConfig()...), args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_PAGER=cat",
		"PAGER=cat",
		"GIT_EXTERNAL_DIFF=",
		"GIT_CEILING_DIRECTORIES="+filepath.Dir(p.roots.Dirs()[0]),
	)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Errorf("git %s failed: %s", args[0], msg)
	}
	s := out.String()
	if len(s) > outputCap {
		s = s[:outputCap] + fmt.Sprintf("\n[... output cut at %d characters ...]", outputCap)
	}
	return s, nil
}

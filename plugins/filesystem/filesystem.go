// Package filesystem is the built-in filesystem plugin: file tools confined
// to the project directory (and any extra roots in its config block).
package filesystem

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/plugins/internal/confine"
	"github.com/switchboard-mcp/switchboard/sdk"
)

// Name is the built-in's server name.
const Name = "filesystem"

// Version is the plugin's version.
const Version = "0.1.0"

// Settings is the `builtin "filesystem" {}` block.
type Settings struct {
	// Roots are extra directories the tools may use besides project_dir.
	Roots []string `hcl:"roots,optional" json:"roots,omitempty"`
}

// ResolvePaths makes relative roots absolute.
func (s *Settings) ResolvePaths(resolve func(string) string) {
	for i, r := range s.Roots {
		s.Roots[i] = resolve(r)
	}
}

// maxLineBytes bounds one line read by read_text_file.
const maxLineBytes = 16 << 20

// New returns the filesystem plugin.
func New() *sdk.Server {
	s := sdk.NewServer(Name, Version, sdk.WithInstructions(
		"Reads files inside the project directory. Paths are relative to the project directory."))
	p := &plugin{}
	s.OnConfigure(func(_ context.Context, cfg sdk.Config) error {
		var st Settings
		if err := cfg.Decode(&st); err != nil {
			return err
		}
		roots, err := confine.New(append([]string{cfg.ProjectDir}, st.Roots...)...)
		if err != nil {
			return fmt.Errorf("filesystem: %w", err)
		}
		p.roots = roots
		return nil
	})
	sdk.AddTool(s, sdk.Tool{
		Name:              "read_text_file",
		Title:             "Read text file",
		Description:       "Read a text file inside the allowed directories. Use head or tail for the first or last N lines, or offset and limit for a range of lines (1-based).",
		ReadOnly:          true,
		Idempotent:        sdk.Bool(true),
		OpenWorld:         sdk.Bool(false),
		PermissionPattern: p.pathPattern,
	}, p.readTextFile)
	sdk.AddTool(s, sdk.Tool{
		Name:        "list_allowed_directories",
		Title:       "List allowed directories",
		Description: "List the directories this server may read and write.",
		ReadOnly:    true,
		Idempotent:  sdk.Bool(true),
		OpenWorld:   sdk.Bool(false),
	}, func(context.Context, *sdk.Request, struct{}) (*sdk.Result, error) {
		return sdk.Text("Allowed directories:\n" + strings.Join(p.roots.Dirs(), "\n")), nil
	})
	return s
}

type plugin struct {
	roots *confine.Roots
}

// pathPattern makes the resolved path the permission pattern, so rules
// like "filesystem.read_text_file:/home/me/project/docs/*" work.
func (p *plugin) pathPattern(_ context.Context, args json.RawMessage) ([]string, error) {
	var a struct {
		Path string `json:"path"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, err
	}
	real, err := p.roots.Resolve(a.Path)
	if err != nil {
		// Outside paths get a pattern no allow rule written for the roots
		// can match; the tool itself refuses them anyway.
		return []string{"outside:" + a.Path}, nil
	}
	return []string{real}, nil
}

type readArgs struct {
	Path   string `json:"path" jsonschema:"description=File to read, relative to the project directory or absolute inside an allowed directory"`
	Head   int    `json:"head,omitempty" jsonschema:"description=Return only the first N lines,minimum=1"`
	Tail   int    `json:"tail,omitempty" jsonschema:"description=Return only the last N lines,minimum=1"`
	Offset int    `json:"offset,omitempty" jsonschema:"description=First line to return (1-based),minimum=1"`
	Limit  int    `json:"limit,omitempty" jsonschema:"description=Number of lines to return from offset,minimum=1"`
}

func (p *plugin) readTextFile(ctx context.Context, _ *sdk.Request, in readArgs) (*sdk.Result, error) {
	if in.Head > 0 && in.Tail > 0 {
		return sdk.Errorf("pass head or tail, not both"), nil
	}
	if (in.Head > 0 || in.Tail > 0) && (in.Offset > 0 || in.Limit > 0) {
		return sdk.Errorf("head/tail cannot be combined with offset/limit"), nil
	}
	if in.Head < 0 || in.Tail < 0 || in.Offset < 0 || in.Limit < 0 {
		return sdk.Errorf("head, tail, offset and limit must be positive"), nil
	}
	f, err := p.roots.Open(in.Path)
	if err != nil {
		return sdk.Errorf("cannot read %s: %v", in.Path, err), nil
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return sdk.Errorf("%s is a directory; list it with list_directory", in.Path), nil
	}

	if in.Head == 0 && in.Tail == 0 && in.Offset == 0 && in.Limit == 0 {
		b, err := io.ReadAll(f)
		if err != nil {
			return sdk.Errorf("cannot read %s: %v", in.Path, err), nil
		}
		if !utf8.Valid(b) {
			return sdk.Errorf("%s is not UTF-8 text; use read_media_file for binary files", in.Path), nil
		}
		return sdk.Text(string(b)), nil
	}

	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), maxLineBytes)
	var (
		lines []string
		n     int
	)
	first, last := 1, 0 // inclusive line range; last 0 = unbounded
	switch {
	case in.Head > 0:
		last = in.Head
	case in.Offset > 0 || in.Limit > 0:
		first = max(in.Offset, 1)
		if in.Limit > 0 {
			last = first + in.Limit - 1
		}
	}
	for sc.Scan() {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		n++
		switch {
		case in.Tail > 0:
			lines = append(lines, sc.Text())
			if len(lines) > in.Tail {
				lines = lines[1:]
			}
		case n >= first && (last == 0 || n <= last):
			lines = append(lines, sc.Text())
		}
		if last > 0 && n >= last && in.Tail == 0 {
			break
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return sdk.Errorf("%s has a line longer than %d bytes", in.Path, maxLineBytes), nil
		}
		return sdk.Errorf("cannot read %s: %v", in.Path, err), nil
	}
	text := strings.Join(lines, "\n")
	if !utf8.ValidString(text) {
		return sdk.Errorf("%s is not UTF-8 text; use read_media_file for binary files", in.Path), nil
	}
	return sdk.Text(text), nil
}

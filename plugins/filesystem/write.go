package filesystem

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/switchboard-mcp/switchboard/plugins/internal/confine"
	"github.com/switchboard-mcp/switchboard/sdk"
)

func (p *plugin) addWriteTools(s *sdk.Server) {
	sdk.AddTool(s, sdk.Tool{
		Name: "write_file", Title: "Write file",
		Description: "Create a file or replace its whole content. Pass if_match with the sha256 you last saw to refuse the write if the file changed since. The parent folder must exist (create_directory).",
		Destructive: sdk.Bool(true), Idempotent: sdk.Bool(true), OpenWorld: sdk.Bool(false),
		PermissionPattern: p.pathPatterns("path"),
	}, p.writeFile)
	sdk.AddTool(s, sdk.Tool{
		Name: "edit_file", Title: "Edit file",
		Description: "Replace text in a file: each edit's oldText must match exactly once (or use replace_all); if no exact match exists, a match that ignores differences in indentation is tried and the file's indentation is kept. Returns a unified diff. dryRun shows the diff without writing.",
		Destructive: sdk.Bool(true), OpenWorld: sdk.Bool(false),
		PermissionPattern: p.pathPatterns("path"),
	}, p.editFile)
	sdk.AddTool(s, sdk.Tool{
		Name: "create_directory", Title: "Create directory",
		Description: "Create a directory and any missing parents (mkdir -p). Succeeds if it exists.",
		Destructive: sdk.Bool(false), Idempotent: sdk.Bool(true), OpenWorld: sdk.Bool(false),
		PermissionPattern: p.pathPatterns("path"),
	}, p.createDirectory)
	sdk.AddTool(s, sdk.Tool{
		Name: "move_file", Title: "Move or rename",
		Description: "Move or rename a file or directory. Refuses when the destination exists.",
		Destructive: sdk.Bool(true), OpenWorld: sdk.Bool(false),
		PermissionPattern: p.pathPatterns("source", "destination"),
	}, p.moveFile)
}

type writeArgs struct {
	Path    string `json:"path" jsonschema:"description=File to write"`
	Content string `json:"content" jsonschema:"description=The whole new content"`
	IfMatch string `json:"if_match,omitempty" jsonschema:"description=sha256 of the content you last saw; the write is refused if the file differs"`
}

// ErrChanged means the file's sha256 is not the if_match the caller gave.
var ErrChanged = errors.New("the file changed since you read it")

// checkIfMatch verifies a file's current sha256 against want (if set).
func (p *plugin) checkIfMatch(l loc, want string) error {
	if want == "" {
		return nil
	}
	want = strings.ToLower(strings.TrimPrefix(strings.TrimSpace(want), "sha256:"))
	got, err := p.freshHash(l)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s no longer exists", ErrChanged, p.display(l))
	}
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%w: %s now has sha256 %s, not %s; read it again and redo your change", ErrChanged, p.display(l), got, want)
	}
	return nil
}

// atomicWrite writes data to a temporary file beside the target (created
// with O_EXCL) and renames it over the target. Both happen inside the
// target's folder, opened once as its own os.Root and checked by confine
// (not protected, not inside a protected directory); the entry replaced is
// checked by identity (not a protected file, nor a hard link to one). The
// rename replaces a symlink rather than following it, so nothing is written
// outside the root or into a protected path whatever appears at the path
// meanwhile.
func (p *plugin) atomicWrite(l loc, data []byte) error {
	dir, base := filepath.Split(l.Rel)
	if dir == "" {
		dir = "."
	}
	missing := fmt.Errorf("the folder %s does not exist; create it with create_directory", p.roots.Display(filepath.Dir(l.Real)))
	folder, err := l.root.OpenRoot(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return missing
		}
		return err
	}
	defer func() { _ = folder.Close() }()
	df, err := p.roots.OpenFile(folder, ".", os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer df.Close()
	// The target as named in the folder actually opened (a protected path
	// that does not exist yet, such as the lock file, included).
	if err := p.roots.CheckName(df, base, false); err != nil {
		return err
	}
	mode := fs.FileMode(0o644)
	if st, err := folder.Lstat(base); err == nil {
		if st.IsDir() {
			return fmt.Errorf("%s is a directory", p.display(l))
		}
		if st.Mode().IsRegular() {
			mode = st.Mode().Perm()
		}
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := ".sb-" + hex.EncodeToString(rnd[:]) + ".tmp"
	f, err := folder.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		_ = folder.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		_ = folder.Remove(tmp)
		return err
	}
	if err := folder.Rename(tmp, base); err != nil {
		_ = folder.Remove(tmp)
		return err
	}
	return nil
}

func (p *plugin) writeFile(_ context.Context, _ *sdk.Request, in writeArgs) (*sdk.Result, error) {
	l, err := p.locate(in.Path)
	if err != nil {
		return sdk.ErrorResult("cannot write %s: %v", in.Path, err), nil
	}
	if err := p.checkIfMatch(l, in.IfMatch); err != nil {
		return sdk.ErrorResult("nothing written: %v", err), nil
	}
	if err := p.atomicWrite(l, []byte(in.Content)); err != nil {
		return sdk.ErrorResult("cannot write %s: %v", in.Path, err), nil
	}
	sum := sha256.Sum256([]byte(in.Content))
	return sdk.Textf("Wrote %d bytes to %s (sha256 %s)", len(in.Content), p.display(l), hex.EncodeToString(sum[:])), nil
}

// Edit is one replacement of edit_file.
type Edit struct {
	OldText string `json:"oldText" jsonschema:"description=Text to find"`
	NewText string `json:"newText" jsonschema:"description=Text to put in its place"`
}

type editArgs struct {
	Path       string `json:"path" jsonschema:"description=File to edit"`
	Edits      []Edit `json:"edits" jsonschema:"description=Replacements applied in order"`
	DryRun     bool   `json:"dryRun,omitempty" jsonschema:"description=Show the diff without writing"`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"description=Replace every match of each oldText instead of requiring exactly one"`
	IfMatch    string `json:"if_match,omitempty" jsonschema:"description=sha256 of the content you last saw; the edit is refused if the file differs"`
}

func (p *plugin) editFile(_ context.Context, _ *sdk.Request, in editArgs) (*sdk.Result, error) {
	if len(in.Edits) == 0 {
		return sdk.ErrorResult("edits is empty"), nil
	}
	f, l, err := p.openFile(in.Path)
	if err != nil {
		return sdk.ErrorResult("cannot edit %s: %v", in.Path, err), nil
	}
	b, err := io.ReadAll(io.LimitReader(f, p.maxRead+1))
	f.Close()
	if err != nil {
		return sdk.ErrorResult("cannot read %s: %v", in.Path, err), nil
	}
	if int64(len(b)) > p.maxRead {
		return sdk.ErrorResult("%s is over the %d-byte limit for editing", in.Path, p.maxRead), nil
	}
	sum := sha256.Sum256(b)
	if in.IfMatch != "" && strings.ToLower(strings.TrimPrefix(strings.TrimSpace(in.IfMatch), "sha256:")) != hex.EncodeToString(sum[:]) {
		return sdk.ErrorResult("nothing written: %v: %s now has sha256 %s; read it again and redo your change", ErrChanged, p.display(l), hex.EncodeToString(sum[:])), nil
	}
	original := string(b)
	edited, err := ApplyEdits(original, in.Edits, in.ReplaceAll)
	if err != nil {
		return sdk.ErrorResult("nothing written: %v", err), nil
	}
	diff := UnifiedDiff(p.display(l), original, edited)
	if in.DryRun {
		return sdk.Text(diff), nil
	}
	// Refuse if the file changed while the edit was being computed.
	if err := p.checkIfMatch(l, hex.EncodeToString(sum[:])); err != nil {
		return sdk.ErrorResult("nothing written: %v", err), nil
	}
	if err := p.atomicWrite(l, []byte(edited)); err != nil {
		return sdk.ErrorResult("cannot write %s: %v", in.Path, err), nil
	}
	newSum := sha256.Sum256([]byte(edited))
	return sdk.Text(diff).WithText("sha256: " + hex.EncodeToString(newSum[:])), nil
}

// ApplyEdits applies edits in order. Each oldText must match exactly once
// (every match with replaceAll); when it does not match exactly, a match
// line by line that ignores leading and trailing whitespace is tried, and
// the replacement takes the indentation of the matched lines.
func ApplyEdits(content string, edits []Edit, replaceAll bool) (string, error) {
	for i, e := range edits {
		if e.OldText == "" {
			return "", fmt.Errorf("edit %d: oldText is empty", i+1)
		}
		n := strings.Count(content, e.OldText)
		switch {
		case n == 1 || (n > 1 && replaceAll):
			content = strings.ReplaceAll(content, e.OldText, e.NewText)
			continue
		case n > 1:
			return "", fmt.Errorf("edit %d: oldText matches %d places; add surrounding lines to make it unique, or set replace_all", i+1, n)
		}
		out, err := fuzzyReplace(content, e, replaceAll)
		if err != nil {
			return "", fmt.Errorf("edit %d: %w", i+1, err)
		}
		content = out
	}
	return content, nil
}

func fuzzyReplace(content string, e Edit, replaceAll bool) (string, error) {
	lines := strings.Split(content, "\n")
	old := strings.Split(strings.TrimSuffix(e.OldText, "\n"), "\n")
	var starts []int
	for i := 0; i+len(old) <= len(lines); i++ {
		ok := true
		for j := range old {
			if strings.TrimSpace(lines[i+j]) != strings.TrimSpace(old[j]) {
				ok = false
				break
			}
		}
		if ok {
			starts = append(starts, i)
			i += len(old) - 1
		}
	}
	switch {
	case len(starts) == 0:
		return "", fmt.Errorf("oldText was not found (not even ignoring indentation): %q", firstLine(e.OldText))
	case len(starts) > 1 && !replaceAll:
		return "", fmt.Errorf("oldText matches %d places when indentation is ignored; add surrounding lines to make it unique, or set replace_all", len(starts))
	}
	newLines := strings.Split(strings.TrimSuffix(e.NewText, "\n"), "\n")
	oldIndent := indent(old[0])
	var out []string
	prev := 0
	for _, s := range starts {
		out = append(out, lines[prev:s]...)
		actual := indent(lines[s])
		for _, nl := range newLines {
			if rest, ok := strings.CutPrefix(nl, oldIndent); ok && nl != "" {
				out = append(out, actual+rest)
			} else {
				out = append(out, nl)
			}
		}
		prev = s + len(old)
	}
	out = append(out, lines[prev:]...)
	return strings.Join(out, "\n"), nil
}

func indent(s string) string { return s[:len(s)-len(strings.TrimLeft(s, " \t"))] }

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

// UnifiedDiff renders the change from a to b as a unified diff.
func UnifiedDiff(name, a, b string) string {
	if a == b {
		return "(no changes)\n"
	}
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(a), B: difflib.SplitLines(b),
		FromFile: name, ToFile: name, FromDate: "original", ToDate: "modified", Context: 3,
	})
	if err != nil {
		return err.Error()
	}
	return d
}

func (p *plugin) createDirectory(_ context.Context, _ *sdk.Request, in pathArgs) (*sdk.Result, error) {
	l, err := p.locate(in.Path)
	if err != nil {
		return sdk.ErrorResult("cannot create %s: %v", in.Path, err), nil
	}
	if err := p.mkdirAll(l); err != nil {
		return sdk.ErrorResult("cannot create %s: %v", in.Path, err), nil
	}
	return sdk.Textf("Directory %s exists", p.display(l)), nil
}

// mkdirAll is mkdir -p one folder at a time, each opened as an os.Root and
// checked by confine before anything is created in it, so a folder swapped
// for a symlink to a protected directory gets nothing created inside.
func (p *plugin) mkdirAll(l loc) error {
	cur, err := l.root.OpenRoot(".")
	if err != nil {
		return err
	}
	defer func() { _ = cur.Close() }()
	for _, part := range strings.Split(filepath.Clean(l.Rel), string(filepath.Separator)) {
		if part == "." || part == "" {
			continue
		}
		f, err := p.roots.OpenFile(cur, ".", os.O_RDONLY, 0)
		if err != nil {
			return err
		}
		err = p.roots.CheckName(f, part, true)
		f.Close()
		if err != nil {
			return err
		}
		if err := cur.Mkdir(part, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		next, err := cur.OpenRoot(part)
		if err != nil {
			return err
		}
		_ = cur.Close()
		cur = next
	}
	f, err := p.roots.OpenFile(cur, ".", os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	f.Close()
	return nil
}

type moveArgs struct {
	Source      string `json:"source" jsonschema:"description=What to move"`
	Destination string `json:"destination" jsonschema:"description=Where to move it (must not exist)"`
}

func (p *plugin) moveFile(_ context.Context, req *sdk.Request, in moveArgs) (*sdk.Result, error) {
	src, err := p.locate(in.Source)
	if err != nil {
		return sdk.ErrorResult("cannot move %s: %v", in.Source, err), nil
	}
	dst, err := p.locate(in.Destination)
	if err != nil {
		return sdk.ErrorResult("cannot move to %s: %v", in.Destination, err), nil
	}
	if src.Root != dst.Root {
		return sdk.ErrorResult("%s and %s are in different allowed directories; copy the content with read and write instead", in.Source, in.Destination), nil
	}
	if src.Rel == "." {
		return sdk.ErrorResult("cannot move an allowed directory itself"), nil
	}
	// Neither end may be, hold or lie in a protected path (a protected
	// path that does not exist yet must not end up inside a moved folder).
	if err := p.roots.Covers(src.Real); err != nil {
		return sdk.ErrorResult("cannot move %s: %v", in.Source, err), nil
	}
	if err := p.roots.Covers(dst.Real); err != nil {
		return sdk.ErrorResult("cannot move to %s: %v", in.Destination, err), nil
	}
	if denied := p.deniedWithin(req, src.Real, dst.Real); denied != "" {
		return sdk.ErrorResult("cannot move %s: %s, in it or where it would go, is denied by the host's rules for this tool, and moving the folder would take it where they do not reach", in.Source, denied), nil
	}
	if err := p.rename(src, dst); err != nil {
		return sdk.ErrorResult("cannot move %s to %s: %v", in.Source, in.Destination, err), nil
	}
	return sdk.Textf("Moved %s to %s", p.display(src), p.display(dst)), nil
}

// maxDeniedWalk is how many entries of a moved folder deniedWithin looks
// at before it refuses the move.
const maxDeniedWalk = 100000

// deniedWithin returns the first entry of the folder src (the path as the
// rules see it) that a deny rule of the call matches, where it is or
// where it would be below dst, or "". The host checks the two paths a move
// names; a folder takes what is in it along (red team round 19: with
// "secrets/*" denied, moving secrets to opened made its files readable).
func (p *plugin) deniedWithin(req *sdk.Request, src, dst string) string {
	if req == nil || len(req.Denied) == 0 {
		return ""
	}
	if st, err := os.Lstat(src); err != nil || !st.IsDir() {
		return ""
	}
	found, n := "", 0
	_ = filepath.WalkDir(src, func(path string, _ fs.DirEntry, err error) error {
		if n++; n > maxDeniedWalk {
			found = p.roots.Display(src) + " (more than 100,000 entries to check)"
			return filepath.SkipAll
		}
		if err != nil || path == src {
			return nil
		}
		rel, _ := filepath.Rel(src, path)
		if req.DeniedPath(p.roots.Display(path)) || req.DeniedPath(p.roots.Display(filepath.Join(dst, rel))) {
			found = p.roots.Display(path)
			return filepath.SkipAll
		}
		return nil
	})
	return found
}

// errExists refuses a move onto something that exists.
var errExists = errors.New("exists already; move_file never replaces anything")

// rename moves src to dst relative to their folders, each opened once and
// checked by confine; both names are checked again in the folders that were
// opened (by path and, for what exists, by identity: not a protected path,
// nor a folder holding one), and renameat acts on those same folders.
func (p *plugin) rename(src, dst loc) error {
	srcDir, srcBase := splitRel(src.Rel)
	dstDir, dstBase := splitRel(dst.Rel)
	from, err := p.roots.OpenFile(src.root, srcDir, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer from.Close()
	to, err := p.roots.OpenFile(dst.root, dstDir, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer to.Close()
	if _, err := confine.LstatAt(from, srcBase); err != nil {
		return err
	}
	// Both names as they are in the folders actually opened.
	if err := p.roots.CheckName(from, srcBase, true); err != nil {
		return err
	}
	if err := p.roots.CheckName(to, dstBase, true); err != nil {
		return err
	}
	if _, err := confine.LstatAt(to, dstBase); err == nil {
		return fmt.Errorf("%s %w", p.display(dst), errExists)
	}
	return confine.RenameAt(from, srcBase, to, dstBase)
}

func splitRel(rel string) (dir, base string) {
	dir, base = filepath.Split(rel)
	if dir == "" {
		dir = "."
	}
	return filepath.Clean(dir), base
}

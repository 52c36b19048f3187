package filesystem

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/gabriel-vasile/mimetype"

	"github.com/switchboard-mcp/switchboard/plugins/internal/confine"
	"github.com/switchboard-mcp/switchboard/sdk"
)

func readTool(name, title, desc string) sdk.Tool {
	return sdk.Tool{Name: name, Title: title, Description: desc, ReadOnly: true, Idempotent: sdk.Bool(true), OpenWorld: sdk.Bool(false)}
}

func (p *plugin) addReadTools(s *sdk.Server) {
	t := readTool("read_text_file", "Read text file",
		"Read a UTF-8 text file. Use head or tail for the first or last N lines, or offset and limit for a range of lines (1-based). The result ends with the file's sha256, to pass as if_match when writing (after part of a file over 256 KB, only when already known; get_file_info gives it).")
	t.PermissionPattern = p.pathPatterns("path")
	sdk.AddTool(s, t, p.readTextFile)

	t = readTool("read_media_file", "Read image or audio file", "Read an image or audio file and return it as base64 data with its MIME type.")
	t.PermissionPattern = p.pathPatterns("path")
	sdk.AddTool(s, t, p.readMediaFile)

	t = readTool("read_multiple_files", "Read several files", "Read several text files at once; a file that cannot be read is reported without stopping the others.")
	t.PermissionPattern = p.pathPatterns("paths")
	sdk.AddTool(s, t, p.readMultipleFiles)

	t = readTool("get_file_info", "File information", "Size, modification and access times, permissions, type and (for files) sha256 of a path.")
	t.PermissionPattern = p.pathPatterns("path")
	sdk.AddTool(s, t, p.getFileInfo)

	t = readTool("list_directory", "List a directory", "List a directory's entries, each marked [DIR] or [FILE].")
	t.PermissionPattern = p.pathPatterns("path")
	sdk.AddTool(s, t, p.listDirectory)

	t = readTool("list_directory_with_sizes", "List a directory with sizes", "List a directory's entries with their sizes, sorted by name or size, and totals.")
	t.PermissionPattern = p.pathPatterns("path")
	sdk.AddTool(s, t, p.listDirectoryWithSizes)

	sdk.AddTool(s, readTool("list_allowed_directories", "List allowed directories", "List the directories this server may read and write."),
		func(context.Context, *sdk.Request, struct{}) (*sdk.Result, error) {
			return sdk.Text("Allowed directories:\n" + strings.Join(p.roots.Dirs(), "\n")), nil
		})
}

type readArgs struct {
	Path   string `json:"path" jsonschema:"description=File to read, relative to the project directory or absolute inside an allowed directory"`
	Head   int    `json:"head,omitempty" jsonschema:"description=Return only the first N lines,minimum=1"`
	Tail   int    `json:"tail,omitempty" jsonschema:"description=Return only the last N lines,minimum=1"`
	Offset int    `json:"offset,omitempty" jsonschema:"description=First line to return (1-based),minimum=1"`
	Limit  int    `json:"limit,omitempty" jsonschema:"description=Number of lines to return from offset,minimum=1"`
}

// maxLineBytes bounds one line read by read_text_file.
const maxLineBytes = 16 << 20

// openFile opens a located regular file for reading through its os.Root,
// checked by confine after the open (protected paths, hard links, swapped
// symlinks). FIFOs, sockets and devices are refused without blocking.
func (p *plugin) openFile(path string) (*os.File, loc, error) {
	l, err := p.locate(path)
	if err != nil {
		return nil, loc{}, err
	}
	f, err := p.roots.OpenFile(l.root, l.Rel, os.O_RDONLY, 0)
	if err != nil {
		return nil, l, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, l, err
	}
	if st.IsDir() {
		f.Close()
		return nil, l, fmt.Errorf("%s is a directory; list it with list_directory", path)
	}
	return f, l, nil
}

func (p *plugin) readTextFile(ctx context.Context, _ *sdk.Request, in readArgs) (*sdk.Result, error) {
	defer p.trim.Later()
	if in.Head > 0 && in.Tail > 0 {
		return sdk.ErrorResult("pass head or tail, not both"), nil
	}
	if (in.Head > 0 || in.Tail > 0) && (in.Offset > 0 || in.Limit > 0) {
		return sdk.ErrorResult("head/tail cannot be combined with offset/limit"), nil
	}
	if in.Head < 0 || in.Tail < 0 || in.Offset < 0 || in.Limit < 0 {
		return sdk.ErrorResult("head, tail, offset and limit must be positive"), nil
	}
	f, _, err := p.openFile(in.Path)
	if err != nil {
		return sdk.ErrorResult("cannot read %s: %v", in.Path, err), nil
	}
	defer f.Close()
	whole := in.Head == 0 && in.Tail == 0 && in.Offset == 0 && in.Limit == 0
	st, err := f.Stat()
	if err != nil {
		return sdk.ErrorResult("cannot read %s: %v", in.Path, err), nil
	}
	if whole && st.Size() > p.maxRead {
		return sdk.ErrorResult("%s is %d bytes, over the %d-byte read limit; read part of it with head, tail or offset/limit", in.Path, st.Size(), p.maxRead), nil
	}
	if whole {
		// Hash while reading, so the sha256 is of exactly what was read.
		// One buffer of the file's size, which becomes the text without a
		// copy.
		h := sha256.New()
		var b strings.Builder
		b.Grow(int(st.Size()) + 1) //nolint:gosec // at most max_read_bytes
		n, err := io.Copy(io.MultiWriter(&b, h), io.LimitReader(f, p.maxRead+1))
		if err != nil {
			return sdk.ErrorResult("cannot read %s: %v", in.Path, err), nil
		}
		if n > p.maxRead {
			return sdk.ErrorResult("%s grew over the %d-byte read limit while it was read; read part of it with head, tail or offset/limit", in.Path, p.maxRead), nil
		}
		text := b.String()
		if !utf8.ValidString(text) {
			return sdk.ErrorResult("%s is not UTF-8 text; use read_media_file for images and audio", in.Path), nil
		}
		sum := hex.EncodeToString(h.Sum(nil))
		p.hashes.put(st, n, sum)
		return sdk.Text(text).WithText("sha256: " + sum), nil
	}
	// Part of the file: the cost follows the lines returned. Its sha256
	// (of the whole file) is read along only for a small file; a larger
	// one's comes from the cache of sums (filled by whole reads and
	// get_file_info) or is left out.
	small := st.Size() <= partialHashMax
	var text string
	if in.Tail > 0 {
		if text, err = p.readTail(f, st.Size(), in.Tail); err != nil {
			return sdk.ErrorResult("cannot read %s: %v", in.Path, err), nil
		}
	} else {
		var r io.Reader = f
		var h hash.Hash
		if small {
			h = sha256.New()
			r = io.TeeReader(f, h)
		}
		if text, err = readLines(ctx, r, in, p.maxRead); err != nil {
			return sdk.ErrorResult("cannot read %s: %v", in.Path, err), nil
		}
		if small {
			if _, err := io.Copy(io.Discard, r); err != nil { // finish the hash
				return sdk.ErrorResult("cannot read %s: %v", in.Path, err), nil
			}
			return sdk.Text(text).WithText("sha256: " + hex.EncodeToString(h.Sum(nil))), nil
		}
	}
	if sum, ok := p.hashes.get(st); ok {
		return sdk.Text(text).WithText("sha256: " + sum), nil
	}
	if small {
		sum, err := hashFrom(f)
		if err != nil {
			return sdk.ErrorResult("cannot read %s: %v", in.Path, err), nil
		}
		return sdk.Text(text).WithText("sha256: " + sum), nil
	}
	return sdk.Text(text).WithText(fmt.Sprintf("sha256: not computed for part of a %d-byte file (get_file_info gives it)", st.Size())), nil
}

// partialHashMax is the largest file whose sha256 a partial read computes
// (reading it all costs about as much as the call itself).
const partialHashMax = 256 << 10

// hashFrom hashes f from its start.
func hashFrom(f *os.File) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, 1<<62)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// readTail returns the last n lines of a file (as bufio.ScanLines splits
// them: a final newline ends the last line, "\r" before a newline is
// dropped), reading backwards from the end in growing chunks and at most
// the read limit.
func (p *plugin) readTail(f *os.File, size int64, n int) (string, error) {
	chunk := int64(64 << 10)
	for {
		window := min(chunk, size, p.maxRead)
		buf := make([]byte, window)
		got, err := f.ReadAt(buf, size-window)
		if err != nil && !errors.Is(err, io.EOF) {
			return "", err
		}
		buf = buf[:got]
		text := bytes.TrimSuffix(buf, []byte{'\n'})
		// The start of the n-th line from the end.
		cut, found := len(text), 0
		for found < n {
			i := bytes.LastIndexByte(text[:cut], '\n')
			if i < 0 {
				break
			}
			cut, found = i, found+1
		}
		whole := window == size
		if found < n && !whole {
			if window >= p.maxRead {
				return "", fmt.Errorf("the last %d lines exceed the %d-byte read limit; ask for fewer", n, p.maxRead)
			}
			chunk *= 4
			continue
		}
		if found == n {
			text = text[cut+1:]
		}
		if len(buf) == 0 {
			return "", nil
		}
		lines := strings.Split(string(text), "\n")
		for i, l := range lines {
			lines[i] = strings.TrimSuffix(l, "\r")
		}
		out := strings.Join(lines, "\n")
		if !utf8.ValidString(out) {
			return "", fmt.Errorf("not UTF-8 text; use read_media_file for images and audio")
		}
		return out, nil
	}
}

func readLines(ctx context.Context, r io.Reader, in readArgs, maxBytes int64) (string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxLineBytes)
	var (
		lines []string
		n     int
		size  int64
	)
	first, last := 1, 0
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
			return "", ctx.Err()
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
			size += int64(len(sc.Bytes()))
			if size > maxBytes {
				return "", fmt.Errorf("the lines asked for exceed the %d-byte read limit; ask for fewer", maxBytes)
			}
		}
		if last > 0 && n >= last && in.Tail == 0 {
			break
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return "", fmt.Errorf("a line is longer than %d bytes", maxLineBytes)
		}
		return "", err
	}
	text := strings.Join(lines, "\n")
	if !utf8.ValidString(text) {
		return "", fmt.Errorf("not UTF-8 text; use read_media_file for images and audio")
	}
	return text, nil
}

type pathArgs struct {
	Path string `json:"path" jsonschema:"description=Path relative to the project directory, or absolute inside an allowed directory"`
}

func (p *plugin) readMediaFile(_ context.Context, _ *sdk.Request, in pathArgs) (*sdk.Result, error) {
	defer p.trim.Later()
	f, _, err := p.openFile(in.Path)
	if err != nil {
		return sdk.ErrorResult("cannot read %s: %v", in.Path, err), nil
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, p.maxRead+1))
	if err != nil {
		return sdk.ErrorResult("cannot read %s: %v", in.Path, err), nil
	}
	if int64(len(b)) > p.maxRead {
		return sdk.ErrorResult("%s is over the %d-byte read limit", in.Path, p.maxRead), nil
	}
	mt := mimetype.Detect(b).String()
	mt, _, _ = strings.Cut(mt, ";")
	switch {
	case strings.HasPrefix(mt, "image/"):
		return (&sdk.Result{}).WithImage(b, mt), nil
	case strings.HasPrefix(mt, "audio/"):
		return (&sdk.Result{}).WithAudio(b, mt), nil
	default:
		return sdk.ErrorResult("%s is %s, not an image or audio file; read text with read_text_file", in.Path, mt), nil
	}
}

type pathsArgs struct {
	Paths []string `json:"paths" jsonschema:"description=Files to read"`
}

func (p *plugin) readMultipleFiles(ctx context.Context, req *sdk.Request, in pathsArgs) (*sdk.Result, error) {
	if len(in.Paths) == 0 {
		return sdk.ErrorResult("paths is empty"), nil
	}
	var b strings.Builder
	var total int64
	for i, path := range in.Paths {
		if i > 0 {
			b.WriteString("\n---\n")
		}
		res, _ := p.readTextFile(ctx, req, readArgs{Path: path})
		text := resultText(res)
		if res.IsError() {
			fmt.Fprintf(&b, "%s: Error - %s", path, text)
			continue
		}
		total += int64(len(text))
		if total > p.maxRead {
			fmt.Fprintf(&b, "%s: Error - skipped: the files read so far exceed the %d-byte read limit", path, p.maxRead)
			continue
		}
		fmt.Fprintf(&b, "%s:\n%s", path, text)
	}
	return sdk.Text(b.String()), nil
}

func (p *plugin) getFileInfo(_ context.Context, _ *sdk.Request, in pathArgs) (*sdk.Result, error) {
	l, err := p.locate(in.Path)
	if err != nil {
		return sdk.ErrorResult("cannot stat %s: %v", in.Path, err), nil
	}
	st, err := p.stat(l)
	if err != nil {
		return sdk.ErrorResult("cannot stat %s: %v", in.Path, err), nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "path: %s\n", p.display(l))
	fmt.Fprintf(&b, "type: %s\n", fileType(st))
	fmt.Fprintf(&b, "size: %d\n", st.Size())
	fmt.Fprintf(&b, "modified: %s\n", st.ModTime().UTC().Format("2006-01-02T15:04:05.000Z"))
	if at, ok := accessTime(st); ok {
		fmt.Fprintf(&b, "accessed: %s\n", at.UTC().Format("2006-01-02T15:04:05.000Z"))
	}
	fmt.Fprintf(&b, "permissions: %04o\n", st.Mode().Perm())
	if st.Mode().IsRegular() {
		sum, err := p.hash(l)
		if err != nil {
			return sdk.ErrorResult("cannot hash %s: %v", in.Path, err), nil
		}
		fmt.Fprintf(&b, "sha256: %s\n", sum)
	}
	return sdk.Text(b.String()), nil
}

// stat describes a located path from the opened file (checked by confine),
// or, for what cannot be opened for reading (a FIFO, an unreadable file),
// from Lstat of the entry, itself checked by identity.
func (p *plugin) stat(l loc) (fs.FileInfo, error) {
	f, err := p.roots.OpenFile(l.root, l.Rel, os.O_RDONLY, 0)
	if err == nil {
		defer f.Close()
		return f.Stat()
	}
	if !errors.Is(err, confine.ErrNotRegular) && !errors.Is(err, fs.ErrPermission) {
		return nil, err
	}
	st, lerr := l.root.Lstat(l.Rel)
	if lerr != nil {
		return nil, lerr
	}
	if cerr := p.roots.CheckEntry(p.display(l), st, false); cerr != nil {
		return nil, cerr
	}
	return st, nil
}

func fileType(st fs.FileInfo) string {
	switch {
	case st.IsDir():
		return "directory"
	case st.Mode().IsRegular():
		return "file"
	case st.Mode()&fs.ModeSymlink != 0:
		return "symlink"
	default:
		return "other"
	}
}

// hash returns the sha256 of a located file, from the cache of sums when
// the file is the one hashed before (see hashCache), else read.
func (p *plugin) hash(l loc) (string, error) {
	f, err := p.roots.OpenFile(l.root, l.Rel, os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if sum, ok := p.hashes.get(st); ok {
		return sum, nil
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	p.hashes.put(st, n, sum)
	return sum, nil
}

// freshHash returns the sha256 of a located file, always read: what a
// write's if_match is checked against.
func (p *plugin) freshHash(l loc) (string, error) {
	f, err := p.roots.OpenFile(l.root, l.Rel, os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// dirEntry is a listed entry; info is its Lstat, taken relative to the
// opened (and checked) directory, when the listing asked for it.
type dirEntry struct {
	fs.DirEntry
	info fs.FileInfo
}

// readDir lists a located directory, opened and checked by confine, less
// its protected entries; withInfo also Lstats each entry in that directory.
func (p *plugin) readDir(req *sdk.Request, dir string, withInfo bool) (loc, []dirEntry, error) {
	if dir == "" {
		dir = "."
	}
	l, err := p.locate(dir)
	if err != nil {
		return loc{}, nil, err
	}
	f, err := p.roots.OpenFile(l.root, l.Rel, os.O_RDONLY, 0)
	if err != nil {
		return l, nil, err
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return l, nil, err
	}
	ents = p.roots.Filter(f, ents)
	ents = slices.DeleteFunc(ents, func(e os.DirEntry) bool {
		return p.denied(req, l.root, path.Join(filepathToFS(l.Rel), e.Name()))
	})
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	out := make([]dirEntry, len(ents))
	for i, e := range ents {
		out[i].DirEntry = e
		if withInfo {
			out[i].info, _ = confine.LstatAt(f, e.Name())
		}
	}
	return l, out, nil
}

func (p *plugin) listDirectory(_ context.Context, req *sdk.Request, in pathArgs) (*sdk.Result, error) {
	_, ents, err := p.readDir(req, in.Path, false)
	if err != nil {
		return sdk.ErrorResult("cannot list %s: %v", in.Path, err), nil
	}
	var b strings.Builder
	for _, e := range ents {
		kind := "[FILE]"
		if e.IsDir() {
			kind = "[DIR]"
		}
		fmt.Fprintf(&b, "%s %s\n", kind, e.Name())
	}
	if len(ents) == 0 {
		b.WriteString("(empty directory)\n")
	}
	return sdk.Text(b.String()), nil
}

type sizesArgs struct {
	Path   string `json:"path" jsonschema:"description=Directory to list"`
	SortBy string `json:"sortBy,omitempty" jsonschema:"description=Sort entries by name (default) or size,enum=name,enum=size"`
}

func (p *plugin) listDirectoryWithSizes(_ context.Context, req *sdk.Request, in sizesArgs) (*sdk.Result, error) {
	if in.SortBy != "" && in.SortBy != "name" && in.SortBy != "size" {
		return sdk.ErrorResult("sortBy must be name or size"), nil
	}
	_, ents, err := p.readDir(req, in.Path, true)
	if err != nil {
		return sdk.ErrorResult("cannot list %s: %v", in.Path, err), nil
	}
	type row struct {
		name string
		dir  bool
		size int64
	}
	rows := make([]row, 0, len(ents))
	var total int64
	files, dirs := 0, 0
	for _, e := range ents {
		r := row{name: e.Name(), dir: e.IsDir()}
		if e.info != nil && !e.IsDir() {
			r.size = e.info.Size()
		}
		if r.dir {
			dirs++
		} else {
			files++
			total += r.size
		}
		rows = append(rows, r)
	}
	if in.SortBy == "size" {
		sort.SliceStable(rows, func(i, j int) bool { return rows[i].size > rows[j].size })
	}
	var b strings.Builder
	for _, r := range rows {
		if r.dir {
			fmt.Fprintf(&b, "[DIR]  %-40s\n", r.name)
		} else {
			fmt.Fprintf(&b, "[FILE] %-40s %10s\n", r.name, humanSize(r.size))
		}
	}
	fmt.Fprintf(&b, "\nTotal: %d files, %d directories\nCombined size: %s\n", files, dirs, humanSize(total))
	return sdk.Text(b.String()), nil
}

func humanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.2f %cB", float64(n)/float64(div), "KMGTPE"[exp])
}

// resultText returns a result's text blocks, for tools built on others.
func resultText(r *sdk.Result) string {
	var b bytes.Buffer
	for i, t := range r.Texts() {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(t)
	}
	return b.String()
}

package filesystem_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/plugins/filesystem"
	"github.com/switchboard-mcp/switchboard/sdk/sdktest"
)

// protectedEnv is a project holding the host's control plane: config.hcl in
// the project (the default layout), a data dir nested two folders down
// (state/data), and a lock file that does not exist yet. Each protected file
// holds a SECRET- marker; other.hcl and open/ are their unprotected twins.
type protectedEnv struct {
	env
	config, data, perms, audit, lock string
	other                            string
}

func setupProtected(t *testing.T, extra []string, settings ...map[string]any) protectedEnv {
	t.Helper()
	base, _ := filepath.EvalSymlinks(t.TempDir())
	e := protectedEnv{env: env{base: base, project: filepath.Join(base, "project"), outside: filepath.Join(base, "outside")}}
	e.config = filepath.Join(e.project, "config.hcl")
	e.data = filepath.Join(e.project, "state", "data")
	e.perms = filepath.Join(e.data, "permissions.json")
	e.audit = filepath.Join(e.data, "audit.jsonl")
	e.lock = filepath.Join(e.project, "switchboard.lock")
	e.other = filepath.Join(e.project, "other.hcl")
	write(t, filepath.Join(e.project, "f.txt"), "1\n2\n3\n4\n5\n")
	write(t, e.config, "SECRET-CONFIG\n")
	write(t, e.perms, "SECRET-PERMS\n")
	write(t, e.audit, "SECRET-AUDIT\n")
	write(t, e.other, "open config\n")
	write(t, filepath.Join(e.project, "open", "notes.txt"), "open notes\n")
	opts := []sdktest.Option{sdktest.WithProjectDir(e.project)}
	if len(settings) > 0 {
		opts = append(opts, sdktest.WithSettings(settings[0]))
	}
	paths := append([]string{e.config, e.data, e.lock}, extra...)
	e.p = sdktest.StartInProcess(t, filesystem.New(), append(opts, sdktest.WithProtectedPaths(paths...))...)
	return e
}

// noSecret fails when a result carries protected content or names.
func noSecret(t *testing.T, what, got string, names ...string) {
	t.Helper()
	if strings.Contains(got, "SECRET-") {
		t.Errorf("%s returned protected content: %q", what, got)
	}
	for _, n := range names {
		if strings.Contains(got, n) {
			t.Errorf("%s shows the protected name %q: %q", what, n, got)
		}
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return string(b)
}

// TestProtectedPathsRefused performs every tool on the protected files by
// name, and the same call on an unprotected twin as a control.
func TestProtectedPathsRefused(t *testing.T) {
	e := setupProtected(t, nil)
	type call struct {
		tool string
		args func(path string) map[string]any
	}
	calls := []call{
		{"read_text_file", func(p string) map[string]any { return map[string]any{"path": p} }},
		{"read_text_file", func(p string) map[string]any { return map[string]any{"path": p, "tail": 1} }},
		{"read_media_file", func(p string) map[string]any { return map[string]any{"path": p} }},
		{"read_multiple_files", func(p string) map[string]any { return map[string]any{"paths": []string{p}} }},
		{"get_file_info", func(p string) map[string]any { return map[string]any{"path": p} }},
		{"write_file", func(p string) map[string]any { return map[string]any{"path": p, "content": "pwned"} }},
		{"edit_file", func(p string) map[string]any {
			return map[string]any{"path": p, "edits": []map[string]any{{"oldText": "SECRET", "newText": "pwned"}}}
		}},
		{"move_file", func(p string) map[string]any { return map[string]any{"source": p, "destination": "stolen"} }},
		{"grep", func(p string) map[string]any { return map[string]any{"pattern": ".", "path": p} }},
		{"list_directory", func(p string) map[string]any { return map[string]any{"path": p} }},
		{"directory_tree", func(p string) map[string]any { return map[string]any{"path": p} }},
		{"search_files", func(p string) map[string]any { return map[string]any{"path": p, "pattern": "*"} }},
	}
	for _, path := range []string{"config.hcl", e.config, "./state/../config.hcl", "state/data", "state/data/permissions.json", "state/data/audit.jsonl"} {
		for _, c := range calls {
			got, isErr := e.call(t, c.tool, c.args(path))
			if c.tool == "read_multiple_files" {
				isErr = strings.Contains(got, "Error -")
			}
			if !isErr {
				t.Errorf("%s(%q) = %q, want refused", c.tool, path, got)
			}
			noSecret(t, fmt.Sprintf("%s(%q)", c.tool, path), got)
		}
	}
	// Control: the same calls on an unprotected file work.
	for _, c := range calls {
		switch c.tool {
		case "list_directory", "directory_tree", "search_files", "move_file", "read_media_file":
			continue
		}
		args := c.args("other.hcl")
		if c.tool == "edit_file" {
			args = map[string]any{"path": "other.hcl", "dryRun": true, "edits": []map[string]any{{"oldText": "pwned", "newText": "x"}}} // write_file ran first
		}
		if got, isErr := e.call(t, c.tool, args); isErr || strings.Contains(got, "Error -") {
			t.Errorf("control %s(other.hcl) = %q, want it to work", c.tool, got)
		}
	}
	// Nothing protected changed or moved.
	if got := mustRead(t, e.config); got != "SECRET-CONFIG\n" {
		t.Errorf("config.hcl = %q, want it unchanged", got)
	}
	if got := mustRead(t, e.perms); got != "SECRET-PERMS\n" {
		t.Errorf("permissions.json = %q, want it unchanged", got)
	}
	if _, err := os.Lstat(filepath.Join(e.project, "stolen")); err == nil {
		t.Error("a protected path was moved to stolen")
	}
}

// TestProtectedDestinations: nothing may be moved or written onto or into a
// protected path, including one that does not exist yet (the lock file).
func TestProtectedDestinations(t *testing.T) {
	e := setupProtected(t, nil)
	for _, tt := range []struct {
		tool string
		args map[string]any
	}{
		{"move_file", map[string]any{"source": "f.txt", "destination": "switchboard.lock"}},
		{"move_file", map[string]any{"source": "f.txt", "destination": "state/data/planted.json"}},
		{"move_file", map[string]any{"source": "open", "destination": "switchboard.lock"}},
		{"write_file", map[string]any{"path": "switchboard.lock", "content": "pwned"}},
		{"write_file", map[string]any{"path": "state/data/permissions.json", "content": "{}"}},
		{"create_directory", map[string]any{"path": "switchboard.lock"}},
		{"create_directory", map[string]any{"path": "state/data/new"}},
	} {
		if got, isErr := e.call(t, tt.tool, tt.args); !isErr {
			t.Errorf("%s(%v) = %q, want refused", tt.tool, tt.args, got)
		}
	}
	for _, p := range []string{e.lock, filepath.Join(e.data, "planted.json"), filepath.Join(e.data, "new")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was created", p)
		}
	}
	if _, err := os.Stat(filepath.Join(e.project, "f.txt")); err != nil {
		t.Errorf("f.txt moved: %v", err)
	}
	// Control: a move to an ordinary name works.
	if got, isErr := e.call(t, "move_file", map[string]any{"source": "f.txt", "destination": "g.txt"}); isErr {
		t.Errorf("control move_file(f.txt, g.txt) = %q", got)
	}
}

// TestProtectedLeftOutOfListings: listings and walks neither show protected
// entries nor read them, and still show everything else.
func TestProtectedLeftOutOfListings(t *testing.T) {
	e := setupProtected(t, nil)
	for _, tt := range []struct {
		tool    string
		args    map[string]any
		want    []string
		notWant []string
	}{
		{"list_directory", map[string]any{"path": "."}, []string{"other.hcl", "f.txt", "[DIR] state"}, []string{"config.hcl"}},
		{"list_directory", map[string]any{"path": "state"}, []string{"(empty directory)"}, []string{"data"}},
		{"list_directory_with_sizes", map[string]any{"path": "."}, []string{"other.hcl"}, []string{"config.hcl"}},
		{"directory_tree", map[string]any{"path": ".", "include_ignored": true}, []string{`"other.hcl"`, `"notes.txt"`, `"state"`}, []string{"config.hcl", `"data"`, "permissions.json", "audit.jsonl"}},
		{"search_files", map[string]any{"path": ".", "pattern": "*.hcl"}, []string{"other.hcl"}, []string{"config.hcl"}},
		{"search_files", map[string]any{"path": ".", "pattern": "**/*.json*"}, []string{"No matches found"}, []string{"permissions.json", "audit.jsonl"}},
		{"grep", map[string]any{"pattern": "SECRET|open", "include_ignored": true}, []string{"other.hcl:1:open config", "open/notes.txt:1:open notes"}, []string{"config.hcl:", "permissions", "audit"}},
		{"grep", map[string]any{"pattern": "SECRET"}, []string{"No matches found"}, nil},
	} {
		got, isErr := e.call(t, tt.tool, tt.args)
		if isErr {
			t.Errorf("%s(%v) = %q, want it to work", tt.tool, tt.args, got)
		}
		noSecret(t, tt.tool, got, tt.notWant...)
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s(%v) = %q, want it to contain %q", tt.tool, tt.args, got, w)
			}
		}
	}
}

// TestProtectedThroughLinks: a symlink or a hard link inside the root to a
// protected file is refused; the same links to an unprotected file work.
func TestProtectedThroughLinks(t *testing.T) {
	e := setupProtected(t, nil)
	link := func(fn func(string, string) error, target, name string) {
		t.Helper()
		if err := fn(target, filepath.Join(e.project, name)); err != nil {
			t.Fatal(err)
		}
	}
	link(os.Symlink, e.config, "config-sym")
	link(os.Symlink, "config.hcl", "config-rel") // os.Root follows relative ones
	link(os.Symlink, e.data, "data-sym")
	link(os.Symlink, "state/data", "data-rel")
	link(os.Symlink, "state", "state-sym")
	link(os.Link, e.config, "config-hard")
	link(os.Link, e.audit, "audit-hard") // a file inside a protected folder
	link(os.Symlink, e.other, "other-sym")
	link(os.Link, e.other, "other-hard")
	for _, path := range []string{"config-sym", "config-rel", "data-sym/permissions.json", "data-rel/audit.jsonl", "state-sym/data/audit.jsonl", "config-hard", "audit-hard"} {
		for _, tool := range []string{"read_text_file", "get_file_info", "read_media_file"} {
			got, isErr := e.call(t, tool, map[string]any{"path": path})
			if !isErr {
				t.Errorf("%s(%q) = %q, want refused", tool, path, got)
			}
			noSecret(t, tool+"("+path+")", got)
		}
		got, isErr := e.call(t, "edit_file", map[string]any{"path": path, "edits": []map[string]any{{"oldText": "SECRET", "newText": "pwned"}}})
		if !isErr {
			t.Errorf("edit_file(%q) = %q, want refused", path, got)
		}
		noSecret(t, "edit_file("+path+")", got)
	}
	got, _ := e.call(t, "grep", map[string]any{"pattern": "SECRET", "include_ignored": true})
	noSecret(t, "grep over links", got)
	if got := mustRead(t, e.config) + mustRead(t, e.audit); got != "SECRET-CONFIG\nSECRET-AUDIT\n" {
		t.Errorf("protected files changed: %q", got)
	}
	// Controls: the same kinds of links to an unprotected file read fine.
	for _, path := range []string{"other-sym", "other-hard"} {
		if got, isErr := e.call(t, "read_text_file", map[string]any{"path": path}); isErr || !strings.Contains(got, "open config") {
			t.Errorf("control read_text_file(%q) = %q", path, got)
		}
	}
	if got, _ := e.call(t, "grep", map[string]any{"pattern": "open config"}); !strings.Contains(got, "other-hard:1:") {
		t.Errorf("control grep = %q, want the hard link to other.hcl found", got)
	}
}

// TestProtectedSymlinkSwapRace is the race (212 reads in 3,000): a
// goroutine keeps swapping a path between a plain file and a symlink to a
// protected file while the tool reads it. The protected content must never
// come back.
func TestProtectedSymlinkSwapRace(t *testing.T) {
	e := setupProtected(t, nil)
	swap := filepath.Join(e.project, "swap")
	write(t, swap, "plain\n")
	var stop atomic.Bool
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tmpLink, tmpFile := swap+".l", swap+".f"
		for i := 0; !stop.Load(); i++ {
			// Relative targets: os.Root itself refuses absolute ones.
			target := "config.hcl"
			if i%2 == 1 {
				target = "state/data/permissions.json"
			}
			_ = os.Remove(tmpLink)
			if os.Symlink(target, tmpLink) == nil && os.Rename(tmpLink, swap) == nil {
				swaps.Add(1)
			}
			if os.WriteFile(tmpFile, []byte("plain\n"), 0o644) == nil {
				_ = os.Rename(tmpFile, swap)
			}
		}
	}()
	var plain, refusedAfterOpen, refusedBefore, other int
	for i := 0; i < 3000; i++ {
		got, isErr := e.call(t, "read_text_file", map[string]any{"path": "swap"})
		if strings.Contains(got, "SECRET-") {
			t.Errorf("read %d returned protected content: %q", i, got)
		}
		switch {
		case !isErr:
			plain++
		case strings.Contains(got, " is inside "):
			refusedBefore++
		case strings.Contains(got, "belongs to the host"):
			refusedAfterOpen++
		default: // e.g. a readlink that met the plain file
			other++
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("3000 reads: %d plain, %d refused by path, %d refused after the open, %d other errors; %d swaps", plain, refusedBefore, refusedAfterOpen, other, swaps.Load())
	if swaps.Load() == 0 || plain == 0 {
		t.Fatalf("the race did not run both ways (%d swaps, %d plain reads)", swaps.Load(), plain)
	}
}

// TestMoveParentOfProtected: moving the folder that holds the data dir
// (or the data dir itself) is refused and leaves it in place; moving an
// ordinary folder works.
func TestMoveParentOfProtected(t *testing.T) {
	e := setupProtected(t, nil)
	for _, src := range []string{"state", "state/data", "./state/", e.project + "/state"} {
		got, isErr := e.call(t, "move_file", map[string]any{"source": src, "destination": "aside"})
		if !isErr {
			t.Errorf("move_file(%q, aside) = %q, want refused", src, got)
		}
	}
	if got := mustRead(t, e.perms); got != "SECRET-PERMS\n" {
		t.Errorf("permissions.json = %q after the moves", got)
	}
	if _, err := os.Lstat(filepath.Join(e.project, "aside")); err == nil {
		t.Error("something was moved to aside")
	}
	// Reached through a symlink to the parent, the move is refused too.
	if err := os.Symlink(e.project, filepath.Join(e.project, "self")); err != nil {
		t.Fatal(err)
	}
	if got, isErr := e.call(t, "move_file", map[string]any{"source": "self/state", "destination": "aside"}); !isErr {
		t.Errorf("move_file(self/state) = %q, want refused", got)
	}
	if got, isErr := e.call(t, "move_file", map[string]any{"source": "open", "destination": "aside"}); isErr {
		t.Errorf("control move_file(open, aside) = %q", got)
	}
}

// TestProtectedReachedThroughSymlink: a data dir whose real path is inside
// an allowed directory, reached through a symlink in the project; and a
// protected path given through a symlink whose real path is in the project.
func TestProtectedReachedThroughSymlink(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	home := filepath.Join(base, "home")
	data := filepath.Join(home, ".local", "state", "switchboard")
	project := filepath.Join(base, "project")
	write(t, filepath.Join(data, "permissions.json"), "SECRET-PERMS\n")
	write(t, filepath.Join(home, "notes.txt"), "open notes\n")
	write(t, filepath.Join(project, "real-config.hcl"), "SECRET-CONFIG\n")
	if err := os.Symlink(data, filepath.Join(project, "state-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(home, filepath.Join(project, "home-link")); err != nil {
		t.Fatal(err)
	}
	// The host names its config by a path through a symlink.
	if err := os.Symlink(project, filepath.Join(base, "via")); err != nil {
		t.Fatal(err)
	}
	p := sdktest.StartInProcess(t, filesystem.New(), sdktest.WithProtectedPaths(data, filepath.Join(base, "via", "real-config.hcl")),
		sdktest.WithProjectDir(project), sdktest.WithSettings(map[string]any{"roots": []string{home}}))
	e := env{project: project, p: p}
	for _, path := range []string{"state-link/permissions.json", "home-link/.local/state/switchboard/permissions.json", filepath.Join(data, "permissions.json"), "real-config.hcl"} {
		got, isErr := e.call(t, "read_text_file", map[string]any{"path": path})
		if !isErr {
			t.Errorf("read_text_file(%q) = %q, want refused", path, got)
		}
		noSecret(t, "read_text_file("+path+")", got)
	}
	if got, isErr := e.call(t, "list_directory", map[string]any{"path": "state-link"}); !isErr || strings.Contains(got, "permissions") {
		t.Errorf("list_directory(state-link) = %q, want refused", got)
	}
	got, _ := e.call(t, "grep", map[string]any{"pattern": "SECRET", "path": home, "include_ignored": true})
	noSecret(t, "grep(home)", got)
	if got, isErr := e.call(t, "read_text_file", map[string]any{"path": "home-link/notes.txt"}); isErr || !strings.Contains(got, "open notes") {
		t.Errorf("control read_text_file(home-link/notes.txt) = %q", got)
	}
}

// TestFIFO: reading a FIFO nobody writes to returns an error at once: it is
// opened without blocking and refused before any read.
func TestFIFO(t *testing.T) {
	e := setup(t)
	fifo := filepath.Join(e.project, "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, tt := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"read_text_file", map[string]any{"path": "pipe"}, "FIFO"},
		{"read_text_file", map[string]any{"path": "pipe", "tail": 1}, "FIFO"},
		{"read_media_file", map[string]any{"path": "pipe"}, "FIFO"},
		{"read_multiple_files", map[string]any{"paths": []string{"pipe"}}, "FIFO"},
		{"edit_file", map[string]any{"path": "pipe", "edits": []map[string]any{{"oldText": "a", "newText": "b"}}}, "FIFO"},
		{"get_file_info", map[string]any{"path": "pipe"}, "type: other"},
		{"grep", map[string]any{"pattern": "x", "include_ignored": true}, "No matches found"},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		start := time.Now()
		res, err := e.p.CallContext(ctx, tt.tool, tt.args, nil)
		cancel()
		if err != nil {
			t.Errorf("%s(pipe) = %v after %v, want a prompt answer", tt.tool, err, time.Since(start))
			continue
		}
		if got := res.Text(); !strings.Contains(got, tt.want) {
			t.Errorf("%s(pipe) = %q, want %q", tt.tool, got, tt.want)
		}
	}
}

// TestTailCap: tail on a file larger than max_read_bytes reads only the
// end, and returns at most the cap.
func TestTailCap(t *testing.T) {
	e := setup(t, map[string]any{"max_read_bytes": 64})
	var b strings.Builder
	for i := 1; i <= 10000; i++ {
		fmt.Fprintf(&b, "line %05d\n", i)
	}
	write(t, filepath.Join(e.project, "big.log"), b.String())
	got, isErr := e.call(t, "read_text_file", map[string]any{"path": "big.log", "tail": 3})
	body, _, _ := strings.Cut(got, "\nsha256")
	if isErr || body != "line 09998\nline 09999\nline 10000" {
		t.Errorf("tail 3 = %q (isError %v)", got, isErr)
	}
	if len(body) > 64 {
		t.Errorf("tail returned %d bytes, over the 64-byte cap", len(body))
	}
	if got, isErr := e.call(t, "read_text_file", map[string]any{"path": "big.log", "tail": 100}); !isErr || !strings.Contains(got, "read limit") || len(got) > 200 {
		t.Errorf("tail 100 (over the cap) = %q, want refused", got)
	}
	if got, isErr := e.call(t, "read_text_file", map[string]any{"path": "big.log"}); !isErr || strings.Contains(got, "line 00001") {
		t.Errorf("whole read over the cap = %q, want refused", got)
	}
	// Control: tail under the cap as before, with the file's sha256.
	if got, isErr := e.call(t, "read_text_file", map[string]any{"path": "f.txt", "tail": 2}); isErr || got != "4\n5\nsha256: "+sha("1\n2\n3\n4\n5\n") {
		t.Errorf("tail under the cap = %q", got)
	}
}

// TestProtectedNotYetCreatedRace: the lock file does not exist yet; a
// goroutine keeps swapping a folder for a symlink to the project (where
// the lock file belongs) while writes and moves target sub/switchboard.lock.
// Nothing may ever appear at the lock file's path.
func TestProtectedNotYetCreatedRace(t *testing.T) {
	e := setupProtected(t, nil)
	sub := filepath.Join(e.project, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		away := sub + ".away"
		for !stop.Load() {
			if os.Rename(sub, away) != nil {
				continue
			}
			if os.Symlink(".", sub) == nil { // relative: os.Root follows it
				swaps.Add(1)
				_ = os.Remove(sub)
			}
			_ = os.Rename(away, sub)
		}
	}()
	for i := 0; i < 500; i++ {
		write(t, filepath.Join(e.project, "evil"), "pwned")
		e.p.Call("move_file", map[string]any{"source": "evil", "destination": "sub/switchboard.lock"})
		e.p.Call("write_file", map[string]any{"path": "sub/switchboard.lock", "content": "pwned"})
		e.p.Call("create_directory", map[string]any{"path": "sub/switchboard.lock"})
		if _, err := os.Lstat(e.lock); err == nil {
			t.Fatalf("after %d rounds something was put at the protected path %s", i+1, e.lock)
		}
		_ = os.RemoveAll(filepath.Join(sub, "switchboard.lock"))
	}
	stop.Store(true)
	wg.Wait()
	if swaps.Load() == 0 {
		t.Fatal("the folder was never swapped")
	}
}

package bash_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/plugins/bash"
	"github.com/switchboard-mcp/switchboard/sdk/sdktest"
)

// direct is the bash plugin served in-process, configured as a host that
// protects paths, and called on behalf of named owners.
type direct struct {
	p       *sdktest.Plugin
	project string
}

func startDirect(t *testing.T, protected []string, settings map[string]any) *direct {
	t.Helper()
	d := &direct{project: t.TempDir()}
	opts := []sdktest.Option{sdktest.WithProjectDir(d.project), sdktest.WithServerName("bash"), sdktest.WithProtectedPaths(protected...)}
	if settings != nil {
		opts = append(opts, sdktest.WithSettings(settings))
	}
	d.p = sdktest.StartInProcess(t, bash.New(), opts...)
	return d
}

func (d *direct) call(owner, tool string, args map[string]any) *sdktest.Result {
	return d.p.As(owner).Call(tool, args)
}

func isOpaque(pats []string) bool {
	for _, p := range pats {
		if strings.HasPrefix(p, "\x00") {
			return true
		}
	}
	return false
}

// TestAttacksRun performs attacks from the issue for real: the line does run
// what it hides (the control), and its permission patterns are opaque, so a
// host with `allow = ["bash.run:echo"]` would never auto-allow it.
func TestAttacksRun(t *testing.T) {
	project := t.TempDir()
	p := sdktest.StartInProcess(t, bash.New(), sdktest.WithProjectDir(project))
	tests := []struct{ name, line string }{
		{"arithmetic", `x='a[$(touch MARKER)]'; echo $((x))`},
		{"prompt expansion", `x='$(touch MARKER)'; echo ${x@P}`},
		{"indirect expansion", `x='a[$(touch MARKER)]'; echo ${!x}`},
		{"[[ -eq ]]", `x='a[$(touch MARKER)]'; [[ $x -eq 0 ]]; echo`},
		{"printf -v subscript", `printf -v 'a[$(touch MARKER)]' x; echo`},
		{"variable command", `c=touch; $c MARKER`},
		{"relative command", `mkdir -p tools && ln -sf "$(command -v touch)" tools/echo && ./tools/echo MARKER`},
		{"PATH prefix", `mkdir -p tools && ln -sf "$(command -v touch)" tools/ls && PATH=./tools:$PATH ls MARKER`},
		// Found from outside: under a rule allowing only git, split or
		// sort, each ran any command.
		{"git fsmonitor from the repo's config", `rm -rf .git && git init -q . && cp .git/config cfg && printf '[core]\n\tfsmonitor = "touch MARKER; false"\n' >> cfg && mv cfg .git/config && git status --short`},
		{"split --filter", `echo x > in.txt && split --filter='touch MARKER' in.txt`},
		// Round 14: the dynamic loader ran rm under a deny rule for rm.
		// Round 15: program runners that ran rm under a deny rule for rm.
		{"setarch", `setarch "$(uname -m)" touch MARKER`},
		{"logsave", `logsave /dev/null touch MARKER`},
		{"dynamic loader named", `/lib64/ld-linux-x86-64.so.2 "$(command -v touch)" MARKER`},
		{"sort --compress-program", `printf '#!/bin/sh\ntouch MARKER\ncat\n' > c.sh && chmod +x c.sh && seq 40 > in.txt && sort -S 1K --compress=./c.sh -T . in.txt > /dev/null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			marker := filepath.Join(project, "MARKER")
			_ = os.Remove(marker)
			t.Cleanup(func() { _ = os.RemoveAll(filepath.Join(project, "tools")) })
			pats := p.PermissionPatterns("run", map[string]any{"command": tt.line})
			if !isOpaque(pats) {
				t.Errorf("PermissionPattern(%q) = %q, want an opaque pattern", tt.line, pats)
			}
			p.Call("run", map[string]any{"command": tt.line})
			if _, err := os.Stat(marker); err != nil {
				t.Errorf("control: running %q did not create the marker (%v), so the test shows nothing", tt.line, err)
			}
		})
	}
	t.Run("control: plain echo", func(t *testing.T) {
		if pats := p.PermissionPatterns("run", map[string]any{"command": "echo hi > out.txt"}); strings.Join(pats, ",") != "echo" {
			t.Errorf("PermissionPattern(echo hi > out.txt) = %q, want [echo]", pats)
		}
	})
}

// TestProtectedRedirect runs redirections into a protected file: refused,
// and the file is unchanged; the same line with the file not protected
// does change it.
func TestProtectedRedirect(t *testing.T) {
	hostDir := t.TempDir()
	prot := filepath.Join(hostDir, "permissions.json")
	if err := os.WriteFile(prot, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDirect(t, []string{hostDir}, nil)
	link := filepath.Join(d.project, "link")
	if err := os.Symlink(hostDir, link); err != nil {
		t.Fatal(err)
	}
	lines := map[string]string{
		"absolute":         "echo x > " + prot,
		"append":           "echo x >> " + prot,
		"clobber":          "echo x >| " + prot,
		"all":              "echo x &> " + prot,
		"read-write":       "echo x 1<> " + prot,
		"read":             "cat < " + prot,
		"through a link":   "echo x > link/permissions.json",
		"new file":         "echo x > link/new.json",
		"the dir itself":   "echo x > " + hostDir,
		"nested bash -c":   "bash -c 'echo x > " + prot + "'",
		"eval":             "eval 'echo x > " + prot + "'",
		"after cd":         "cd " + hostDir + " && echo x > permissions.json",
		"in a subshell":    "(echo x) > " + prot,
		"unclean":          "echo x > " + hostDir + "/../" + filepath.Base(hostDir) + "/permissions.json",
		"dup to file name": "echo x >& " + prot,
	}
	for name, line := range lines {
		t.Run(name, func(t *testing.T) {
			for _, tool := range []string{"run", "start"} {
				res := d.call("a", tool, map[string]any{"command": line})
				if got := res.Text(); !res.IsError || !strings.Contains(got, "protected") || !strings.Contains(got, hostDir) {
					t.Errorf("%s %q = %q, want refused naming %s", tool, line, got, hostDir)
				}
			}
			if b, _ := os.ReadFile(prot); string(b) != "{}" {
				t.Errorf("%q changed the protected file to %q", line, b)
			}
			if _, err := os.Stat(filepath.Join(hostDir, "new.json")); err == nil {
				t.Errorf("%q created a file in the protected directory", line)
			}
		})
	}
	t.Run("control: not protected", func(t *testing.T) {
		open := startDirect(t, nil, nil)
		res := open.call("a", "run", map[string]any{"command": "echo x > " + prot})
		if res.IsError {
			t.Fatalf("run = %q", res.Text())
		}
		if b, _ := os.ReadFile(prot); string(b) != "x\n" {
			t.Errorf("unprotected file = %q, want the write to land", b)
		}
	})
}

// TestJobOwners shows that one owner can neither list, read nor kill
// another's job.
func TestJobOwners(t *testing.T) {
	d := startDirect(t, nil, nil)
	if got := d.call("alice", "start", map[string]any{"command": "echo secret; sleep 100"}).Text(); !strings.Contains(got, "j1") {
		t.Fatalf("start = %q", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(d.call("alice", "output", map[string]any{"job": "j1", "offset": 0}).Text(), "secret") {
		if time.Now().After(deadline) {
			t.Fatal("alice's job printed nothing")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, other := range []string{"bob", ""} {
		if got := d.call(other, "jobs", nil).Text(); got != "No jobs." {
			t.Errorf("jobs as %q = %q, want none", other, got)
		}
		for _, tool := range []string{"output", "kill"} {
			res := d.call(other, tool, map[string]any{"job": "j1"})
			if got := res.Text(); !res.IsError || !strings.Contains(got, `no job "j1"`) || strings.Contains(got, "secret") {
				t.Errorf("%s j1 as %q = %q, want no such job", tool, other, got)
			}
		}
	}
	if got := d.call("alice", "jobs", nil).Text(); !strings.Contains(got, "j1\trunning") {
		t.Errorf("alice's jobs = %q, want j1 still running", got)
	}
	// Bob's own first job is his j1, and kills only his.
	d.call("bob", "start", map[string]any{"command": "sleep 100"})
	if got := d.call("bob", "kill", map[string]any{"job": "j1"}).Text(); !strings.Contains(got, "killed") {
		t.Errorf("bob kill j1 = %q", got)
	}
	if got := d.call("alice", "jobs", nil).Text(); !strings.Contains(got, "j1\trunning") {
		t.Errorf("after bob killed his j1, alice's jobs = %q, want hers running", got)
	}
	if got := d.call("alice", "kill", map[string]any{"job": "j1"}).Text(); !strings.Contains(got, "killed") {
		t.Errorf("alice kill j1 = %q", got)
	}
}

// A symlink planted in place of the saved-outputs folder (by a command
// that can write the plugin's own state folder) is removed, not followed,
// and does not stop the next start.
func TestPlantedOutputsLinkIsNotFollowed(t *testing.T) {
	data, elsewhere := t.TempDir(), t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(data, "outputs")); err != nil {
		t.Fatal(err)
	}
	p := sdktest.StartInProcess(t, bash.New(), sdktest.WithServerName("bash"), sdktest.WithDataDir(data))
	fi, err := os.Lstat(filepath.Join(data, "outputs"))
	if err != nil || !fi.IsDir() {
		t.Fatalf("outputs is %v (%v), want a real folder", fi, err)
	}
	if res := p.Call("run", map[string]any{"command": "seq 1 100000"}); res.IsError {
		t.Fatal(res.Text())
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) > 0 {
		t.Errorf("saved outputs went through the planted link: %v", ents)
	}
}

// TestSavedOutputsAreBoundedTogether: saved outputs may not fill the disk
// (found from outside: 69 calls left 4.2 GB); past max_saved_total_bytes
// the oldest go before a new one is written.
func TestSavedOutputsAreBoundedTogether(t *testing.T) {
	const perCall, total = 200_000, 500_000
	for _, tc := range []struct {
		name     string
		settings map[string]any
		bounded  bool
	}{
		{"bounded", map[string]any{"output_cap": 1000, "max_saved_total_bytes": total}, true},
		// Control: with a bound larger than the calls write, every output
		// stays, so the bound above is what removed them.
		{"control", map[string]any{"output_cap": 1000, "max_saved_total_bytes": 100 * perCall}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			p := sdktest.StartInProcess(t, bash.New(), sdktest.WithServerName("bash"), sdktest.WithDataDir(data), sdktest.WithSettings(tc.settings))
			for i := 0; i < 8; i++ {
				if res := p.Call("run", map[string]any{"command": "head -c 200000 /dev/zero | tr '\\0' x"}); res.IsError {
					t.Fatal(res.Text())
				}
			}
			ents, err := os.ReadDir(filepath.Join(data, "outputs"))
			if err != nil {
				t.Fatal(err)
			}
			var sum int64
			for _, e := range ents {
				if fi, err := e.Info(); err == nil {
					sum += fi.Size()
				}
			}
			switch {
			case tc.bounded && sum > total+perCall:
				t.Errorf("saved outputs hold %d bytes in %d files, want at most %d (the bound) + %d (the one being written)", sum, len(ents), total, perCall)
			case !tc.bounded && len(ents) != 8:
				t.Errorf("control: %d saved outputs, want all 8 (%d bytes)", len(ents), sum)
			}
		})
	}
}

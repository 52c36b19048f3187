package filesystem_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/plugins/filesystem"
	"github.com/switchboard-mcp/switchboard/sdk/sdktest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction(sdktest.ReattachWaitFunction))
}

func TestReadTextFile(t *testing.T) {
	base := t.TempDir()
	project := filepath.Join(base, "project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(project, "f.txt"), "1\n2\n3\n4\n5\n")
	write(filepath.Join(base, "secret.txt"), "top secret")
	if err := os.Symlink(filepath.Join(base, "secret.txt"), filepath.Join(project, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(base, "project-other"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(base, "project-other", "x.txt"), "prefix sibling")

	p := sdktest.StartInProcess(t, filesystem.New(), sdktest.WithProjectDir(project))
	tests := []struct {
		name    string
		args    map[string]any
		want    string
		isError bool
	}{
		{"whole file", map[string]any{"path": "f.txt"}, "1\n2\n3\n4\n5\n", false},
		{"head", map[string]any{"path": "f.txt", "head": 2}, "1\n2", false},
		{"tail", map[string]any{"path": "f.txt", "tail": 2}, "4\n5", false},
		{"offset and limit", map[string]any{"path": "f.txt", "offset": 2, "limit": 2}, "2\n3", false},
		{"absolute inside", map[string]any{"path": filepath.Join(project, "f.txt"), "head": 1}, "1", false},
		{"head and tail", map[string]any{"path": "f.txt", "head": 1, "tail": 1}, "not both", true},
		{"outside", map[string]any{"path": "../secret.txt"}, "outside", true},
		{"symlink out", map[string]any{"path": "link.txt"}, "outside", true},
		{"string-prefix sibling", map[string]any{"path": "../project-other/x.txt"}, "outside", true},
		{"missing", map[string]any{"path": "nope.txt"}, "no such file", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := p.Call("read_text_file", tt.args)
			got := sdktest.Text(res)
			if res.GetIsError() != tt.isError {
				t.Fatalf("read_text_file(%v) isError = %v (%q), want %v", tt.args, res.GetIsError(), got, tt.isError)
			}
			if tt.isError && !strings.Contains(got, tt.want) || !tt.isError && got != tt.want {
				t.Errorf("read_text_file(%v) = %q, want %q", tt.args, got, tt.want)
			}
			if strings.Contains(got, "top secret") || strings.Contains(got, "prefix sibling") {
				t.Errorf("read_text_file(%v) leaked outside content: %q", tt.args, got)
			}
		})
	}
	if tl := p.Tool("read_text_file"); !tl.GetAnnotations().GetReadOnlyHint() {
		t.Error("read_text_file is not marked read-only")
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDeniedPathsLeftOutOfFolderTools: a deny rule with a path pattern
// refuses a call that names the path, and the tools that read or list a
// folder (grep, search_files, directory_tree, list_directory) leave out
// what it matches. Red team round 18: with "filesystem.*:*.env" denied,
// read_text_file .env was refused under every spelling, and grep over the
// project printed the secret in it. The control, the same calls without
// the rule, shows the files are there to be found.
func TestDeniedPathsLeftOutOfFolderTools(t *testing.T) {
	calls := []struct {
		tool string
		args map[string]any
	}{
		{"filesystem__grep", map[string]any{"pattern": "="}},
		{"filesystem__grep", map[string]any{"pattern": "=", "path": "sub"}},
		{"filesystem__search_files", map[string]any{"path": ".", "pattern": "**/*env*"}},
		{"filesystem__directory_tree", map[string]any{"path": "."}},
		{"filesystem__list_directory", map[string]any{"path": "."}},
		{"filesystem__list_directory_with_sizes", map[string]any{"path": "sub"}},
	}
	for _, denied := range []bool{false, true} {
		rules := `permissions { default = "allow" }`
		if denied {
			rules = `permissions {
  default = "allow"
  deny    = ["filesystem.*:*.env", "filesystem.*:secrets/*"]
}`
		}
		e := setupWith(t, rules)
		for f, body := range map[string]string{".env": "API_KEY=dotenv-secret-777\n", "sub/prod.env": "K=sub-env-888\n", "sub/app.cfg": "mode=fine\n", "secrets/keys.txt": "FOLDERSECRET=abc\n"} {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(e.project, f)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(e.project, f), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		c, _ := mcpClient(t, e)
		initialize(t, c)
		for _, call := range calls {
			got, isErr := mustCall(t, c, call.tool, call.args)
			if isErr {
				t.Errorf("denied=%v: %s %v failed: %s", denied, call.tool, call.args, got)
				continue
			}
			leaked := strings.Contains(got, "dotenv-secret-777") || strings.Contains(got, "sub-env-888") || strings.Contains(got, ".env") || strings.Contains(got, "prod.env")
			if denied && leaked {
				t.Errorf("%s %v with *.env denied shows a denied file:\n%s", call.tool, call.args, got)
			}
			if !denied && !leaked {
				t.Errorf("control: %s %v without the rule shows no .env file:\n%s", call.tool, call.args, got)
			}
			// What is not denied is still there.
			if (call.tool == "filesystem__grep" || call.tool == "filesystem__list_directory_with_sizes") && !strings.Contains(got, "app.cfg") {
				t.Errorf("denied=%v: %s %v lost app.cfg:\n%s", denied, call.tool, call.args, got)
			}
		}
		if denied {
			if got, isErr := mustCall(t, c, "filesystem__read_text_file", map[string]any{"path": "sub/prod.env"}); !isErr || strings.Contains(got, "sub-env-888") {
				t.Errorf("read_text_file of a denied path = %q", got)
			}
		}
		// A folder holding denied files is not moved where the rule does not
		// reach (red team round 19: secrets moved to opened, then read).
		got, isErr := mustCall(t, c, "filesystem__move_file", map[string]any{"source": "secrets", "destination": "opened"})
		_, statErr := os.Stat(filepath.Join(e.project, "opened", "keys.txt"))
		if denied && (!isErr || statErr == nil) {
			t.Errorf("moving a folder of denied files: %q (moved: %v)", got, statErr == nil)
		}
		if !denied && (isErr || statErr != nil) {
			t.Errorf("control: moving secrets without the rule: %q, %v", got, statErr)
		}
		_ = c.Close()
	}
}

package builtins

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/host/internal/pathguard"
)

// repoRoot is the module's root, three folders up.
const repoRoot = "../../.."

// TestMakefilePlugins checks that the Makefile builds a standalone binary
// for exactly the built-ins listed here, in the same order.
func TestMakefilePlugins(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^PLUGINS\s*:?=(.*)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile has no PLUGINS := line")
	}
	got := strings.Fields(string(m[1]))
	if diff := cmp.Diff(Names(), got); diff != "" {
		t.Errorf("Makefile PLUGINS differs from builtins.Names() (-go +Makefile):\n%s", diff)
	}
}

// TestStandaloneMains checks that each built-in has the main package the
// Makefile builds as its standalone binary.
func TestStandaloneMains(t *testing.T) {
	for _, b := range All() {
		t.Run(b.Name, func(t *testing.T) {
			main := filepath.Join(repoRoot, "plugins", b.Name, "cmd", b.Binary(), "main.go")
			if _, err := os.Stat(main); err != nil {
				t.Errorf("no standalone main for %s: %v", b.Name, err)
			}
		})
	}
}

func TestTable(t *testing.T) {
	for _, b := range All() {
		t.Run(b.Name, func(t *testing.T) {
			if b.New == nil || b.NewSettings == nil || b.Grants == nil {
				t.Fatalf("%s: New, NewSettings and Grants must all be set", b.Name)
			}
			if got, ok := Lookup(b.Name); !ok || got.Name != b.Name {
				t.Errorf("Lookup(%q) = %v, %v, want the entry", b.Name, got.Name, ok)
			}
			if v := b.NewSettings(); v == nil {
				t.Errorf("%s: NewSettings() = nil, want a pointer to its settings", b.Name)
			}
		})
	}
	if _, ok := Lookup("nope"); ok {
		t.Error(`Lookup("nope") found an entry`)
	}
	if names := Names(); len(slices.Compact(slices.Sorted(slices.Values(names)))) != len(names) {
		t.Errorf("Names() = %v has duplicates", names)
	}
}

func TestGrants(t *testing.T) {
	gitEnv := map[string]string{"PATH": pathguard.PathOutside(os.Getenv("PATH"), []string{"/p"})}
	tests := []struct {
		name     string
		settings string
		want     Grants
	}{
		{"filesystem", `{"roots":["/extra"]}`, Grants{Write: []string{"/p", "/extra"}}},
		{"filesystem", `{}`, Grants{Write: []string{"/p"}}},
		{"bash", `{}`, Grants{Write: []string{"/p"}, Processes: BashProcesses}},
		{"git", `{}`, Grants{Write: []string{"/p"}, ExecOnly: true, Exec: gitPrograms([]string{"/p"}), Env: gitEnv, Memory: GitMemory}},
		{"git", `{"allow_hooks":true}`, Grants{Write: []string{"/p"}, Env: gitEnv, Memory: GitMemory}},
		{"git", `{"allow_filters":true}`, Grants{Write: []string{"/p"}, Env: gitEnv, Memory: GitMemory}},
		{"web", `{}`, Grants{Network: true}},
		{"switchboard", `{}`, Grants{}},
	}
	for _, tt := range tests {
		t.Run(tt.name+tt.settings, func(t *testing.T) {
			b, ok := Lookup(tt.name)
			if !ok {
				t.Fatalf("Lookup(%q) found nothing", tt.name)
			}
			if diff := cmp.Diff(tt.want, b.Grants("/p", []byte(tt.settings))); diff != "" {
				t.Errorf("Grants(%q, %s) (-want +got):\n%s", "/p", tt.settings, diff)
			}
		})
	}
}

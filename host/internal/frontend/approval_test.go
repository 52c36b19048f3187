package frontend

import (
	"path/filepath"
	"testing"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
)

// TestAlwaysAllowStoresLiteral performs the attack through Apply: the
// person answers "always allow" for a file literally named "*"; afterwards,
// and after a restart (the saved file reloaded), a call on another path
// still needs approval.
func TestAlwaysAllowStoresLiteral(t *testing.T) {
	store := filepath.Join(t.TempDir(), "permissions.json")
	p := &registry.Policy{Default: "ask"}
	if err := p.Load(store); err != nil {
		t.Fatal(err)
	}
	d := p.Decide("filesystem.read_file", []string{"*"})
	if _, err := Apply(t.Context(), p, "filesystem.read_file", d.Rules, AlwaysAllow); err != nil {
		t.Fatalf("Apply(always allow) = %v", err)
	}
	restarted := &registry.Policy{Default: "ask"}
	if err := restarted.Load(store); err != nil {
		t.Fatal(err)
	}
	for name, pol := range map[string]*registry.Policy{"same host": p, "after restart": restarted} {
		if got := pol.Decide("filesystem.read_file", []string{"*"}); got.Verdict != "allow" {
			t.Errorf("%s: the approved file = %+v, want allow", name, got)
		}
		if got := pol.Decide("filesystem.read_file", []string{"/home/me/.ssh/id_ed25519"}); got.Verdict != "ask" {
			t.Errorf("%s: another path = %+v, want ask (saved %q)", name, got, d.Rules)
		}
	}
}

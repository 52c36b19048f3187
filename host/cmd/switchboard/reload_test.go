package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

type hostStatus struct {
	PID     int `json:"pid"`
	Servers []struct {
		Name, Status string
		PID          int
		Restarts     int
	} `json:"servers"`
}

func status(t *testing.T, e env) hostStatus {
	t.Helper()
	out, errOut, code := run(t, e, "status", "--json", "--config", e.config)
	if code != 0 {
		t.Fatalf("status = %d %s", code, errOut)
	}
	var all []hostStatus
	if err := json.Unmarshal([]byte(out), &all); err != nil || len(all) != 1 {
		t.Fatalf("status --json = %q (%v)", out, err)
	}
	return all[0]
}

func pids(hs hostStatus) map[string]int {
	m := map[string]int{}
	for _, s := range hs.Servers {
		m[s.Name] = s.PID
	}
	return m
}

func writeConfig(t *testing.T, e env, extra string) {
	t.Helper()
	cfg := fmt.Sprintf(`
project_dir  = "project"
data_dir     = "state"
watch_config = false
builtin "filesystem" {}
builtin "bash" { %s }
plugin "fx" {
  path = %q
  env  = { FIXTURE_CANCEL_MARKER = %q }
  sandbox { write = [%q] }   # where the fixture leaves its cancellation marker
}
%s
`, "", e.bins.TestPlugin, e.marker, filepath.Dir(e.marker), extra)
	if err := os.WriteFile(e.config+".tmp", []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(e.config+".tmp", e.config); err != nil {
		t.Fatal(err)
	}
}

func TestReloadAndControl(t *testing.T) {
	e := setupWith(t, "watch_config = false")
	c, _ := mcpClient(t, e)
	initialize(t, c)
	before := readyPIDs(t, e)
	for _, n := range []string{"filesystem", "bash", "git", "web", "hello", "fx"} {
		if before[n] == 0 {
			t.Fatalf("status lacks %s: %v", n, before)
		}
	}

	// restart: a fresh process now.
	if out, errOut, code := run(t, e, "restart", "--config", e.config, "git"); code != 0 || !strings.Contains(out, "restarting git") {
		t.Fatalf("restart = %d %q %q", code, out, errOut)
	}
	eventually(10*time.Second, func() bool {
		now := pids(status(t, e))
		return now["git"] != 0 && now["git"] != before["git"]
	})
	if now := pids(status(t, e)); now["git"] == before["git"] || now["fx"] != before["fx"] {
		t.Errorf("after restart git: git %d→%d, fx %d→%d", before["git"], now["git"], before["fx"], now["fx"])
	}

	// reload: remove git, web and hello; add fx2; change bash; deny fx.echo.
	writeConfig(t, e, `plugin "fx2" { path = "`+e.bins.TestPlugin+`" }
permissions {
  deny = ["fx.echo"]
}`)
	if err := os.WriteFile(e.config, []byte(strings.Replace(mustRead(t, e.config), `builtin "bash" {  }`, `builtin "bash" { timeout = "1m" }`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, e, "reload", "--config", e.config)
	if code != 0 || !strings.Contains(out, "added [fx2]") || !strings.Contains(out, "removed [git hello web]") || !strings.Contains(out, "restarted [bash]") || !strings.Contains(out, "permissions changed true") {
		t.Fatalf("reload = %d %q %q", code, out, errOut)
	}
	after := readyPIDs(t, e)
	if after["fx"] != before["fx"] || after["filesystem"] != before["filesystem"] {
		t.Errorf("unchanged servers were restarted: fx %d→%d, filesystem %d→%d", before["fx"], after["fx"], before["filesystem"], after["filesystem"])
	}
	if _, ok := after["git"]; ok {
		t.Error("git still runs after being removed")
	}
	if after["fx2"] == 0 {
		t.Error("fx2 was not started")
	}
	fixtures.WaitGone([]int{before["git"], before["web"], before["hello"]}, 10*time.Second)
	if got, isErr := mustCall(t, c, "fx__echo", map[string]any{"text": "x"}); !isErr || !strings.Contains(got, `rule "fx.echo"`) {
		t.Errorf("after the permission reload fx__echo = %q", got)
	}
	if got, isErr := mustCall(t, c, "fx2__echo", map[string]any{"text": "new"}); isErr || got != "new" {
		t.Errorf("fx2__echo = %q", got)
	}

	// An invalid config changes nothing.
	valid := mustRead(t, e.config)
	if err := os.WriteFile(e.config, []byte(valid+"\nbogus = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = run(t, e, "reload", "--config", e.config)
	if code != 1 || !strings.Contains(errOut, `An argument named "bogus" is not expected here`) || !strings.Contains(errOut, "keeps running") {
		t.Errorf("reload of an invalid config = %d %q", code, errOut)
	}
	if still := readyPIDs(t, e); fmt.Sprint(still) != fmt.Sprint(after) {
		t.Errorf("an invalid reload changed the servers: %v → %v", after, still)
	}
	if got, isErr := mustCall(t, c, "fx2__echo", map[string]any{"text": "still"}); isErr || got != "still" {
		t.Errorf("after an invalid reload fx2__echo = %q", got)
	}

	// A config that does not even parse hides where the host is: reload
	// says what is wrong with the config, not that no host runs.
	if err := os.WriteFile(e.config, []byte(valid+"\nbuiltin \"git\" {\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = run(t, e, "reload", "--config", e.config)
	if code != 1 || !strings.Contains(errOut, "Unclosed configuration block") || !strings.Contains(errOut, "keeps its previous config") || strings.Contains(errOut, "no running switchboard serve") {
		t.Errorf("reload of a config that does not parse = %d %q", code, errOut)
	}

	// Settings a built-in refuses are refused by the reload too (the same
	// check as validate), before anything changes: bash keeps running
	// with its old settings and is not restarted into a retry loop.
	if err := os.WriteFile(e.config, []byte(strings.Replace(valid, `timeout = "1m"`, `timeout = 30`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = run(t, e, "reload", "--config", e.config)
	if code != 1 || !strings.Contains(errOut, `Built-in "bash" refuses its settings`) || !strings.Contains(errOut, "keeps running") {
		t.Errorf("reload to refused bash settings = %d %q", code, errOut)
	}
	if still := readyPIDs(t, e); fmt.Sprint(still) != fmt.Sprint(after) {
		t.Errorf("a refused reload changed the servers: %v → %v", after, still)
	}
}

// validate runs the same checks as the host: settings a built-in refuses
// and names the host would refuse are errors, with the block's line.
func TestValidateAgreesWithTheHost(t *testing.T) {
	for _, tt := range []struct{ name, block, want string }{
		{"bash timeout without a unit", `builtin "bash" { timeout = 30 }`, `Built-in "bash" refuses its settings`},
		{"web network that is not a CIDR", `builtin "web" { allow_private_networks = ["intranet"] }`, `Built-in "web" refuses its settings`},
		{"missing filesystem root", `builtin "filesystem" { roots = ["/no/such/root"] }`, `Built-in "filesystem" refuses its settings`},
		{"plugin named like a built-in", `plugin "git" { path = "/bin/true" }`, `Plugin named like a built-in`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "project"), 0o755); err != nil {
				t.Fatal(err)
			}
			cfg := filepath.Join(dir, "config.hcl")
			if err := os.WriteFile(cfg, []byte("project_dir = \"project\"\ndata_dir = \"state\"\n"+tt.block+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			out, errOut, code := run(t, env{bins: fixtures.Build(t), config: cfg}, "validate", "--config", cfg)
			if code != 1 || !strings.Contains(errOut, tt.want) || !strings.Contains(errOut, "config.hcl:3") {
				t.Errorf("validate = %d %q %q, want exit 1 naming %q at config.hcl:3", code, out, errOut, tt.want)
			}
		})
	}
}

func TestStatusWithoutHost(t *testing.T) {
	e := setup(t)
	_, errOut, code := run(t, e, "status", "--config", e.config)
	if code != 2 || !strings.Contains(errOut, "no running switchboard serve") {
		t.Errorf("status with no host = %d %q", code, errOut)
	}
}

// readyPIDs waits until every server is ready and returns their pids.
func readyPIDs(t *testing.T, e env) map[string]int {
	t.Helper()
	var st hostStatus
	eventually(15*time.Second, func() bool {
		st = status(t, e)
		for _, s := range st.Servers {
			if s.Status != "ready" && s.Status != "disabled" {
				return false
			}
		}
		return true
	})
	return pids(st)
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSIGHUPReloads: SIGHUP makes serve re-read its config.
func TestSIGHUPReloads(t *testing.T) {
	e := setupWith(t, "watch_config = false")
	c, cmd := mcpClient(t, e)
	initialize(t, c)
	writeConfig(t, e, `builtin "git" { enabled = false }`)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if !eventually(15*time.Second, func() bool {
		names := map[string]string{}
		for _, s := range status(t, e).Servers {
			names[s.Name] = s.Status
		}
		_, hello := names["hello"]
		return !hello && names["git"] == "disabled"
	}) {
		t.Errorf("SIGHUP did not reload: %+v", status(t, e))
	}
}

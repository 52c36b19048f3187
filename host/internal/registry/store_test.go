package registry

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
)

func TestRememberSurvivesReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "permissions.json")
	p := &Policy{Default: Ask}
	if err := p.Load(path); err != nil {
		t.Fatal(err)
	}
	if d := p.Decide("bash.run", []string{"curl"}); d.Verdict != Ask || describeAll(d.Pending) != "bash.run:curl" {
		t.Fatalf("before: %+v", d)
	}
	if err := p.Remember([]string{"bash.run:curl"}, true); err != nil {
		t.Fatal(err)
	}
	if err := p.Remember([]string{"bash.run:rm"}, false); err != nil {
		t.Fatal(err)
	}
	q := &Policy{Default: Ask}
	if err := q.Load(path); err != nil {
		t.Fatal(err)
	}
	if d := q.Decide("bash.run", []string{"curl"}); d.Verdict != Allow {
		t.Errorf("after reload, curl = %+v, want allow", d)
	}
	if err := q.Check("bash.run", []string{"curl", "rm"}); !errors.Is(err, protocol.ErrPermissionDenied) || !strings.Contains(err.Error(), `"bash.run:rm"`) {
		t.Errorf("after reload, curl && rm = %v, want denied by the saved rule", err)
	}
	if err := os.WriteFile(path, []byte("{broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := (&Policy{}).Load(path); err == nil || !strings.Contains(err.Error(), "fix or delete") {
		t.Errorf("Load(broken) = %v", err)
	}
}

func TestAuditRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := OpenAudit(path, 4096, 2, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if err := a.Write(AuditRecord{Tool: "x.y", Decision: "allow", Outcome: "ok", Client: strings.Repeat("c", 50)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, f := range []string{path, path + ".1", path + ".2"} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if st.Size() > 4096 {
			t.Errorf("%s is %d bytes, over the 4096 limit", f, st.Size())
		}
		fh, _ := os.Open(f)
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			total++
		}
		fh.Close()
	}
	if _, err := os.Stat(path + ".3"); err == nil {
		t.Error("more rotated files than keep")
	}
	if total == 0 || total >= 100 {
		t.Errorf("%d lines kept across the files; want the newest ones only", total)
	}
}

func TestValidateArgs(t *testing.T) {
	sch, err := compileSchema("t.x", []byte(`{"type":"object","properties":{"n":{"type":"integer","minimum":1},"tags":{"type":"array","items":{"type":"string"}}},"required":["n"],"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args, want string
	}{
		{`{"n": 2, "tags": ["a"]}`, ""},
		{`{"n": "2"}`, "argument /n: got string, want integer"},
		{`{"n": 0}`, "argument /n: minimum"},
		{`{}`, "missing property 'n'"},
		{`{"n": 1, "tags": [1]}`, "argument /tags/0"},
		{`{"n": 1, "extra": true}`, "additional properties 'extra'"},
		{`[1]`, "got array, want object"},
	}
	for _, tt := range tests {
		err := validateArgs("t.x", sch, []byte(tt.args))
		if tt.want == "" {
			if err != nil {
				t.Errorf("validateArgs(%s) = %v", tt.args, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, protocol.ErrInvalidArguments) {
			t.Errorf("validateArgs(%s) = %v, want %q", tt.args, err, tt.want)
		}
	}
	if _, err := compileSchema("t.remote", []byte(`{"$ref": "https://example.com/s.json"}`)); err == nil {
		t.Error("a schema with a remote $ref compiled; it must not fetch anything")
	}
}

// TestLoadRefusesWritablePermissions: a permissions.json another user can
// write could allow anything; it is refused, and its rules do not apply.
func TestLoadRefusesWritablePermissions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "permissions.json")
	if err := os.WriteFile(path, []byte(`{"version":1,"allow":["bash.run"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	p := &Policy{Default: Ask}
	err := p.Load(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "chmod go-w") {
		t.Fatalf("Load(0666 file) = %v, want a refusal naming %s and the chmod", err, path)
	}
	if d := p.Decide("bash.run", []string{"rm -rf /"}); d.Verdict != Ask {
		t.Errorf("rules of a refused file apply: %+v", d)
	}
	// Control: the same file, private, is read.
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.Load(path); err != nil {
		t.Fatal(err)
	}
	if d := p.Decide("bash.run", []string{"rm -rf /"}); d.Verdict != Allow {
		t.Errorf("control: the private file's rule did not apply: %+v", d)
	}
}

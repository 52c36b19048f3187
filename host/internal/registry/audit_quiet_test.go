package registry

import (
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/quietio"
)

// Once a quiet write to the audit log was slow (another process writing a
// gigabyte to the same file held it, in the red team's attack), every
// later file of the log, after any number of rotations, is written the
// ordinary way: a slow raw write holds the host's only scheduler slot.
func TestAuditStaysLoudAfterASlowWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := OpenAudit(path, 1024, 2, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	quietWriter := func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.w != io.Writer(a.f)
	}
	if !quietWriter() {
		t.Skip("the temporary directory is not on a local disk file system: nothing is written quietly")
	}
	restore := quietio.SetSlowWriteForTest(-1) // every write is slow
	rec := AuditRecord{Tool: "x.y", Decision: "allow", Outcome: "ok", Client: strings.Repeat("c", 300)}
	if err := a.Write(rec); err != nil {
		t.Fatal(err)
	}
	restore()
	// Some ten rotations.
	for range 30 {
		if err := a.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if quietWriter() {
		t.Error("after rotations, the audit log is written quietly again; want the ordinary way for good after a slow write")
	}
}

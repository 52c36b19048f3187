package sharedstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/host/internal/sharedstore"
	"github.com/switchboard-mcp/switchboard/host/internal/sharedstore/pgtest"
)

func open(t *testing.T, dsn string) *sharedstore.Store {
	t.Helper()
	s, err := sharedstore.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestCheckDSN(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"", "connection string is empty"},
		{"  ", "connection string is empty"},
		{"postgres://u:s3cret@db:notaport/x", "is not valid"},
		{"mysql://u@db/x", "is not valid"},
		{"postgres://switchboard@db.internal:5432/switchboard?sslmode=require", ""},
		{"host=/run/postgresql user=sb dbname=sb", ""},
	} {
		err := sharedstore.CheckDSN(tc.dsn)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckDSN(%q) = %v, want nil", tc.dsn, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("CheckDSN(%q) = %v, want %q", tc.dsn, err, tc.want)
		case err != nil && strings.Contains(err.Error(), "s3cret"):
			t.Errorf("CheckDSN(%q) repeats the password: %v", tc.dsn, err)
		}
	}
}

// An unreachable database: Open fails at once with what to check, and the
// error wraps ErrUnreachable.
func TestOpenUnreachable(t *testing.T) {
	dir := t.TempDir() // no server listens here
	_, err := sharedstore.Open(t.Context(), "host="+dir+" port=5432 user=postgres password=s3cret dbname=x connect_timeout=5")
	if !errors.Is(err, sharedstore.ErrUnreachable) {
		t.Fatalf("Open = %v, want ErrUnreachable", err)
	}
	for _, want := range []string{"did not answer", "check the store block's postgres connection string", "that the database is up"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Open error repeats the password: %v", err)
	}
}

// TestPostgres runs the tests that need a database on one server (each in
// a database of its own); the last stops the server.
func TestPostgres(t *testing.T) {
	pg := pgtest.Start(t)
	t.Run("migrates once", func(t *testing.T) { testOpenMigratesOnce(t, pg) })
	t.Run("decisions shared", func(t *testing.T) { testDecisionsShared(t, pg) })
	t.Run("audit durable", func(t *testing.T) { testAuditDurable(t, pg) })
	t.Run("schema per team", func(t *testing.T) { testSearchPath(t, pg) })
	t.Run("audit fallback", func(t *testing.T) { testAuditFallback(t, pg) }) // last: stops the server
}

// Two teams on one database: search_path in the connection string puts
// each one's tables in its own schema.
func testSearchPath(t *testing.T, pg *pgtest.Server) {
	dsn := pg.CreateDB(t, "teams")
	pg.Exec(t, "teams", "CREATE SCHEMA team_a; CREATE SCHEMA team_b")
	a, b := open(t, dsn+" search_path=team_a").Decisions(), open(t, dsn+" search_path=team_b").Decisions()
	if err := a.Save(t.Context(), "", []string{"fx.echo"}, true); err != nil {
		t.Fatal(err)
	}
	if allow, _, err := b.Saved(t.Context(), ""); err != nil || len(allow) != 0 {
		t.Errorf("team b's saved answers = %v, %v; want none of team a's", allow, err)
	}
	if allow, _, err := a.Saved(t.Context(), ""); err != nil || len(allow) != 1 {
		t.Errorf("team a's saved answers = %v, %v", allow, err)
	}
}

// Replicas starting together on an empty database create the schema once;
// a later start changes nothing.
func testOpenMigratesOnce(t *testing.T, pg *pgtest.Server) {
	dsn := pg.CreateDB(t, "migrate")
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := sharedstore.Open(context.Background(), dsn)
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open #%d: %v", i, err)
		}
	}
	s := open(t, dsn)
	if v, err := s.SchemaVersion(t.Context()); err != nil || v != len(sharedstore.Migrations) {
		t.Errorf("SchemaVersion = %d, %v; want %d", v, err, len(sharedstore.Migrations))
	}
	// A database a newer host migrated is refused with what to do.
	pg.Exec(t, "migrate", "UPDATE switchboard_schema SET version = 99")
	if _, err := sharedstore.Open(t.Context(), dsn); err == nil || !strings.Contains(err.Error(), "upgrade this host") {
		t.Errorf("Open on a newer schema = %v, want a refusal saying to upgrade", err)
	}
}

// An answer saved through one host's store is read by another's (two
// pools, as two processes have).
func testDecisionsShared(t *testing.T, pg *pgtest.Server) {
	dsn := pg.CreateDB(t, "decisions")
	a, b := open(t, dsn).Decisions(), open(t, dsn).Decisions()
	if allow, deny, err := b.Saved(t.Context(), ""); err != nil || len(allow)+len(deny) != 0 {
		t.Fatalf("Saved on an empty store = %v %v %v", allow, deny, err)
	}
	if err := a.Save(t.Context(), "", []string{"fx.echo", `bash.run:rm \*`}, true); err != nil {
		t.Fatal(err)
	}
	if err := a.Save(t.Context(), "", []string{"fx.env"}, false); err != nil {
		t.Fatal(err)
	}
	if err := b.Save(t.Context(), "", []string{"fx.echo"}, true); err != nil { // again: no error
		t.Fatal(err)
	}
	if err := a.Save(t.Context(), "ci", []string{"git.*"}, false); err != nil {
		t.Fatal(err)
	}
	allow, deny, err := b.Saved(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(allow, ",") != `bash.run:rm \*,fx.echo` && strings.Join(allow, ",") != `fx.echo,bash.run:rm \*` || strings.Join(deny, ",") != "fx.env" {
		t.Errorf("Saved = allow %q deny %q", allow, deny)
	}
	if _, deny, _ := b.Saved(t.Context(), "ci"); strings.Join(deny, ",") != "git.*" {
		t.Errorf("Saved(ci) deny = %q; answers are kept per owner", deny)
	}
}

// A durable write returns once the row is committed: another connection
// sees it at once. Records written together are all there.
func testAuditDurable(t *testing.T, pg *pgtest.Server) {
	dsn := pg.CreateDB(t, "audit")
	s := open(t, dsn)
	log := s.Audit(true, nil)
	defer log.Close()
	c, err := pgxpool.New(t.Context(), dsn) // another connection than the store's
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			rec := registry.AuditRecord{Time: time.Now().UTC(), Client: "ci", Tool: "fx.echo", Decision: "allow", Outcome: "ok", ArgsSize: i}
			if err := log.Write(rec); err != nil {
				t.Error(err)
				return
			}
			var n int
			if err := c.QueryRow(context.Background(), `SELECT count(*) FROM switchboard_audit WHERE caller = 'ci' AND (record->>'args_size')::int = $1`, i).Scan(&n); err != nil || n != 1 {
				t.Errorf("record %d after Write: %d rows, %v", i, n, err)
			}
		})
	}
	wg.Wait()
	var rec json.RawMessage
	var host string
	if err := c.QueryRow(t.Context(), `SELECT record, host FROM switchboard_audit LIMIT 1`).Scan(&rec, &host); err != nil {
		t.Fatal(err)
	}
	var back registry.AuditRecord
	if err := json.Unmarshal(rec, &back); err != nil || back.Tool != "fx.echo" || host != s.Host() {
		t.Errorf("stored record %s (host %q): %v", rec, host, err)
	}
}

// With the database gone, records go to the local audit file: none is
// lost, and the failure is reported.
func testAuditFallback(t *testing.T, pg *pgtest.Server) {
	dsn := pg.CreateDB(t, "fallback")
	s := open(t, dsn)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	local, err := registry.OpenAudit(path, 1<<20, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	log := s.Audit(true, local)
	var reported []error
	var mu sync.Mutex
	log.OnError(func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() })
	pg.Stop(t)
	if err := log.Write(registry.AuditRecord{Time: time.Now().UTC(), Client: "ci", Tool: "fx.lost", Outcome: "ok"}); err != nil {
		t.Fatalf("Write with the database down = %v, want nil (kept locally)", err)
	}
	_ = log.Close()
	_ = local.Close()
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), `"tool":"fx.lost"`) {
		t.Errorf("local audit file = %q, %v; want the record", b, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) == 0 || !strings.Contains(reported[0].Error(), "written to the local audit file instead") {
		t.Errorf("reported %v, want the failure", reported)
	}
}

// BenchmarkSaved is what reading the saved answers through costs a call.
func BenchmarkSaved(b *testing.B) {
	pg := pgtest.Start(b)
	dsn := pg.CreateDB(b, "bench")
	s, err := sharedstore.Open(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	d := s.Decisions()
	if err := d.Save(context.Background(), "", []string{"fx.echo", "fx.env", "git.*"}, true); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, _, err := d.Saved(context.Background(), ""); err != nil {
			b.Fatal(err)
		}
	}
}

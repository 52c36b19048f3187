// Package sharedstore keeps the state that the hosts (replicas) serving one
// config must share in PostgreSQL: the saved "always" answers
// (registry.Decisions) and the audit log (registry.AuditLog). Without a
// store block the host keeps both in files in data_dir, as before.
//
// Lifecycle: Open connects (pgx's pool), checks the server answers, and
// brings the schema up to date (Migrations, each applied once, under an
// advisory lock so replicas starting together do not race); Decisions and
// Audit hand out the two views; Ping is the readiness check; Close closes
// the pool (after the audit log is closed: it may still be writing).
//
// Saved answers are read through on every call (one indexed query), so an
// answer given on one host counts on every other from the next call on,
// with no cache to go stale. Audit records are inserted before the call is
// answered (when audit_durable, the default); calls arriving together
// share one insert.
package sharedstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Errors.
var (
	// ErrUnreachable is wrapped by Open's error when the database does not
	// answer (wrong host or port, down, refusing the login).
	ErrUnreachable = errors.New("sharedstore: database unreachable")
)

// DefaultConnectTimeout bounds Open's first connection when the DSN sets
// no connect_timeout.
const DefaultConnectTimeout = 10 * time.Second

// Store is an open shared store. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	// host names this process in what it writes (hostname:pid).
	host string
}

// CheckDSN reports whether dsn is a PostgreSQL connection string pgx can
// use (postgres://… or key=value form), without connecting. The error
// names what is wrong and never repeats the password.
func CheckDSN(dsn string) error {
	if strings.TrimSpace(dsn) == "" {
		return errors.New(`the postgres connection string is empty: set it, e.g. postgres = "postgres://switchboard@db.internal:5432/switchboard?sslmode=require", or postgres = env("SWITCHBOARD_STORE_DSN")`)
	}
	if _, err := pgxpool.ParseConfig(dsn); err != nil {
		return fmt.Errorf("the postgres connection string is not valid: %v; use postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=…] or the key=value form (host=… user=… dbname=…)", redact(err, dsn))
	}
	return nil
}

// redact is err's text without the DSN's password.
func redact(err error, dsn string) string {
	msg := err.Error()
	if cfg, perr := pgconn.ParseConfig(dsn); perr == nil && cfg.Password != "" {
		msg = strings.ReplaceAll(msg, cfg.Password, "xxxxx")
	}
	return msg
}

// Open connects to the database at dsn, checks that it answers, and brings
// the schema up to date. An unreachable database is an error wrapping
// ErrUnreachable that says what to check.
func Open(ctx context.Context, dsn string) (*Store, error) {
	if err := CheckDSN(dsn); err != nil {
		return nil, fmt.Errorf("sharedstore: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("sharedstore: %s", redact(err, dsn))
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "switchboard"
	}
	where := fmt.Sprintf("%s:%d/%s as %s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database, cfg.ConnConfig.User)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("sharedstore: %s", redact(err, dsn))
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.ConnConfig.ConnectTimeout)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%w: PostgreSQL at %s did not answer (%s): check the store block's postgres connection string, that the database is up and reachable from this machine, and that the user may log in", ErrUnreachable, where, redact(err, dsn))
	}
	s := &Store{pool: pool, host: hostID()}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

func hostID() string {
	name, err := os.Hostname()
	if err != nil || name == "" {
		name = "host"
	}
	return fmt.Sprintf("%s:%d", name, os.Getpid())
}

// Host is how this process names itself in the rows it writes.
func (s *Store) Host() string { return s.host }

// Ping reports whether the database answers (readiness).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	return nil
}

// Close closes the connections. Close the audit log first.
func (s *Store) Close() { s.pool.Close() }

// Migrations are the schema's steps, applied in order, each once; a
// database records how many it has in switchboard_schema. Append only:
// a released step never changes.
var Migrations = []string{
	// 1: saved "always" answers and the audit log.
	`CREATE TABLE switchboard_decisions (
		owner   text        NOT NULL,
		rule    text        NOT NULL,
		allow   boolean     NOT NULL,
		saved   timestamptz NOT NULL DEFAULT now(),
		host    text        NOT NULL,
		PRIMARY KEY (owner, allow, rule)
	);
	CREATE TABLE switchboard_audit (
		id       bigserial   PRIMARY KEY,
		time     timestamptz NOT NULL,
		host     text        NOT NULL,
		caller   text        NOT NULL,
		tool     text        NOT NULL,
		decision text        NOT NULL,
		outcome  text        NOT NULL,
		record   jsonb       NOT NULL
	);
	CREATE INDEX switchboard_audit_time ON switchboard_audit (time);
	CREATE INDEX switchboard_audit_caller ON switchboard_audit (caller, time);`,
}

// migrationLock is the advisory lock key held while migrating ("sbschema").
const migrationLock = 0x7362736368656d61

// migrate applies the steps the database does not have yet, in one
// transaction under an advisory lock: replicas starting together apply
// each step once, and a failed step leaves nothing half done.
func (s *Store) migrate(ctx context.Context) error {
	fail := func(err error) error {
		return fmt.Errorf("sharedstore: preparing the schema: %v (the store's user needs CREATE on the database's schema, or run a host once as a user that has it)", err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
		return fail(err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS switchboard_schema (version integer NOT NULL)`); err != nil {
		return fail(err)
	}
	var version int
	err = tx.QueryRow(ctx, `SELECT version FROM switchboard_schema`).Scan(&version)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if _, err := tx.Exec(ctx, `INSERT INTO switchboard_schema (version) VALUES (0)`); err != nil {
			return fail(err)
		}
	case err != nil:
		return fail(err)
	}
	if version > len(Migrations) {
		return fmt.Errorf("sharedstore: the database's schema is version %d, newer than this host knows (%d): upgrade this host to the version the other replicas run", version, len(Migrations))
	}
	for i := version; i < len(Migrations); i++ {
		if _, err := tx.Exec(ctx, Migrations[i]); err != nil {
			return fail(fmt.Errorf("step %d: %w", i+1, err))
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE switchboard_schema SET version = $1`, len(Migrations)); err != nil {
		return fail(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fail(err)
	}
	return nil
}

// SchemaVersion is the number of migrations the database has.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.pool.QueryRow(ctx, `SELECT version FROM switchboard_schema`).Scan(&v)
	return v, err
}

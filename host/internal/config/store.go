package config

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/switchboard-mcp/switchboard/host/internal/sharedstore"
)

// Store is the `store {}` block: where the state that the hosts serving
// one config must share (saved "always" answers, the audit log) lives.
type Store struct {
	// Postgres is a PostgreSQL connection string; "" keeps the state in
	// files in data_dir (the default).
	Postgres string
}

// Shared reports whether the state lives in a shared store.
func (s Store) Shared() bool { return s.Postgres != "" }

// storeSchema is the `store {}` block.
type storeSchema struct {
	Postgres *string   `hcl:"postgres,optional"`
	Range    hcl.Range `hcl:",def_range"`
}

// store reads the store block: at most one, naming a PostgreSQL database
// whose connection string parses (whether it answers is checked at start).
func (b *builder) store(blocks []storeSchema) {
	for i, s := range blocks {
		if i > 0 {
			b.errAt(s.Range, "Duplicate store block", "Only one store block is allowed: the hosts on this config share one store.")
			continue
		}
		if s.Postgres == nil {
			b.errAt(s.Range, "Store without a database", `A store block names the database the hosts share: postgres = "postgres://USER@HOST:5432/DATABASE", or postgres = env("SWITCHBOARD_STORE_DSN"). Remove the block to keep the state in data_dir.`)
			continue
		}
		if err := sharedstore.CheckDSN(*s.Postgres); err != nil {
			b.errAt(b.in(s.Range, "postgres"), "Invalid store postgres", err.Error()+` (with env("NAME"), check that NAME is set where the host runs).`)
			continue
		}
		b.cfg.Store.Postgres = *s.Postgres
	}
}

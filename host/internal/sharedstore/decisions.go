package sharedstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
)

// Decisions is the store's view of the saved "always" answers.
type Decisions struct{ s *Store }

// Decisions returns the saved "always" answers (registry.Decisions).
func (s *Store) Decisions() *Decisions { return &Decisions{s: s} }

// Saved returns owner's saved rules, oldest first.
func (d *Decisions) Saved(ctx context.Context, owner string) (allow, deny []string, err error) {
	rows, err := d.s.pool.Query(ctx, `SELECT rule, allow FROM switchboard_decisions WHERE owner = $1 ORDER BY saved, rule`, owner)
	if err != nil {
		return nil, nil, fmt.Errorf("sharedstore: reading saved answers: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var rule string
		var a bool
		if err := rows.Scan(&rule, &a); err != nil {
			return nil, nil, fmt.Errorf("sharedstore: reading saved answers: %w", err)
		}
		if a {
			allow = append(allow, rule)
		} else {
			deny = append(deny, rule)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("sharedstore: reading saved answers: %w", err)
	}
	return allow, deny, nil
}

// Save adds rules to owner's saved answers, all or none.
func (d *Decisions) Save(ctx context.Context, owner string, rules []string, allow bool) error {
	b := &pgx.Batch{}
	for _, r := range rules {
		b.Queue(`INSERT INTO switchboard_decisions (owner, rule, allow, host) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`, owner, r, allow, d.s.host)
	}
	err := pgx.BeginFunc(ctx, d.s.pool, func(tx pgx.Tx) error {
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return fmt.Errorf("sharedstore: saving the answer: %w", err)
	}
	return nil
}

var _ registry.Decisions = (*Decisions)(nil)

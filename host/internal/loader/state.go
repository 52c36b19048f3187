package loader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/host/internal/sharedstore"
)

// openState opens where the host keeps its state: the saved "always"
// answers (into policy) and the audit log. Without a store block both are
// files in data_dir. With one, both live in the shared store, and the
// local audit file only takes the records the store refuses (the database
// down), so none is lost.
func openState(ctx context.Context, cfg *config.Config, policy *registry.Policy, log hclog.Logger) (registry.AuditLog, *sharedstore.Store, error) {
	permissions := filepath.Join(cfg.DataDir, PermissionsFile)
	if !cfg.Store.Shared() {
		if err := policy.Load(permissions); err != nil {
			return nil, nil, err
		}
		audit, err := registry.OpenAudit(filepath.Join(cfg.DataDir, AuditFile), cfg.AuditMaxBytes, 3, cfg.AuditDurable)
		if err != nil {
			return nil, nil, err
		}
		return audit, nil, nil
	}
	store, err := sharedstore.Open(ctx, cfg.Store.Postgres)
	if err != nil {
		return nil, nil, fmt.Errorf("store: %w", err)
	}
	local, err := registry.OpenAudit(filepath.Join(cfg.DataDir, AuditFile), cfg.AuditMaxBytes, 3, true)
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	policy.ShareDecisions(store.Decisions())
	if _, err := os.Stat(permissions); err == nil {
		log.Warn("saved answers live in the shared store; this host's own file is not read", "file", permissions)
	} else if !errors.Is(err, os.ErrNotExist) {
		log.Debug("permissions file", "error", err)
	}
	log.Info("state in the shared store", "host", store.Host())
	return &sharedAudit{Audit: store.Audit(cfg.AuditDurable, local), local: local, store: store}, store, nil
}

// sharedAudit is the shared store's audit log, closed in order: the store's
// writer (it may still write to the local file), the local file, then the
// store's connections.
type sharedAudit struct {
	*sharedstore.Audit
	local *registry.Audit
	store *sharedstore.Store
}

func (a *sharedAudit) Close() error {
	err := errors.Join(a.Audit.Close(), a.local.Close())
	a.store.Close()
	return err
}

// SharedStore is the host's shared store, or nil when its state is in
// data_dir.
func (h *Host) SharedStore() *sharedstore.Store { return h.shared }

var _ registry.AuditLog = (*sharedAudit)(nil)

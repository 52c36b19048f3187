package cli

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/host/internal/sharedstore"
)

// storeReady is the readiness check of a host with a shared store: the
// store answers. Its answer names no address (the probe skips the origin
// checks); the log has the details, once per change.
func storeReady(store *sharedstore.Store, log hclog.Logger) func(context.Context) error {
	if store == nil {
		return nil
	}
	var down atomic.Bool
	return func(ctx context.Context) error {
		if err := store.Ping(ctx); err != nil {
			if !down.Swap(true) {
				log.Error("not ready: the shared store does not answer", "error", err)
			}
			return errors.New("the shared store does not answer (the host's log says why)")
		}
		if down.Swap(false) {
			log.Info("ready: the shared store answers again")
		}
		return nil
	}
}

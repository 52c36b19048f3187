package loader

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/switchboard-mcp/switchboard/host/internal/builtins"
	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginserve"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
)

// CheckSettings hands each enabled built-in its block's settings exactly as
// the host will (the built-in's own Configure, run in this process with a
// scratch data directory), and returns an error diagnostic for each it
// refuses: a bash timeout without a unit, a web network entry that is not
// a CIDR, a filesystem root that does not exist. `validate`, a reload and
// the host's start all use it, so a config that validates is one the host
// accepts, and a reload to refused settings changes nothing.
func CheckSettings(cfg *config.Config) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, b := range cfg.Builtins {
		bi, ok := builtins.Lookup(b.Name)
		if !ok {
			continue
		}
		if err := configureBuiltin(bi, cfg, b.Settings); err != nil {
			r := b.Range
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  fmt.Sprintf("Built-in %q refuses its settings", b.Name),
				Detail:   fmt.Sprintf("%v (fix the builtin %q block)", err, b.Name),
				Subject:  &r,
			})
		}
	}
	return diags
}

func configureBuiltin(bi builtins.Builtin, cfg *config.Config, settings []byte) error {
	scratch, err := os.MkdirTemp("", "switchboard-check-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(scratch) }()
	h := pluginserve.SDK(bi.New())
	if sd, ok := h.(pluginserve.Shutdowner); ok {
		defer sd.Shutdown()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return h.Configure(ctx, &pluginv1.ConfigureRequest{
		ServerName: bi.Name, ProjectDir: cfg.ProjectDir, DataDir: scratch, HostDataDir: cfg.DataDir,
		SettingsJson: settings, ProtectedPaths: cfg.ControlPlane(), HostVersion: "check",
	})
}

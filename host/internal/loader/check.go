package loader

import (
	"errors"
	"fmt"
	"os"

	"github.com/hashicorp/hcl/v2"

	"github.com/switchboard-mcp/switchboard/host/internal/config"
	"github.com/switchboard-mcp/switchboard/host/internal/pluginstore"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
)

// Check looks for problems a valid config can still have, which only show
// when servers start: a plugin binary that is missing or not executable, or
// whose SHA-256 does not match its pin or the lock file, or a lock file
// that cannot be read. They are warnings: the file may be
// right and the binary not built yet.
func Check(cfg *config.Config) hcl.Diagnostics {
	var diags hcl.Diagnostics
	warn := func(r hcl.Range, summary, detail string) {
		rr := r
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: summary, Detail: detail, Subject: &rr})
	}
	lock, lockErr := readLock(cfg)
	if lockErr != nil {
		warn(hcl.Range{Filename: cfg.LockFile()}, "Lock file unreadable", fmt.Sprintf("%v; the host starts no plugin while it is.", lockErr))
	}
	for _, p := range cfg.Plugins {
		if lockErr == nil && p.SHA256 == "" {
			if err := lock.CheckBinary(p.Name, p.Path); errors.Is(err, pluginstore.ErrHashMismatch) {
				warn(p.Range, "Plugin binary does not match the lock file", err.Error()+"; the host will refuse to start it.")
			}
		}
		st, err := os.Stat(p.Path)
		switch {
		case err != nil:
			warn(p.Range, "Plugin binary not found", fmt.Sprintf("plugin %q: %s does not exist (yet); build or install it before starting the host.", p.Name, p.Path))
			continue
		case st.IsDir():
			warn(p.Range, "Plugin path is a directory", fmt.Sprintf("plugin %q: %s is a directory, not a plugin binary.", p.Name, p.Path))
			continue
		case st.Mode()&0o111 == 0:
			warn(p.Range, "Plugin binary is not executable", fmt.Sprintf("plugin %q: %s is not executable (chmod +x it).", p.Name, p.Path))
		}
		if p.SHA256 != "" {
			if sum, err := launcher.FileSHA256(p.Path); err == nil && sum != p.SHA256 {
				warn(p.Range, "Plugin binary does not match its sha256 pin", fmt.Sprintf("plugin %q: %s has sha256 %s, the config pins %s; the host will refuse to start it.", p.Name, p.Path, sum, p.SHA256))
			}
		}
	}
	return diags
}

package loader

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/host/internal/builtins"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
)

// A built-in runs as `switchboard plugin-serve NAME`, so one binary is
// enough. make build also builds switchboard-builtins beside the host (the
// built-ins without the host's code) and pins its SHA-256 into the host
// (builtins.ServeBinaryPin); the host then starts built-ins through it, as
// a pinned plugin: it starts in about half the CPU time of the host's
// binary, and its pages are shared by the built-ins' processes as the
// host's were. A file there that does not hash to the pin (from another
// build, or planted by a plugin that may write the folder) is never run:
// the host re-executes itself, as it does when it pins none (a plain `go
// build`).

// builtinBinary is the binary beside the host's that serves built-ins,
// with the pin this build has for it.
type builtinBinary struct {
	path, pin string
	hashes    *hashCache
}

// builtinBinaryOf returns the built-ins' binary beside self, or nil when
// this build pins none. Hashes are cached in dataDir.
func builtinBinaryOf(self, dataDir string) *builtinBinary {
	if builtins.ServeBinaryPin == "" {
		return nil
	}
	return &builtinBinary{path: builtinBinaryPath(self), pin: builtins.ServeBinaryPin, hashes: hashesIn(dataDir)}
}

func builtinBinaryPath(self string) string {
	return filepath.Join(filepath.Dir(self), builtins.ServeBinary)
}

// builtinBinaryPaths lists the pinned built-ins' binary when it is beside
// self: every sandbox shows it read-only (as it does self).
func builtinBinaryPaths(self string) []string {
	if builtins.ServeBinaryPin == "" {
		return nil
	}
	p := builtinBinaryPath(self)
	if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	return []string{p}
}

// apply returns spec set to serve the built-in through the built-ins'
// binary, pinned, when the file there is the one this build pinned;
// otherwise spec as it is (the host re-executes itself). The launcher
// checks the pin again on the descriptor it executes.
func (s *builtinBinary) apply(spec launcher.Spec, log hclog.Logger) launcher.Spec {
	f, err := os.Open(s.path)
	if err != nil {
		return spec // none beside the host
	}
	sum, err := s.hashes.sum(f)
	if st, serr := f.Stat(); err == nil && (serr != nil || st.Mode()&0o111 == 0) {
		err = fmt.Errorf("%s is not executable", s.path) // its mode changed: serve the built-ins all the same
	}
	_ = f.Close()
	if err != nil || sum != s.pin {
		log.Info("the built-ins' binary beside the host is not the one built with it; the host serves the built-in itself (make build rebuilds both)", "server", spec.Name, "path", s.path, "sha256", sum, "error", err)
		return spec
	}
	spec.Path, spec.Args, spec.SHA256, spec.PinnedBy, spec.Hasher = s.path, []string{spec.Name}, s.pin, "", s.hashes.sum
	return spec
}

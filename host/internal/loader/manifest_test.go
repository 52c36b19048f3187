package loader

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// A manifest is read back only for the same binary (file identity) and
// the same block, and only from a file no other user can write.
func TestManifest(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	bin := filepath.Join(dir, "switchboard-plugin-x")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	j := job{spec: launcher.Spec{Name: "x", Path: bin, Args: []string{"-v"}}, kind: registry.KindPlugin}
	desc := &toolcall.Description{Name: "x", Instructions: "hi", Tools: []*toolcall.Tool{{Name: "t", InputSchema: []byte(`{"type":"object"}`)}}}
	key, file, err := manifestKey(j)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeManifest(data, j, key, file, desc, 2); err != nil {
		t.Fatal(err)
	}
	got, err := readManifest(data, j)
	if err != nil {
		t.Fatalf("readManifest = %v", err)
	}
	if !got.desc.Equal(desc) || got.protocol != 2 {
		t.Errorf("readManifest = %v (protocol %d), want %v (2)", got.desc, got.protocol, desc)
	}
	fi, err := os.Stat(manifestPath(data, "x"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("manifest file: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}

	changed := j
	changed.spec.Env = map[string]string{"A": "b"}
	if _, err := readManifest(data, changed); !errors.Is(err, errStaleManifest) {
		t.Errorf("readManifest with another env = %v, want stale", err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(bin, later, later); err != nil {
		t.Fatal(err)
	}
	if _, err := readManifest(data, j); !errors.Is(err, errStaleManifest) {
		t.Errorf("readManifest after touching the binary = %v, want stale", err)
	}
	key, file, _ = manifestKey(j)
	if err := writeManifest(data, j, key, file, desc, 2); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(manifestPath(data, "x"), 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := readManifest(data, j); err == nil {
		t.Error("readManifest of a file others can write succeeded")
	}
	// A symbolic link in its place is refused, not followed, even to a
	// valid manifest (the folder is checked once, the files one by one).
	if err := writeManifest(data, j, key, file, desc, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := readManifest(data, j); err != nil {
		t.Fatalf("control: readManifest of a valid manifest = %v", err)
	}
	real := manifestPath(data, "elsewhere")
	if err := os.Rename(manifestPath(data, "x"), real); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, manifestPath(data, "x")); err != nil {
		t.Fatal(err)
	}
	if _, err := readManifest(data, j); err == nil {
		t.Error("readManifest followed a symbolic link")
	}
}

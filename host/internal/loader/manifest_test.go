package loader

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-mcp/switchboard/host/internal/pluginstore"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/sdk/protocol"
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
	if err := writeManifest(data, j, key, file, desc, "", 2); err != nil {
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
	if err := writeManifest(data, j, key, file, desc, "", 2); err != nil {
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
	if err := writeManifest(data, j, key, file, desc, "", 2); err != nil {
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

// Manifests written by earlier versions (NAME.json; format 1: the
// description as protojson, format 2: its protobuf encoding in base64)
// are still read, so an upgrade does not start every lazy server once to
// learn what it already knew; the next write replaces them.
func TestEarlierManifestFormatsStillRead(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	bin := filepath.Join(dir, "switchboard-plugin-x")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	j := job{spec: launcher.Spec{Name: "x", Path: bin}, kind: registry.KindPlugin}
	desc := &toolcall.Description{Name: "x", Instructions: "hi", Tools: []*toolcall.Tool{{Name: "t", Description: "a tool", InputSchema: []byte(`{"type":"object"}`)}}}
	key, file, err := manifestKey(j)
	if err != nil {
		t.Fatal(err)
	}
	asJSON, err := protojson.Marshal(protocol.DescriptionToWire(desc))
	if err != nil {
		t.Fatal(err)
	}
	asProto, err := proto.Marshal(protocol.DescriptionToWire(desc))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(data, ManifestsDir), 0o700); err != nil {
		t.Fatal(err)
	}
	legacy := filepath.Join(data, ManifestsDir, "x.json")
	for format, d := range map[int]map[string]any{1: {"describe": json.RawMessage(asJSON)}, 2: {"describe_proto": asProto}} {
		m := map[string]any{"format": format, "name": "x", "key": key, "file": file, "protocol": 2, "saved": time.Now()}
		maps.Copy(m, d)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(legacy, b, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := readManifest(data, j)
		if err != nil {
			t.Fatalf("readManifest of a format %d manifest = %v", format, err)
		}
		if !got.desc.Equal(desc) || got.protocol != 2 {
			t.Errorf("readManifest of format %d = %v (protocol %d), want %v (2)", format, got.desc, got.protocol, desc)
		}
	}
	// The next write is of this format, and the old file goes.
	if err := writeManifest(data, j, key, file, desc, "", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(legacy); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the format 2 file is still there after a write: %v", err)
	}
	if got, err := readManifest(data, j); err != nil || !got.desc.Equal(desc) {
		t.Fatalf("readManifest after the write = %v, %v", got, err)
	}
	// A format this version does not know is stale, not misread.
	b, err := (&Manifest{Format: 99, Name: "x", Key: key, File: file, DescribeProto: asProto}).encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(manifestPath(data, "x"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readManifest(data, j); !errors.Is(err, errStaleManifest) {
		t.Errorf("readManifest of format 99 = %v, want stale", err)
	}
	// A description cut short is corrupt, not read.
	if b, err = (&Manifest{Format: manifestFormat, Name: "x", Key: key, File: file, DescribeProto: asProto}).encode(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(manifestPath(data, "x"), b[:len(b)-3], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readManifest(data, j); err == nil || errors.Is(err, errStaleManifest) {
		t.Errorf("readManifest of a manifest cut short = %v, want corrupt", err)
	}
}

// A manifest keeps the surface hash the gate computed, and it is used
// only for the description it was computed from: a description changed
// in the file (by anything but the host) has its surface computed afresh,
// so the lock and approvals are checked against what would be listed.
func TestManifestSurfaceCache(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	bin := filepath.Join(dir, "switchboard-plugin-x")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	j := job{spec: launcher.Spec{Name: "x", Path: bin}, kind: registry.KindPlugin}
	desc := &toolcall.Description{Name: "x", Tools: []*toolcall.Tool{
		{Name: "a", InputSchema: []byte(`{"type":"object"}`)},
		{Name: "b", Description: "another", InputSchema: []byte(`{"type":"object"}`)},
	}}
	want := pluginstore.SurfaceOfServer(desc).Hash()
	key, file, err := manifestKey(j)
	if err != nil {
		t.Fatal(err)
	}
	// A cached hash is what the host uses: a sentinel shows it was not
	// recomputed.
	if err := writeManifest(data, j, key, file, desc, "sha256:cached", 2); err != nil {
		t.Fatal(err)
	}
	got, err := readManifest(data, j)
	if err != nil {
		t.Fatal(err)
	}
	if h := got.surfaceHash(); h != "sha256:cached" {
		t.Errorf("surface hash = %q, want the cached one", h)
	}
	// No cached hash: computed.
	if err := writeManifest(data, j, key, file, desc, "", 2); err != nil {
		t.Fatal(err)
	}
	if got, err = readManifest(data, j); err != nil || got.surfaceHash() != want {
		t.Fatalf("surface hash without a cache = %v, %v; want %s", got, err, want)
	}
	// The description edited in the file, the cached hash left as it was:
	// the hash of what is now described, not the cached one.
	if err := writeManifest(data, j, key, file, desc, want, 2); err != nil {
		t.Fatal(err)
	}
	path := manifestPath(data, "x")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	fewer := &toolcall.Description{Name: "x", Tools: desc.Tools[:1]}
	if m.DescribeProto, err = proto.Marshal(protocol.DescriptionToWire(fewer)); err != nil {
		t.Fatal(err)
	}
	if b, err = m.encode(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err = readManifest(data, j)
	if err != nil {
		t.Fatal(err)
	}
	if h, edited := got.surfaceHash(), pluginstore.SurfaceOfServer(fewer).Hash(); h != edited || h == want {
		t.Errorf("surface hash of an edited description = %s, want %s (not the cached %s)", h, edited, want)
	}
}

package loader

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-mcp/switchboard/host/internal/pluginstore"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/host/internal/strictmode"
	"github.com/switchboard-mcp/switchboard/host/internal/supervisor"
	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// ManifestsDir is the folder in data_dir that keeps each server's
// manifest (NAME.manifest): what it described the last time it started,
// so that a lazy server's tools are listed without starting it.
const ManifestsDir = "manifests"

// manifestExt is a manifest file's extension. Formats 1 and 2 were JSON
// files (NAME.json, the description as protojson, then as base64 in a
// JSON string): still read where no NAME.manifest is, and removed when
// the server's next start writes this format.
const manifestExt = ".manifest"

// manifestFormat is the version of the manifest file's layout: a line of
// JSON (Manifest: what the manifest is of, for the host and for people
// reading it), then the description, DescribeBytes bytes of the protobuf
// encoding of a DescribeResponse. A host listing 100 lazy servers spent
// half of reading their manifests decoding the description out of JSON.
const manifestFormat = 3

// Manifest is a server's cached description. It is valid only for the
// same Key: for a plugin or built-in, the binary's file identity (device,
// inode, size, modification and change times) and what the config passes
// it (arguments, environment, settings); for an external server, its
// command line and environment (or URL and headers). Anything else (a
// rebuilt or touched binary, an edited block) makes it stale, and the
// server starts eagerly to learn it again.
type Manifest struct {
	Format int    `json:"format"`
	Name   string `json:"name"`
	// Key is the SHA-256 of the identity (env values are not stored).
	Key string `json:"key"`
	// File is the binary's identity, for people reading the file.
	File     *FileIdentity `json:"file,omitempty"`
	Protocol int           `json:"protocol,omitempty"`
	Saved    time.Time     `json:"saved"`
	// DescribeBytes is the length of the description after the line.
	DescribeBytes int `json:"describe_bytes"`
	// DescribeProto is the DescribeResponse, protobuf-encoded: the file's
	// bytes after the JSON line.
	DescribeProto []byte `json:"-"`
	// legacyDescribe is a format 1 file's description (protojson).
	legacyDescribe json.RawMessage
	// Surface is the description's surface hash as the gate computed it
	// when the server started: a host listing many lazy servers compares
	// it with the lock and approvals instead of re-encoding every tool's
	// schemas. It is a cache of DescribeProto's bytes, used only while they
	// hash as it says; otherwise (or absent: not gated) the surface is
	// computed from the description.
	Surface *SurfaceCache `json:"surface,omitempty"`
}

// encode is the manifest file's content.
func (m *Manifest) encode() ([]byte, error) {
	m.DescribeBytes = len(m.DescribeProto)
	head, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append(append(head, '\n'), m.DescribeProto...), nil
}

// decodeManifest reads a manifest file's content (encode).
func decodeManifest(b []byte) (*Manifest, error) {
	head, desc, ok := bytes.Cut(b, []byte{'\n'})
	if !ok {
		return nil, errors.New("no line of JSON before the description")
	}
	m := &Manifest{}
	if err := json.Unmarshal(head, m); err != nil {
		return nil, err
	}
	if m.Format != manifestFormat {
		return nil, errStaleManifest
	}
	if m.DescribeBytes != len(desc) {
		return nil, fmt.Errorf("the description is %d bytes, the manifest says %d", len(desc), m.DescribeBytes)
	}
	m.DescribeProto = desc
	return m, nil
}

// decodeLegacyManifest reads a manifest file of format 1 or 2 (JSON, the
// description in it as protojson or as base64 of its protobuf encoding).
func decodeLegacyManifest(b []byte) (*Manifest, error) {
	var old struct {
		Manifest
		DescribeProto []byte          `json:"describe_proto"`
		Describe      json.RawMessage `json:"describe"`
	}
	if err := json.Unmarshal(b, &old); err != nil {
		return nil, err
	}
	if old.Format != 1 && old.Format != 2 {
		return nil, errStaleManifest
	}
	m := old.Manifest
	m.DescribeProto, m.legacyDescribe = old.DescribeProto, old.Describe
	if m.Format == 1 {
		m.Surface = nil // format 1 kept no surface
	}
	return &m, nil
}

// SurfaceCache is a manifest's surface hash and the description it is of.
type SurfaceCache struct {
	// Describe is the SHA-256 (hex) of DescribeProto.
	Describe string `json:"describe_sha256"`
	// Hash is pluginstore.Surface.Hash of that description.
	Hash string `json:"hash"`
}

// FileIdentity is what says a binary is the same file as before without
// reading it.
type FileIdentity struct {
	Path    string `json:"path"`
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	MtimeNS int64  `json:"mtime_ns"`
	CtimeNS int64  `json:"ctime_ns"`
}

// fileIdentity stats path.
func fileIdentity(path string) (*FileIdentity, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	return identityOf(path, fi)
}

// identityOf is the identity of the file at path that fi describes.
func identityOf(path string, fi os.FileInfo) (*FileIdentity, error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, fmt.Errorf("loader: no file identity for %s on this system", path)
	}
	return &FileIdentity{
		Path: path, Dev: uint64(st.Dev), Ino: st.Ino, Size: st.Size, //nolint:unconvert // Dev's type differs between platforms
		MtimeNS: fi.ModTime().UnixNano(), CtimeNS: ctimeNS(st),
	}, nil
}

// manifestKey is the identity a job's manifest must match, and the
// binary's file identity (nil for an external server).
func manifestKey(j job) (string, *FileIdentity, error) {
	id := struct {
		Kind     registry.Kind
		File     *FileIdentity
		Args     []string
		Env      map[string]string
		Settings []byte
		Command  string
		URL      string
		Headers  map[string]string
	}{Kind: j.kind}
	if j.ext != nil {
		id.Command, id.Args, id.Env, id.URL, id.Headers = j.ext.Command, j.ext.Args, j.ext.Env, j.ext.URL, j.ext.Headers
	} else {
		f, err := fileIdentity(j.spec.Path)
		if err != nil {
			return "", nil, err
		}
		id.File, id.Args, id.Env, id.Settings = f, j.spec.Args, j.spec.Env, j.spec.Settings
	}
	b, err := json.Marshal(id)
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), id.File, nil
}

func manifestPath(dataDir, name string) string {
	return filepath.Join(dataDir, ManifestsDir, name+manifestExt)
}

// errStaleManifest is a manifest whose key no longer matches.
var errStaleManifest = errors.New("the binary or its configuration changed since it was cached")

// readManifest returns a job's cached description, or why there is none
// it may be listed from (missing, unreadable, unsafe, corrupt or stale).
func readManifest(dataDir string, j job) (*cached, error) {
	if err := checkManifestDir(dataDir); err != nil {
		return nil, err
	}
	return readManifestIn(dataDir, j)
}

// checkManifestDir checks the manifests folder as strictmode.Check does
// (its owner and modes, and every folder above it).
func checkManifestDir(dataDir string) error {
	return strictmode.Check(filepath.Join(dataDir, ManifestsDir))
}

// readManifestIn is readManifest in a manifests folder already checked
// (checkManifestDir): a host with many lazy servers checks the folder
// once, not once per server.
func readManifestIn(dataDir string, j job) (*cached, error) {
	path := manifestPath(dataDir, j.spec.Name)
	b, err := strictmode.ReadFileIn(filepath.Dir(path), filepath.Base(path))
	var m *Manifest
	switch {
	case errors.Is(err, os.ErrNotExist):
		// Written by an earlier version: read, so that an upgrade does not
		// start every lazy server once to learn what it already knew.
		path = filepath.Join(dataDir, ManifestsDir, j.spec.Name+".json")
		if b, err = strictmode.ReadFileIn(filepath.Dir(path), filepath.Base(path)); err != nil {
			return nil, err
		}
		m, err = decodeLegacyManifest(b)
	case err != nil:
		return nil, err
	default:
		m, err = decodeManifest(b)
	}
	if err != nil {
		return nil, fmt.Errorf("corrupt manifest %s: %w", path, err)
	}
	key, _, err := manifestKey(j)
	if err != nil {
		return nil, err
	}
	if m.Name != j.spec.Name || m.Key != key {
		return nil, errStaleManifest
	}
	d := &pluginv1.DescribeResponse{}
	if m.Format == 1 {
		err = protojson.Unmarshal(m.legacyDescribe, d)
	} else {
		err = proto.Unmarshal(m.DescribeProto, d)
	}
	if err != nil {
		return nil, fmt.Errorf("corrupt manifest %s: %w", path, err)
	}
	c := &cached{desc: protocol.DescriptionFromWire(d), protocol: m.Protocol}
	if sc := m.Surface; sc != nil {
		if sum := sha256.Sum256(m.DescribeProto); hex.EncodeToString(sum[:]) == sc.Describe {
			c.surface = sc.Hash
		}
	}
	return c, nil
}

// cached is what a valid manifest says.
type cached struct {
	desc     *toolcall.Description
	protocol int
	surface  string // the description's surface hash, when the manifest keeps it
}

// surfaceHash is the cached description's surface hash.
func (c *cached) surfaceHash() string {
	if c.surface != "" {
		return c.surface
	}
	return pluginstore.SurfaceOfServer(c.desc).Hash()
}

// writeManifest caches what a job's server described at a start; key and
// file are the identity taken before the start, surface the description's
// surface hash when the gate computed it ("" otherwise). The description
// is kept in the plugin protocol's encoding (a DescribeResponse).
func writeManifest(dataDir string, j job, key string, file *FileIdentity, d *toolcall.Description, surface string, version int) error {
	desc, err := proto.MarshalOptions{Deterministic: true}.Marshal(protocol.DescriptionToWire(d))
	if err != nil {
		return err
	}
	m := Manifest{
		Format: manifestFormat, Name: j.spec.Name, Key: key, File: file, Protocol: version,
		Saved: time.Now().UTC().Truncate(time.Second), DescribeProto: desc,
	}
	if surface != "" {
		sum := sha256.Sum256(desc)
		m.Surface = &SurfaceCache{Describe: hex.EncodeToString(sum[:]), Hash: surface}
	}
	b, err := m.encode()
	if err != nil {
		return err
	}
	dir := filepath.Join(dataDir, ManifestsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := strictmode.Check(dir); err != nil {
		return err
	}
	if err := pluginstore.WriteAtomic(manifestPath(dataDir, j.spec.Name), b, 0o600); err != nil {
		return err
	}
	// The file of an earlier format, which this one replaces.
	_ = os.Remove(filepath.Join(dir, j.spec.Name+".json"))
	return nil
}

// lazyManifest returns the description a job may be listed from without
// starting it, or nil when it starts now: it is eager (by its start
// setting, or an external server without one), it is a discovered plugin
// (named by what it reports) or one started by hand, or its manifest is
// missing, stale or corrupt.
func (h *Host) lazyManifest(j job) *cached { return h.lazyManifestHeldTo(j, nil) }

// lazyManifestHeldTo is lazyManifest with the gate's files read once for
// many jobs (sn; nil reads them for this job when it has a gate).
func (h *Host) lazyManifestHeldTo(j job, sn *pluginstore.Snapshot) *cached {
	if j.refused != nil || startsNow(j) {
		return nil
	}
	var err error
	if !h.manifestDirOK.Load() { // checked once it passes, not per server
		if err = checkManifestDir(j.manifests); err == nil {
			h.manifestDirOK.Store(true)
		}
	}
	var m *cached
	if err == nil {
		m, err = readManifestIn(j.manifests, j)
	}
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			h.log.Info("manifest not used; starting the server to learn it", "server", j.spec.Name, "reason", err)
		}
		return nil
	}
	// A manifest was written after its surface passed the gate, but the
	// lock or the approvals may have changed since (a lock checked out
	// again, an approval withdrawn): a surface they no longer allow is not
	// listed. The server starts instead, and its start puts it through the
	// gate (quarantined, its manifest dropped). Red team: the cached
	// surface was listed until the first call.
	if j.gate != nil {
		if sn == nil {
			if sn, err = j.gate.Snapshot(); err != nil {
				h.log.Info("manifest not used: the lock or approvals could not be read; starting the server", "server", j.spec.Name, "reason", err)
				return nil
			}
		}
		if sn.HoldsHash(j.spec.Name, m.surfaceHash()) {
			h.log.Info("manifest not used: its surface is not the locked or approved one; starting the server to check it", "server", j.spec.Name)
			return nil
		}
	}
	return m
}

// recordManifest caches a started instance's description d, whose
// surface hash the gate computed (surface; "" when it has no gate).
func recordManifest(j job, key string, file *FileIdentity, inst supervisor.Instance, d *toolcall.Description, surface string, log hclog.Logger) {
	version := 0
	if p, ok := inst.(registry.Process); ok {
		version = p.ProtocolVersion()
	}
	if err := writeManifest(j.manifests, j, key, file, d, surface, version); err != nil {
		log.Warn("manifest not cached; the server starts eagerly next time", "server", j.spec.Name, "error", err)
	}
}

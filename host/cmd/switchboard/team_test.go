package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/switchboard-mcp/switchboard/host/internal/auth"
	"github.com/switchboard-mcp/switchboard/host/internal/auth/authtest"
	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

// teamSetup writes a config with filesystem, bash and the test plugin (as
// "fx"), and extra, in a fresh project.
func teamSetup(t *testing.T, extra string) env {
	t.Helper()
	bins := fixtures.Build(t)
	dir := t.TempDir()
	project := filepath.Join(dir, "project")
	if err := os.Mkdir(project, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`
project_dir = "project"
data_dir    = "state"
start_wait  = "2m"
builtin "filesystem" {}
builtin "bash" {}
plugin "fx" { path = %q }
%s
`, bins.TestPlugin, extra)
	path := filepath.Join(dir, "config.hcl")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return env{bins: bins, config: path, project: project}
}

// newToken runs `switchboard token new NAME [--access A]` and returns the
// token it printed.
func newToken(t *testing.T, e env, name string, access ...string) string {
	t.Helper()
	args := []string{"token", "new", name, "--config", e.config}
	if len(access) > 0 {
		args = append(args, "--access", access[0])
	}
	out, errOut, code := run(t, e, args...)
	tok := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(tok, auth.TokenPrefix) {
		t.Fatalf("token new %s = %d %q %q", name, code, out, errOut)
	}
	return tok
}

// startHost starts `switchboard serve --config … args…` and returns it and
// its announced MCP URL; it is killed when the test ends.
func startHost(t *testing.T, e env, args ...string) (*exec.Cmd, string) {
	t.Helper()
	return startHostEnv(t, e, nil, args...)
}

// startHostEnv is startHost with more environment variables.
func startHostEnv(t *testing.T, e env, environ []string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(e.bins.Switchboard, append([]string{"serve", "--config", e.config}, args...)...)
	cmd.Env = append(append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=warn"), environ...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	url := ""
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if u, ok := strings.CutPrefix(sc.Text(), "switchboard: serving MCP at "); ok {
			url = u
			break
		}
	}
	if url == "" {
		t.Fatalf("no URL announced; stderr:\n%s", strings.Join(lines, "\n"))
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return cmd, url
}

// tokenClient is an mcp-go streamable HTTP client sending token (none when
// ""), initialized.
func tokenClient(t *testing.T, url, token string, opts ...transport.StreamableHTTPCOption) *client.Client {
	t.Helper()
	if token != "" {
		opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	}
	tr, err := transport.NewStreamableHTTP(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	initialize(t, c)
	return c
}

// rawPost sends one JSON-RPC message with token ("" for none).
func rawPost(t *testing.T, hc *http.Client, url, token, body string) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b), nil
}

const pingInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func teamAudit(t *testing.T, e env) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(e.config), "state", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// TestTeamTokens: with tokens, a request without one gets 401 and the
// protected resource metadata's address; a read token lists no WRITE tool
// and its write is refused (the file is not written) while a write token's
// write runs; each caller has its own bash jobs and duplicate guard; the
// caller is in the audit log and the metrics; a revoked token is refused
// at once.
func TestTeamTokens(t *testing.T) {
	e := teamSetup(t, `caller "ci" { deny = ["fx.clock"] }`)
	ci := newToken(t, e, "ci", "read")
	dev := newToken(t, e, "dev")
	ops := newToken(t, e, "ops")
	out, _, code := run(t, e, "token", "list", "--config", e.config)
	if code != 0 || !strings.Contains(out, "ci") || !strings.Contains(out, "read") || !strings.Contains(out, "dev") || strings.Contains(out, ci) {
		t.Errorf("token list = %d %q", code, out)
	}
	tokensFile := filepath.Join(filepath.Dir(e.config), "state", "tokens.json")
	if b, err := os.ReadFile(tokensFile); err != nil || strings.Contains(string(b), ci) || !strings.Contains(string(b), auth.Hash(ci)) {
		t.Errorf("tokens file: %v, holds the secret or not its hash", err)
	}
	if _, errOut, code := run(t, e, "validate", "--config", e.config); code != 0 {
		t.Errorf("validate = %d %s", code, errOut)
	}
	_, url := startHost(t, e, "--http", "127.0.0.1:0")

	// No token: 401, and where to learn how to get one.
	resp, body, err := rawPost(t, http.DefaultClient, url, "", pingInit)
	if err != nil {
		t.Fatal(err)
	}
	base := strings.TrimSuffix(url, "/mcp")
	wantMeta := base + auth.MetadataPath + "/mcp"
	if ch := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || ch != fmt.Sprintf("Bearer resource_metadata=%q", wantMeta) || !strings.Contains(body, "token new") {
		t.Fatalf("no token: %d %q %q; want 401 naming %s", resp.StatusCode, ch, body, wantMeta)
	}
	mresp, err := http.Get(wantMeta)
	if err != nil {
		t.Fatal(err)
	}
	var meta auth.Metadata
	err = json.NewDecoder(mresp.Body).Decode(&meta)
	mresp.Body.Close()
	if err != nil || meta.Resource != url {
		t.Errorf("metadata = %+v, %v; want resource %s", meta, err, url)
	}
	// A forged Host does not move the resource (found from outside: the
	// metadata and the 401 named the Host a client sent).
	forged, err := http.NewRequest(http.MethodGet, wantMeta, nil)
	if err != nil {
		t.Fatal(err)
	}
	forged.Host = "evil.example"
	if fresp, err := http.DefaultClient.Do(forged); err == nil {
		var fm auth.Metadata
		_ = json.NewDecoder(fresp.Body).Decode(&fm)
		fresp.Body.Close()
		if strings.Contains(fm.Resource, "evil.example") || strings.Contains(fresp.Header.Get("WWW-Authenticate"), "evil.example") {
			t.Errorf("with Host evil.example the metadata names %q", fm.Resource)
		}
	}
	resp, _, err = rawPost(t, http.DefaultClient, url, auth.TokenPrefix+"forged", pingInit)
	if err != nil || resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("forged token: %v %v", resp, err)
	}

	// The read token: WRITE tools are neither listed nor callable.
	cc := tokenClient(t, url, ci)
	tools, err := cc.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range tools.Tools {
		names[tl.Name] = true
	}
	if names["filesystem__write_file"] || names["bash__run"] || !names["filesystem__read_text_file"] {
		t.Errorf("ci lists %v; want READ tools only", names)
	}
	res, err := callTool(t.Context(), cc, "filesystem__write_file", map[string]any{"path": "ci.txt", "content": "from ci"}, nil)
	if err != nil || !res.IsError || !strings.Contains(resultText(res), `caller "ci" has access = "read"`) {
		t.Errorf("ci's write = %v %v; want refused naming its access", resultText(res), err)
	}
	if _, err := os.Stat(filepath.Join(e.project, "ci.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ci's refused write left a file: %v", err)
	}
	// Its caller block narrows it further.
	if res, err := callTool(t.Context(), cc, "fx__clock", nil, nil); err != nil || !res.IsError || !strings.Contains(resultText(res), `denied for caller "ci"`) {
		t.Errorf("ci's fx__clock = %v %v; want denied by its caller block", resultText(res), err)
	}

	// The write token writes.
	dc := tokenClient(t, url, dev)
	if res, err := callTool(t.Context(), dc, "filesystem__write_file", map[string]any{"path": "dev.txt", "content": "from dev"}, nil); err != nil || res.IsError {
		t.Fatalf("dev's write = %v %v", resultText(res), err)
	}
	if b, err := os.ReadFile(filepath.Join(e.project, "dev.txt")); err != nil || string(b) != "from dev" {
		t.Errorf("dev.txt = %q %v", b, err)
	}

	// Bash jobs and the duplicate guard belong to each caller.
	oc := tokenClient(t, url, ops)
	if res, err := callTool(t.Context(), dc, "bash__start", map[string]any{"command": "sleep 60"}, nil); err != nil || res.IsError {
		t.Fatalf("dev's bash__start = %v %v", resultText(res), err)
	}
	if res, _ := callTool(t.Context(), dc, "bash__jobs", nil, nil); !strings.Contains(resultText(res), "sleep 60") {
		t.Errorf("dev's jobs = %q, want its job", resultText(res))
	}
	if res, _ := callTool(t.Context(), oc, "bash__jobs", nil, nil); resultText(res) != "No jobs." {
		t.Errorf("ops's jobs = %q, want none (dev's job is dev's)", resultText(res))
	}
	// dev in a second session is the same caller: its job is there.
	if res, _ := callTool(t.Context(), tokenClient(t, url, dev), "bash__jobs", nil, nil); !strings.Contains(resultText(res), "sleep 60") {
		t.Errorf("dev's jobs from a second session = %q, want its job", resultText(res))
	}
	for i := range 2 {
		res, _ := callTool(t.Context(), dc, "fx__echo", map[string]any{"text": "same"}, nil)
		if got := resultText(res); (i == 1) != strings.Contains(got, "Unchanged") {
			t.Errorf("dev's echo #%d = %q", i+1, got)
		}
	}
	if res, _ := callTool(t.Context(), oc, "fx__echo", map[string]any{"text": "same"}, nil); strings.Contains(resultText(res), "Unchanged") {
		t.Errorf("ops's first echo = %q: dev's repeat counted for ops", resultText(res))
	}

	// The audit log names the caller of every call.
	waitFor(t, "the audit records", func() bool {
		var ciWrite, devWrite bool
		for _, r := range teamAudit(t, e) {
			if r["tool"] == "filesystem.write_file" && r["caller"] == "ci" && r["outcome"] == "refused" {
				ciWrite = true
			}
			if r["tool"] == "filesystem.write_file" && r["caller"] == "dev" && r["outcome"] == "ok" && r["client"] == "caller:dev" {
				devWrite = true
			}
		}
		return ciWrite && devWrite
	})

	// Metrics need a token too, and count by caller.
	mreq, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/metrics", nil)
	if resp, err := http.DefaultClient.Do(mreq); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("metrics without a token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	mreq.Header.Set("Authorization", "Bearer "+ops)
	mr, err := http.DefaultClient.Do(mreq)
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(mr.Body)
	mr.Body.Close()
	for _, want := range []string{`caller="ci",outcome="refused_rule",server="filesystem",tool="write_file"`, `caller="dev",outcome="ok",server="filesystem",tool="write_file"`} {
		if !strings.Contains(string(mb), want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// Revoked: refused from the next request, without a restart.
	if _, errOut, code := run(t, e, "token", "revoke", "dev", "--config", e.config); code != 0 {
		t.Fatalf("token revoke dev = %d %s", code, errOut)
	}
	if resp, _, err := rawPost(t, http.DefaultClient, url, dev, pingInit); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a revoked token: %v %v; want 401", resp, err)
	}
}

// TestTeamJWT: the host is an OAuth resource server: a JWT of the test
// issuer (its keys served on 127.0.0.1) calls tools as its subject; a
// wrong audience, an expired token or another key are refused.
func TestTeamJWT(t *testing.T) {
	is := authtest.NewIssuer(t)
	const aud = "https://switchboard.test/mcp"
	e := teamSetup(t, fmt.Sprintf(`
auth {
  resource = %q
  issuer "test" {
    url             = %q
    required_scopes = ["mcp"]
  }
}
caller "alice" { access = "read" }
`, aud, is.URL))
	_, url := startHost(t, e, "--http", "127.0.0.1:0")
	good := authtest.Claims{Subject: "alice", Audience: []string{aud}, Scope: "mcp"}
	c := tokenClient(t, url, is.Token(t, good))
	if res, err := callTool(t.Context(), c, "fx__echo", map[string]any{"text": "hi"}, nil); err != nil || res.IsError {
		t.Errorf("alice's echo = %v %v", resultText(res), err)
	}
	if res, err := callTool(t.Context(), c, "filesystem__write_file", map[string]any{"path": "a.txt", "content": "x"}, nil); err != nil || !res.IsError {
		t.Errorf("alice's write = %v %v; want refused (her caller block: read)", resultText(res), err)
	}
	if _, err := os.Stat(filepath.Join(e.project, "a.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("alice's refused write left a file: %v", err)
	}
	for name, tok := range map[string]string{
		"wrong audience": is.Token(t, authtest.Claims{Subject: "alice", Audience: []string{"https://other.test/mcp"}, Scope: "mcp"}),
		"expired":        is.Token(t, authtest.Claims{Subject: "alice", Audience: []string{aud}, Scope: "mcp", Expiry: time.Now().Add(-time.Minute)}),
		"wrong key":      is.OtherKeyToken(t, good),
	} {
		resp, body, err := rawPost(t, http.DefaultClient, url, tok, pingInit)
		if err != nil || resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Errorf("%s: %v %q %v; want 401 invalid_token", name, resp, body, err)
		}
	}
	resp, body, err := rawPost(t, http.DefaultClient, url, is.Token(t, authtest.Claims{Subject: "alice", Audience: []string{aud}, Scope: "other"}), pingInit)
	if err != nil || resp.StatusCode != http.StatusForbidden || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="insufficient_scope"`) {
		t.Errorf("missing scope: %v %q %v; want 403 insufficient_scope", resp, body, err)
	}
	waitFor(t, "alice's audit record", func() bool {
		for _, r := range teamAudit(t, e) {
			if r["tool"] == "fx.echo" && r["caller"] == "test/alice" {
				return true
			}
		}
		return false
	})
}

// TestTeamDrainOnSIGTERM: SIGTERM while a call is in flight: the call
// completes, new requests are refused, and the host exits.
func TestTeamDrainOnSIGTERM(t *testing.T) {
	e := teamSetup(t, `shutdown_grace = "2m"`)
	tok := newToken(t, e, "dev")
	cmd, url := startHost(t, e, "--http", "127.0.0.1:0")
	c := tokenClient(t, url, tok)
	progress := watchProgress(c)
	type result struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := callTool(t.Context(), c, "fx__sleep", map[string]any{"ms": 4000}, "drain")
		done <- result{res, err}
	}()
	progress.waitStarted(t, "drain")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// New requests are refused (503 while draining, then no listener)
	// while the call is still running.
	refused := false
	waitFor(t, "a new request refused", func() bool {
		select {
		case <-done:
			t.Fatal("the call ended before any new request was refused")
		default:
		}
		resp, _, err := rawPost(t, &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}, url, tok, pingInit)
		refused = err != nil || resp.StatusCode == http.StatusServiceUnavailable
		return refused
	})
	r := <-done
	if r.err != nil || r.res.IsError || resultText(r.res) != "slept" {
		t.Fatalf("the call in flight = %v %v; want it completed", resultText(r.res), r.err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("serve exited with %v after SIGTERM, want 0", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not exit after SIGTERM")
	}
	if _, err := net.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")); err == nil {
		t.Error("the listener still accepts after exit")
	}
}

// certs writes a CA, a server certificate for 127.0.0.1 and a client
// certificate, all signed by the CA, into dir.
func certs(t *testing.T, dir string) (caPool *x509.CertPool, client tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	write := func(name, typ string, der []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("ca.pem", "CERTIFICATE", caDER)
	leaf := func(serial int64, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "leaf"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	srvDER, srvKey := leaf(2, x509.ExtKeyUsageServerAuth)
	write("server.pem", "CERTIFICATE", srvDER)
	kb, _ := x509.MarshalECPrivateKey(srvKey)
	write("server.key", "EC PRIVATE KEY", kb)
	cliDER, cliKey := leaf(3, x509.ExtKeyUsageClientAuth)
	caPool = x509.NewCertPool()
	caPool.AddCert(ca)
	return caPool, tls.Certificate{Certificate: [][]byte{cliDER}, PrivateKey: cliKey}
}

// TestTeamMTLS: with a tls block the host serves HTTPS and, with
// client_ca_file, only to clients with a certificate of that CA; the
// bearer token is still required.
func TestTeamMTLS(t *testing.T) {
	dir := t.TempDir()
	pool, clientCert := certs(t, dir)
	e := teamSetup(t, fmt.Sprintf(`tls {
  cert_file      = %q
  key_file       = %q
  client_ca_file = %q
}`, filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key"), filepath.Join(dir, "ca.pem")))
	tok := newToken(t, e, "dev")
	_, url := startHost(t, e, "--http", "127.0.0.1:0")
	if !strings.HasPrefix(url, "https://127.0.0.1:") {
		t.Fatalf("URL %q, want https", url)
	}
	withCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{clientCert}}}}
	c := tokenClient(t, url, tok, transport.WithHTTPBasicClient(withCert))
	if res, err := callTool(t.Context(), c, "fx__echo", map[string]any{"text": "over mTLS"}, nil); err != nil || res.IsError {
		t.Errorf("echo over mTLS = %v %v", resultText(res), err)
	}
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if resp, _, err := rawPost(t, noCert, url, tok, pingInit); err == nil {
		t.Errorf("a client without a certificate got %d, want the handshake refused", resp.StatusCode)
	}
	if resp, _, err := rawPost(t, withCert, url, "", pingInit); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a certificate without a token: %v %v, want 401", resp, err)
	}
}

// TestTeamRemoteBind: beyond loopback is refused without auth and allowed
// once a token exists.
func TestTeamRemoteBind(t *testing.T) {
	e := teamSetup(t, "")
	if _, errOut, code := run(t, e, "serve", "--config", e.config, "--http", "0.0.0.0:0"); code != 2 || !strings.Contains(errOut, "no token or issuer") {
		t.Fatalf("serve --http 0.0.0.0:0 without auth = %d %q", code, errOut)
	}
	tok := newToken(t, e, "dev")
	_, url := startHost(t, e, "--http", "0.0.0.0:0")
	port := url[strings.LastIndex(url, ":")+1 : strings.LastIndex(url, "/")]
	// Reached by a non-loopback Host name: the token decides, not Host.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://127.0.0.1:"+port+"/mcp", strings.NewReader(pingInit))
	req.Host = "switchboard.example:" + port
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("initialize via Host switchboard.example = %d, want 200", resp.StatusCode)
	}
}

// TestTeamTraceNamesTheCaller: a call's span carries the authenticated
// caller (enduser.id), exported to a real OTLP receiver.
func TestTeamTraceNamesTheCaller(t *testing.T) {
	rcv := &receiver{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(gs, rcv)
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	e := teamSetup(t, "")
	tok := newToken(t, e, "dev")
	_, url := startHostEnv(t, e, []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + ln.Addr().String(),
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_EXPORTER_OTLP_INSECURE=true", "OTEL_BSP_SCHEDULE_DELAY=100",
	}, "--http", "127.0.0.1:0")
	c := tokenClient(t, url, tok)
	if res, err := callTool(t.Context(), c, "fx__echo", map[string]any{"text": "traced"}, nil); err != nil || res.IsError {
		t.Fatalf("echo = %v %v", resultText(res), err)
	}
	waitFor(t, "the call's span naming dev", func() bool {
		s := rcv.find("tools/call fx.echo")
		return s != nil && attr(s, "enduser.id") == "dev"
	})
}

// TestTeamCallerRulesReload: a changed caller block applies at a reload,
// without a restart.
func TestTeamCallerRulesReload(t *testing.T) {
	e := teamSetup(t, "watch_config = false\ncaller \"dev\" {}")
	tok := newToken(t, e, "dev")
	_, url := startHost(t, e, "--http", "127.0.0.1:0")
	c := tokenClient(t, url, tok)
	if res, err := callTool(t.Context(), c, "fx__clock", nil, nil); err != nil || res.IsError {
		t.Fatalf("dev's clock = %v %v", resultText(res), err)
	}
	b, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.config, []byte(strings.Replace(string(b), `caller "dev" {}`, `caller "dev" { deny = ["fx.clock"] }`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := run(t, e, "reload", "--config", e.config); code != 0 {
		t.Fatalf("reload = %d %s", code, errOut)
	}
	if res, err := callTool(t.Context(), c, "fx__clock", nil, nil); err != nil || !res.IsError || !strings.Contains(resultText(res), `denied for caller "dev"`) {
		t.Errorf("dev's clock after the reload = %v %v; want denied by its caller block", resultText(res), err)
	}
}

package hostapi_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"math/big"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/host/internal/builtins"
	"github.com/switchboard-mcp/switchboard/host/internal/hostapi"
	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/internal/fixtures"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/caller"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/launcher"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
)

func TestMain(m *testing.M) { fixtures.Main(m) }

// recorder is a Service whose restarts are recorded.
type recorder struct {
	mu        sync.Mutex
	restarted []string
}

func (r *recorder) restart(name string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.restarted = append(r.restarted, name)
	return "restarting " + name, nil
}

func (r *recorder) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.restarted)
}

func newService(rec *recorder) *hostapi.Service {
	return &hostapi.Service{
		Registry: registry.New(nil),
		Servers:  func() any { return []map[string]any{{"name": "alpha", "status": "ready"}} },
		Restart:  rec.restart,
	}
}

// launchSwitchboard starts the real switchboard built-in (`switchboard
// plugin-serve switchboard`) with svc as its host service.
func launchSwitchboard(t *testing.T, svc launcher.HostService) *launcher.Plugin {
	t.Helper()
	bins := fixtures.Build(t)
	p, err := launcher.Launch(t.Context(), launcher.Spec{
		Name: builtins.Reserved, Path: bins.Switchboard, Args: []string{builtins.ServeCommand, builtins.Reserved},
		ProjectDir: t.TempDir(), DataDir: filepath.Join(t.TempDir(), "state"), HostService: svc,
	}, hclog.NewNullLogger())
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

func call(t *testing.T, p *launcher.Plugin, who, tool, args string) (string, bool) {
	t.Helper()
	res, err := p.Call(caller.With(t.Context(), who), tool, []byte(args), nil)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res.Text(), res.IsError
}

// TestThroughTheBroker: the real plugin reaches the host service over
// go-plugin's broker, for the caller of the call it serves.
func TestThroughTheBroker(t *testing.T) {
	rec := &recorder{}
	p := launchSwitchboard(t, newService(rec))
	if p.HostServiceID() == 0 {
		t.Fatal("the switchboard built-in was given no host service id")
	}
	if got, isErr := call(t, p, "alice", "servers", `{}`); isErr || !strings.Contains(got, `"alpha"`) {
		t.Errorf("servers = %q (error %v), want the host's servers", got, isErr)
	}
	if got, isErr := call(t, p, "alice", "restart_server", `{"name":"alpha"}`); isErr || !strings.Contains(got, "restarting alpha") {
		t.Errorf("restart_server alpha = %q (error %v)", got, isErr)
	}
	if got, isErr := call(t, p, "alice", "restart_server", `{"name":"switchboard"}`); !isErr || !strings.Contains(got, "cannot restart itself") {
		t.Errorf("restart_server switchboard = %q (error %v), want a refusal", got, isErr)
	}
	if got := rec.names(); !slices.Equal(got, []string{"alpha"}) {
		t.Errorf("restarted %v, want [alpha]", got)
	}
	if got, isErr := call(t, p, "", "recent_calls", `{}`); !isErr || !strings.Contains(got, "names no caller") {
		t.Errorf("recent_calls without a caller = %q (error %v), want a refusal", got, isErr)
	}
}

// TestHostServiceRefusesOthers performs the attacks from outside the
// plugin: a process that finds the host service's socket but has not the
// plugin's certificate gets nothing, with or without TLS of its own.
func TestHostServiceRefusesOthers(t *testing.T) {
	rec := &recorder{}
	p := launchSwitchboard(t, newService(rec))
	call(t, p, "alice", "servers", `{}`) // the plugin uses it once: its address is known
	addr, ok := strings.CutPrefix(p.HostServiceAddr(), "unix:")
	if !ok {
		t.Fatalf("HostServiceAddr() = %q, want a unix socket", p.HostServiceAddr())
	}
	dial := func(creds credentials.TransportCredentials) error {
		conn, err := grpc.NewClient("unix://"+addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, err = pluginv1.NewHostClient(conn).RestartServer(ctx, &pluginv1.RestartServerRequest{Owner: "alice", Name: "alpha"})
		return err
	}
	if err := dial(insecure.NewCredentials()); err == nil {
		t.Error("a plain connection to the host service was served")
	}
	if err := dial(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{selfSigned(t)}, InsecureSkipVerify: true})); err == nil { //nolint:gosec // the attacker does not check the host
		t.Error("a connection with a certificate of its own was served")
	}
	if got := rec.names(); len(got) != 0 {
		t.Errorf("restarted %v from outside the plugin", got)
	}
}

// TestThirdPartyGetsNothing: a plugin launched without a host service (every
// plugin but the built-in) is given no broker id and has nothing to dial.
func TestThirdPartyGetsNothing(t *testing.T) {
	bins := fixtures.Build(t)
	p, err := launcher.Launch(t.Context(), launcher.Spec{
		Name: "fx", Path: bins.TestPlugin, ProjectDir: t.TempDir(), Env: map[string]string{"FIXTURE_HOST_PROBE": "1"},
	}, hclog.NewNullLogger())
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	if id := p.HostServiceID(); id != 0 {
		t.Errorf("HostServiceID() = %d for a third-party plugin, want 0", id)
	}
	if got, _ := call(t, p, "alice", "host_probe", `{}`); got != "host service: none" {
		t.Errorf("host_probe = %q, want none", got)
	}
}

// TestOnlyDuringItsCall: the service answers a request only while the
// plugin serves a call of the matching tool for the caller it names.
func TestOnlyDuringItsCall(t *testing.T) {
	rec := &recorder{}
	svc := newService(rec)
	sock := filepath.Join(t.TempDir(), "h.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	svc.Register(s, builtins.Reserved)
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	h := pluginv1.NewHostClient(conn)
	restart := func(owner string) error {
		_, err := h.RestartServer(t.Context(), &pluginv1.RestartServerRequest{Owner: owner, Name: "alpha"})
		return err
	}
	if err := restart("alice"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("restart with no call in flight: %v, want PermissionDenied", err)
	}
	leave := svc.Enter(builtins.Reserved, "alice", "servers")
	if err := restart("alice"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("restart during a servers call: %v, want PermissionDenied", err)
	}
	leave()
	leave = svc.Enter(builtins.Reserved, "alice", "restart_server")
	if err := restart("bob"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("restart for bob during alice's call: %v, want PermissionDenied", err)
	}
	if err := restart("alice"); err != nil {
		t.Errorf("restart during alice's restart_server call: %v", err)
	}
	leave()
	if err := restart("alice"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("restart after the call ended: %v, want PermissionDenied", err)
	}
	if got := rec.names(); !slices.Equal(got, []string{"alpha"}) {
		t.Errorf("restarted %v, want [alpha] once", got)
	}
	// recent_calls is the caller's own: bob's record never shows for alice.
	reg := svc.Registry
	_, _ = reg.Call(caller.With(t.Context(), "bob"), "nosuch.tool", []byte(`{}`), nil)
	_, _ = reg.Call(caller.With(t.Context(), "alice"), "other.tool", []byte(`{}`), nil)
	leave = svc.Enter(builtins.Reserved, "alice", "recent_calls")
	defer leave()
	resp, err := h.RecentCalls(t.Context(), &pluginv1.RecentCallsRequest{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	var calls []registry.AuditRecord
	if err := json.Unmarshal(resp.GetCallsJson(), &calls); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0].Tool != "other.tool" || calls[0].Client != "alice" {
		t.Errorf("alice's recent calls = %+v, want her one call", calls)
	}
}

func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

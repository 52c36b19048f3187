package launchertest

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/mtls"
)

// A plugin built with the SDK answers go-plugin's mutual TLS with a P-256
// certificate of its own (go-plugin's is P-521, some 10 ms of CPU on each
// side of a start), and its socket still serves only the holder of the
// host's certificate: the test starts a real plugin as a host would, then
// calls its health service with the host's certificate (served), without
// one, and with another self-signed one (both refused).
func TestPluginSocketServesOnlyTheHostsCertificate(t *testing.T) {
	hs := startByHand(t, fixtures.Build(t).Hello)
	host, pluginCert := hs.hostCert, hs.pluginCert
	if k, ok := pluginCert.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		t.Errorf("the plugin's key is %T %v, want ECDSA P-256", pluginCert.PublicKey, pluginCert.PublicKeyAlgorithm)
	}
	roots := x509.NewCertPool()
	roots.AddCert(pluginCert)
	network, addr := hs.network, hs.addr
	health := func(conf *tls.Config) error {
		creds := grpc.WithTransportCredentials(insecureOr(conf))
		c, err := grpc.NewClient("passthrough:///plugin", creds, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}))
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, err = grpc_health_v1.NewHealthClient(c).Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: "plugin"})
		return err
	}
	if err := health(&tls.Config{Certificates: []tls.Certificate{host}, RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12}); err != nil {
		t.Fatalf("with the host's certificate: %v", err)
	}
	other, err := mtls.SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	for name, conf := range map[string]*tls.Config{
		"no TLS":                          nil,
		"TLS without a certificate":       {RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12},
		"another self-signed certificate": {Certificates: []tls.Certificate{other}, RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12},
	} {
		if err := health(conf); err == nil {
			t.Errorf("%s: the plugin served the call", name)
		}
	}
}

func insecureOr(conf *tls.Config) credentials.TransportCredentials {
	if conf == nil {
		return insecure.NewCredentials()
	}
	return credentials.NewTLS(conf)
}

// handStarted is a plugin started by hand, as go-plugin would start it.
type handStarted struct {
	hostCert      tls.Certificate   // the host's, as the plugin was told
	pluginCert    *x509.Certificate // from the handshake line
	network, addr string            // where it serves
	pid           int
}

// startByHand starts the plugin bin as go-plugin would (the magic cookie,
// the protocol versions, the host's certificate and the extra variables),
// reads its handshake line and stops it when the test ends.
func startByHand(t *testing.T, bin string, extraEnv ...string) handStarted {
	t.Helper()
	host, err := mtls.SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append([]string{
		protocol.Handshake.MagicCookieKey + "=" + protocol.Handshake.MagicCookieValue,
		fmt.Sprintf("PLUGIN_PROTOCOL_VERSIONS=%d", protocol.SupportedVersions[len(protocol.SupportedVersions)-1]),
		"PLUGIN_CLIENT_CERT=" + string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: host.Certificate[0]})),
		"PATH=/usr/bin:/bin",
	}, extraEnv...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("handshake line: %v", err)
	}
	parts := strings.Split(strings.TrimSpace(line), "|")
	if len(parts) < 6 || parts[5] == "" {
		t.Fatalf("the handshake line carries no certificate: %q", line)
	}
	der, err := base64.RawStdEncoding.DecodeString(parts[5])
	if err != nil {
		t.Fatalf("certificate field: %v", err)
	}
	pluginCert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("certificate: %v", err)
	}
	return handStarted{hostCert: host, pluginCert: pluginCert, network: parts[2], addr: parts[3], pid: cmd.Process.Pid}
}

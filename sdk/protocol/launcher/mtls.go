package launcher

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"net"

	"google.golang.org/grpc/credentials"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/mtls"
)

// envClientCert is where go-plugin's mutual TLS protocol puts the host's
// certificate (PEM) for the plugin; the plugin answers with its own in
// the handshake line, which go-plugin's client loads as the only root it
// trusts (docs/PROTOCOL.md, "Transport security").
const envClientCert = "PLUGIN_CLIENT_CERT"

// hostTLS makes the host's side of that mutual TLS for one plugin: a fresh
// self-signed certificate (the plugin trusts it as its only client CA,
// package mtls says why it is P-256), and the TLS settings go-plugin
// completes with the plugin's certificate.
func hostTLS() (*tls.Config, string, error) {
	cert, err := mtls.SelfSigned()
	if err != nil {
		return nil, "", fmt.Errorf("launcher: host certificate: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
		ServerName:   "localhost",
	}, string(certPEM), nil
}

// lateTLS is TLS transport credentials built from conf at each use. The
// host's gRPC client must be given its credentials when go-plugin's
// client is configured, but go-plugin completes conf (the plugin's
// certificate, from the handshake line) only when the plugin has started.
type lateTLS struct{ conf *tls.Config }

var _ credentials.TransportCredentials = lateTLS{}

func (t lateTLS) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return credentials.NewTLS(t.conf).ClientHandshake(ctx, authority, raw)
}

func (t lateTLS) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return credentials.NewTLS(t.conf).ServerHandshake(raw)
}

func (t lateTLS) Info() credentials.ProtocolInfo { return credentials.NewTLS(t.conf).Info() }

func (t lateTLS) Clone() credentials.TransportCredentials { return t }

//lint:ignore SA1019 part of the interface
func (t lateTLS) OverrideServerName(string) error { return nil }

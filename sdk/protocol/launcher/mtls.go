package launcher

import (
	"crypto/tls"
	"encoding/pem"
	"fmt"

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

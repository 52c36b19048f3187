package launcher

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"
)

// envClientCert is where go-plugin's mutual TLS protocol puts the host's
// certificate (PEM) for the plugin; the plugin answers with its own in
// the handshake line, which go-plugin's client loads as the only root it
// trusts (docs/PROTOCOL.md, "Transport security").
const envClientCert = "PLUGIN_CLIENT_CERT"

// hostTLS makes the host's side of that mutual TLS for one plugin: a fresh
// self-signed certificate (the plugin trusts it as its only client CA), and
// the TLS settings go-plugin completes with the plugin's certificate.
//
// It is go-plugin's AutoMTLS on the wire, with an ECDSA P-256 key where
// AutoMTLS makes a P-521 one: generating that key and certificate and
// signing the TLS handshake with it cost the host about 10 ms of CPU for
// every plugin start (measured: a fifth of a lazy plugin's first call),
// P-256 about 0.2 ms. The plugin's own certificate is the plugin's choice.
func hostTLS() (*tls.Config, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, "", fmt.Errorf("launcher: host certificate: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, "", fmt.Errorf("launcher: host certificate: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "localhost", Organization: []string{"Switchboard"}},
		DNSNames:     []string{"localhost"},
		// The plugin verifies the host's certificate against itself: it
		// is its own CA.
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, "", fmt.Errorf("launcher: host certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, "", fmt.Errorf("launcher: host certificate: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
		ServerName:   "localhost",
	}, string(certPEM), nil
}

package auth

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/hashicorp/hcl/v2"

	"github.com/switchboard-mcp/switchboard/host/internal/config"
)

// ServerTLS is the TLS configuration of the tls block: its certificate,
// and with client_ca_file, client certificates required and checked
// against those CAs (mTLS). nil when there is no block.
func ServerTLS(t *config.TLS) (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: cert_file %s and key_file %s: %v", t.CertFile, t.KeyFile, err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if t.ClientCAFile != "" {
		pem, err := os.ReadFile(t.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: client_ca_file: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: client_ca_file %s holds no PEM certificate", t.ClientCAFile)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// Check is what `switchboard validate` reports of the auth settings: the
// same checks serve makes when it starts (New, ServerTLS).
func Check(cfg *config.Config) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if _, err := New(cfg); err != nil {
		d := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Tokens file refused", Detail: err.Error()}
		if cfg.Auth != nil && cfg.Auth.Range.Filename != "" {
			r := cfg.Auth.Range
			d.Subject = &r
		}
		diags = append(diags, d)
	}
	if _, err := ServerTLS(cfg.TLS); err != nil {
		r := cfg.TLS.Range
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "TLS settings refused", Detail: err.Error(), Subject: &r})
	}
	return diags
}

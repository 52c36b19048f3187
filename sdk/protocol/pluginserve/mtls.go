package pluginserve

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"os"
	"strings"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/mtls"
)

// envClientCert is where go-plugin's mutual TLS puts the host's
// certificate (PEM).
const envClientCert = "PLUGIN_CLIENT_CERT"

// pluginTLS makes the plugin's side of go-plugin's mutual TLS in place of
// go-plugin's own (whose P-521 certificate costs every start some 10 ms of
// CPU here and as much again in the host's handshake: package mtls): the
// same settings, a P-256 certificate. It returns the settings and the
// certificate as the handshake line carries it (base64 of the DER, no
// padding); nil when the host asked for no TLS.
func pluginTLS() (*tls.Config, string, error) {
	clientPEM := os.Getenv(envClientCert)
	if clientPEM == "" {
		return nil, "", nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(clientPEM)) {
		return nil, "", errors.New("the host's certificate (" + envClientCert + ") does not parse")
	}
	cert, err := mtls.SelfSigned()
	if err != nil {
		return nil, "", err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		RootCAs:      pool,
		MinVersion:   tls.VersionTLS12,
		ServerName:   "localhost",
	}, base64.RawStdEncoding.EncodeToString(cert.Certificate[0]), nil
}

// certOnHandshake puts cert into go-plugin's handshake line: given its own
// TLS settings (ServeConfig.TLSProvider), go-plugin leaves the line's
// certificate field (the sixth) empty, so the line goes through a pipe that
// fills it in on its way to the host. go-plugin writes nothing else to
// os.Stdout: it points os.Stdout elsewhere once the line is out.
func certOnHandshake(cert string) {
	r, w, err := os.Pipe()
	if err != nil {
		return
	}
	out := os.Stdout
	os.Stdout = w
	go func() {
		defer func() { _ = r.Close() }()
		line, err := bufio.NewReader(r).ReadString('\n')
		if err != nil {
			return
		}
		parts := strings.Split(strings.TrimSuffix(line, "\n"), "|")
		if len(parts) >= 6 && parts[5] == "" {
			parts[5] = cert
		}
		_, _ = out.WriteString(strings.Join(parts, "|") + "\n")
		_ = w.Close()
	}()
}

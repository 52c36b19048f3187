package frontend

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

func probe(t *testing.T, method, url, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// /healthz answers while the process serves; /readyz follows the
// readiness check, both to a probe that dialled another address than the
// listener's (a kubelet, a load balancer).
func TestProbes(t *testing.T) {
	var down atomic.Bool
	url, _ := serveHTTP(t, HTTPOptions{Ready: func(context.Context) error {
		if down.Load() {
			return errors.New("the shared store does not answer")
		}
		return nil
	}})
	base := strings.TrimSuffix(url, EndpointPath)
	for _, tc := range []struct {
		name, method, path, host string
		down                     bool
		code                     int
		body                     string
	}{
		{"alive", http.MethodGet, HealthPath, "", false, 200, "ok"},
		{"alive, probed by address", http.MethodGet, HealthPath, "10.1.2.3:8765", false, 200, "ok"},
		{"ready", http.MethodGet, ReadyPath, "10.1.2.3:8765", false, 200, "ready"},
		{"store down", http.MethodGet, ReadyPath, "", true, 503, "not ready: the shared store does not answer"},
		{"alive while not ready", http.MethodGet, HealthPath, "", true, 200, "ok"},
		{"ready again", http.MethodGet, ReadyPath, "", false, 200, "ready"},
		{"HEAD", http.MethodHead, ReadyPath, "", false, 200, ""},
		{"no POST", http.MethodPost, HealthPath, "", false, 405, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			down.Store(tc.down)
			code, body := probe(t, tc.method, base+tc.path, tc.host)
			if code != tc.code || !strings.Contains(body, tc.body) {
				t.Errorf("%s %s = %d %q, want %d %q", tc.method, tc.path, code, body, tc.code, tc.body)
			}
		})
	}
	// Without a readiness check the host is ready once it serves.
	url, _ = serveHTTP(t, HTTPOptions{})
	if code, body := probe(t, http.MethodGet, strings.TrimSuffix(url, EndpointPath)+ReadyPath, ""); code != 200 || body != "ready\n" {
		t.Errorf("GET /readyz without a check = %d %q", code, body)
	}
}

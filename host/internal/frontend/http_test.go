package frontend

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
)

// serveHTTP runs an HTTP front end over an empty registry on a loopback
// port until the test ends, and returns its base URL and port.
func serveHTTP(t *testing.T, opts HTTPOptions) (string, int) {
	t.Helper()
	return serveRegistryHTTP(t, registry.New(nil), opts)
}

// serveRegistryHTTP is serveHTTP for reg.
func serveRegistryHTTP(t *testing.T, reg *registry.Registry, opts HTTPOptions) (string, int) {
	t.Helper()
	f := New(reg, "test", hclog.NewNullLogger())
	ln, err := ListenHTTP("127.0.0.1:0", opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.ServeHTTP(ctx, ln, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeHTTP = %v", err)
		}
		_ = reg.Shutdown(t.Context(), 0)
	})
	port := ln.Addr().(*net.TCPAddr).Port
	return fmt.Sprintf("http://127.0.0.1:%d%s", port, EndpointPath), port
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func post(t *testing.T, url string, body io.Reader, header map[string]string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// zeros is an endless body that costs the sender no memory.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func allocated() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// TestHTTPBodyLimit performs the attack: a 32 MiB POST against a 1 MiB
// limit gets 413, and the host allocates nowhere near the body's size.
// The control raises the limit and shows that the same body, read, does
// cost its size (so the measurement would catch it).
func TestHTTPBodyLimit(t *testing.T) {
	const size = 32 << 20
	send := func(t *testing.T, limit int64, withLength bool) (int, uint64) {
		url, _ := serveHTTP(t, HTTPOptions{MaxBodyBytes: limit})
		body := io.LimitReader(zeros{}, size)
		if !withLength {
			body = io.MultiReader(body) // hides the length: a chunked body
		}
		before := allocated()
		resp, err := post(t, url, body, nil)
		after := allocated()
		if err != nil {
			t.Fatalf("POST of %d bytes: %v", size, err)
		}
		return resp.StatusCode, after - before
	}
	for _, withLength := range []bool{true, false} {
		t.Run(fmt.Sprintf("content-length=%v", withLength), func(t *testing.T) {
			code, grew := send(t, 1<<20, withLength)
			if code != http.StatusRequestEntityTooLarge {
				t.Errorf("status = %d, want 413", code)
			}
			if grew > 8<<20 {
				t.Errorf("the host allocated %d MiB for a refused %d MiB body", grew>>20, size>>20)
			}
		})
	}
	t.Run("control", func(t *testing.T) {
		code, grew := send(t, 2*size, false)
		if code == http.StatusRequestEntityTooLarge {
			t.Fatalf("control: status 413 under a %d MiB limit", 2*size>>20)
		}
		if grew < size {
			t.Errorf("control: reading the body allocated only %d MiB; the measurement proves nothing", grew>>20)
		}
	})
}

// TestHTTPSlowBodyIsCut performs a slow-body attack: headers, then one
// byte of body at a time. The request is answered 408 and the connection
// closed after the body timeout, although bytes keep coming.
func TestHTTPSlowBodyIsCut(t *testing.T) {
	const timeout = 500 * time.Millisecond
	_, port := serveHTTP(t, HTTPOptions{BodyTimeout: timeout})
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n", EndpointPath, port)
	stop := make(chan struct{})
	trickled := make(chan struct{})
	go func() {
		defer close(trickled)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	defer func() { close(stop); <-trickled }()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a slow body: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	elapsed := time.Since(start)
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("status = %d, want 408", resp.StatusCode)
	}
	if elapsed < timeout || elapsed > 5*time.Second {
		t.Errorf("cut after %s, want about %s", elapsed, timeout)
	}
	if !resp.Close {
		t.Error("the connection stays open after a timed-out body")
	}
}

// TestHTTPOrigin: only the listener's own origin (and Host) is accepted;
// a page served by another local port, or a rebound name, is refused.
func TestHTTPOrigin(t *testing.T) {
	url, port := serveHTTP(t, HTTPOptions{})
	other := port + 1
	if other > 65535 {
		other = port - 1
	}
	tests := []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"no origin", nil, http.StatusOK},
		{"own origin by address", map[string]string{"Origin": fmt.Sprintf("http://127.0.0.1:%d", port)}, http.StatusOK},
		{"own origin by name", map[string]string{"Origin": fmt.Sprintf("http://localhost:%d", port)}, http.StatusOK},
		{"own port, localhost host", map[string]string{"Host": fmt.Sprintf("localhost:%d", port)}, http.StatusOK},
		{"another local port", map[string]string{"Origin": fmt.Sprintf("http://127.0.0.1:%d", other)}, http.StatusForbidden},
		{"another local port by name", map[string]string{"Origin": fmt.Sprintf("http://localhost:%d", other)}, http.StatusForbidden},
		{"no port", map[string]string{"Origin": "http://localhost"}, http.StatusForbidden},
		{"another site", map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"null", map[string]string{"Origin": "null"}, http.StatusForbidden},
		{"dns rebinding", map[string]string{
			"Host":   fmt.Sprintf("evil.example:%d", port),
			"Origin": fmt.Sprintf("http://evil.example:%d", port),
		}, http.StatusForbidden},
		{"rebound host without origin", map[string]string{"Host": fmt.Sprintf("evil.example:%d", port)}, http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := post(t, url, strings.NewReader(initBody), tt.header)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.want {
				t.Errorf("POST with %v = %d, want %d", tt.header, resp.StatusCode, tt.want)
			}
		})
	}
}

package web_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/plugins/web"
	"github.com/switchboard-mcp/switchboard/sdk/sdktest"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction(sdktest.ReattachWaitFunction),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"))
}

func TestBlocked(t *testing.T) {
	for _, a := range []string{
		"127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "100.64.0.1", "169.254.169.254",
		"0.0.0.0", "255.255.255.255", "224.0.0.1", "::1", "::", "fe80::1", "fe80::1%eth0", "fc00::1", "fd12::1", "fec0::1",
		"::ffff:169.254.169.254", "::ffff:7f00:1", "64:ff9b::7f00:1", "::7f00:1", "2002:7f00:1::1", "ff02::1",
		"192.0.2.2", "198.51.100.1", "203.0.113.9", "2001:db8::1", "::ffff:192.0.2.2", "3fff::1",
		"::ffff:0:c000:202", "100::c000:202", "2001::c000:202", // round 19: forms of 192.0.2.2
	} {
		if web.Blocked(netip.MustParseAddr(a)) == "" {
			t.Errorf("Blocked(%s) = \"\", want refused", a)
		}
	}
	for _, a := range []string{"93.184.216.34", "2606:2800:220:1::1", "8.8.8.8", "::ffff:8.8.8.8"} {
		if r := web.Blocked(netip.MustParseAddr(a)); r != "" {
			t.Errorf("Blocked(%s) = %q, want allowed", a, r)
		}
	}
}

// resolver answers from a script, counting lookups; it never touches DNS.
type resolver struct {
	mu      sync.Mutex
	answers map[string][]string // host -> one answer per lookup (last repeats)
	calls   map[string]int
}

func (r *resolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls = map[string]int{}
	}
	list, ok := r.answers[host]
	if !ok {
		return nil, fmt.Errorf("no such host %s", host)
	}
	i := min(r.calls[host], len(list)-1)
	r.calls[host]++
	return []net.IPAddr{{IP: net.ParseIP(list[i])}}, nil
}

func fetch(t *testing.T, p *sdktest.Plugin, args map[string]any) (string, bool) {
	t.Helper()
	res := p.Call("fetch", args)
	return res.Text(), res.IsError
}

func server(t *testing.T, h http.HandlerFunc) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

var loopback = map[string]any{"allow_private_networks": []string{"127.0.0.0/8"}}

func TestFetchLoopbackOnlyWhenAllowed(t *testing.T) {
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, strings.Repeat("abcdefghij", 10))
	})
	deflt := sdktest.StartInProcess(t, web.New())
	if got, isErr := fetch(t, deflt, map[string]any{"url": srv.URL}); !isErr || !strings.Contains(got, "loopback") {
		t.Errorf("default fetch of %s = %q, want refused as loopback", srv.URL, got)
	}
	open := sdktest.StartInProcess(t, web.New(), sdktest.WithSettings(loopback))
	got, isErr := fetch(t, open, map[string]any{"url": srv.URL, "max_length": 30})
	if isErr || !strings.Contains(got, "Status: 200") || !strings.Contains(got, "abcdefghijabcdefghijabcdefghij") || !strings.Contains(got, "start_index=30") {
		t.Fatalf("fetch with 127.0.0.0/8 allowed = %q", got)
	}
	got, _ = fetch(t, open, map[string]any{"url": srv.URL, "start_index": 90, "max_length": 30})
	if !strings.Contains(got, "\nabcdefghij") || strings.Contains(got, "start_index=") {
		t.Errorf("fetch start_index=90 = %q", got)
	}
	pats := open.PermissionPatterns("fetch", map[string]any{"url": srv.URL + "/x"})
	if len(pats) != 1 || pats[0] != "127.0.0.1" {
		t.Errorf("PermissionPattern = %v; want the host", pats)
	}
}

// TestFetchOwnAddressRefused: a server listening on every address is
// reached through the machine's own interface address as through loopback
// (red team round 18: web fetched a local service at the machine's eth0
// address, 192.0.2.2). The fetch is refused and the server sees nothing.
func TestFetchOwnAddressRefused(t *testing.T) {
	var own netip.Addr
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap().Is4() && !ip.Unmap().IsLoopback() {
				own = ip.Unmap()
				break
			}
		}
	}
	if !own.IsValid() {
		t.Skip("this machine has no IPv4 address besides loopback")
	}
	l, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "INTERNAL")
	}), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	port := l.Addr().(*net.TCPAddr).Port
	p := sdktest.StartInProcess(t, web.New(), sdktest.WithSettings(map[string]any{"ignore_robots_txt": true}))
	for _, u := range []string{
		fmt.Sprintf("http://%s:%d/", own, port),
		fmt.Sprintf("http://[::ffff:%s]:%d/", own, port),
	} {
		got, isErr := fetch(t, p, map[string]any{"url": u})
		if !isErr || strings.Contains(got, "INTERNAL") {
			t.Errorf("fetch(%s) = %q, want refused", u, got)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the local server answered %d requests", n)
	}
	// The control: opened by allow_private_networks, the same address is
	// fetched (so the refusal above is the guard's, not the network's).
	open := sdktest.StartInProcess(t, web.New(), sdktest.WithSettings(map[string]any{"ignore_robots_txt": true, "allow_private_networks": []string{own.String() + "/32"}}))
	if got, isErr := fetch(t, open, map[string]any{"url": fmt.Sprintf("http://%s:%d/", own, port)}); isErr || !strings.Contains(got, "INTERNAL") {
		t.Errorf("with %s/32 allowed, fetch = %q, want the page", own, got)
	}
}

func TestSSRFVectors(t *testing.T) {
	res := &resolver{answers: map[string][]string{
		"internal.example":  {"10.0.0.5"},
		"rebind.example":    {"93.184.216.34", "10.0.0.7"},
		"metadata.example":  {"169.254.169.254"},
		"v6private.example": {"fd00::1"},
	}}
	p := sdktest.StartInProcess(t, web.NewWithOptions(web.Options{Resolver: res}),
		sdktest.WithSettings(map[string]any{"ignore_robots_txt": true}))
	vectors := []struct {
		url, why string
	}{
		{"http://2130706433/", "loopback"},
		{"http://017700000001/", "loopback"},
		{"http://0x7f000001/", "loopback"},
		{"http://0x7f.1/", "loopback"},
		{"http://127.1/", "loopback"},
		{"http://[::ffff:169.254.169.254]/", "link-local"},
		{"http://[::ffff:7f00:1]/", "loopback"},
		{"http://[::ffff:127.0.0.1]/", "loopback"},
		{"http://[fec0::1]/", "site-local"},
		{"http://[::1]:8080/", "loopback"},
		{"http://[fe80::1%25eth0]/", "link-local"},
		{"http://localhost./", "local name"},
		{"http://LOCALHOST/", "local name"},
		{"http://foo.localhost/", "local name"},
		{"http://169.254.169.254/latest/meta-data/", "link-local"},
		{"http://internal.example/", "10.0.0.5"},
		{"http://metadata.example/", "link-local"},
		{"http://v6private.example/", "unique-local"},
		{"file:///etc/passwd", "only http and https"},
		{"gopher://127.0.0.1/", "only http and https"},
		{"http://user:pw@example.com/", "user name or password"},
		{"http:///nohost", "no host"},
	}
	for _, v := range vectors {
		got, isErr := fetch(t, p, map[string]any{"url": v.url})
		if !isErr || !strings.Contains(got, v.why) {
			t.Errorf("fetch(%s) = %q, want refused mentioning %q", v.url, got, v.why)
		}
	}
	// DNS rebinding: the first answer (public) passes the early check, the
	// second (private) is what the dial would use, and it is refused before
	// any socket connects.
	got, isErr := fetch(t, p, map[string]any{"url": "http://rebind.example/"})
	if !isErr || !strings.Contains(got, "10.0.0.7") {
		t.Errorf("DNS rebinding: fetch = %q, want the second, private answer refused", got)
	}
	if res.calls["rebind.example"] < 2 {
		t.Errorf("rebind.example looked up %d times; the dial must resolve for itself", res.calls["rebind.example"])
	}
}

func TestRedirects(t *testing.T) {
	var target string
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			http.NotFound(w, r)
		case "/to-metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		case "/to-decimal":
			http.Redirect(w, r, "http://2852039166/", http.StatusFound)
		case "/to-file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/hop":
			http.Redirect(w, r, target, http.StatusMovedPermanently)
		default:
			fmt.Fprint(w, "landed")
		}
	})
	target = srv.URL + "/final"
	p := sdktest.StartInProcess(t, web.New(), sdktest.WithSettings(loopback))
	for path, want := range map[string]string{
		"/to-metadata": "link-local",
		"/to-decimal":  "link-local",
		"/to-file":     "refused",
		"/loop":        "stopped after 5 redirects",
	} {
		if got, isErr := fetch(t, p, map[string]any{"url": srv.URL + path}); !isErr || !strings.Contains(got, want) {
			t.Errorf("fetch(%s) = %q, want refused with %q", path, got, want)
		}
	}
	if got, isErr := fetch(t, p, map[string]any{"url": srv.URL + "/hop"}); isErr || !strings.Contains(got, "URL: "+target) || !strings.Contains(got, "landed") {
		t.Errorf("allowed redirect = %q, want the final URL named", got)
	}
}

func TestCaps(t *testing.T) {
	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	zeros := make([]byte, 1<<20)
	for i := 0; i < 64; i++ {
		_, _ = zw.Write(zeros)
	}
	_ = zw.Close()
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write(bytes.Repeat([]byte("x"), 6<<20))
		case "/bomb":
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(bomb.Bytes())
		case "/slow":
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(200)
			for i := 0; i < 50; i++ {
				fmt.Fprint(w, "tick ")
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		case "/binary":
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write([]byte{0, 1, 2, 3})
		case "/missing":
			http.NotFound(w, r)
		}
	})
	// The timeout is short only for the slow page: 5 MB through the race
	// detector on a loaded machine may take more than a second.
	settings := func(timeout string) sdktest.Option {
		return sdktest.WithSettings(map[string]any{
			"allow_private_networks": []string{"127.0.0.0/8"}, "timeout": timeout, "ignore_robots_txt": true,
		})
	}
	p, quick := sdktest.StartInProcess(t, web.New(), settings("60s")), sdktest.StartInProcess(t, web.New(), settings("1s"))
	for path, want := range map[string]string{
		"/big":     "larger than the 5242880-byte limit",
		"/bomb":    "larger than the 5242880-byte limit",
		"/slow":    "within 1s",
		"/binary":  "neither text nor an image",
		"/missing": "Status: 404",
	} {
		via := p
		if path == "/slow" {
			via = quick
		}
		if got, isErr := fetch(t, via, map[string]any{"url": srv.URL + path}); !isErr || !strings.Contains(got, want) {
			t.Errorf("fetch(%s) = %q, want refused with %q", path, got[:min(len(got), 300)], want)
		}
	}
}

func TestRobotsTxt(t *testing.T) {
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: *\nDisallow: /private\n")
			return
		}
		fmt.Fprint(w, "page "+r.URL.Path)
	})
	p := sdktest.StartInProcess(t, web.New(), sdktest.WithSettings(loopback))
	if got, isErr := fetch(t, p, map[string]any{"url": srv.URL + "/private/x"}); !isErr || !strings.Contains(got, "robots.txt disallows /private/x") {
		t.Errorf("disallowed path = %q", got)
	}
	if got, isErr := fetch(t, p, map[string]any{"url": srv.URL + "/public"}); isErr || !strings.Contains(got, "page /public") {
		t.Errorf("allowed path = %q", got)
	}
	ignoring := sdktest.StartInProcess(t, web.New(), sdktest.WithSettings(map[string]any{"allow_private_networks": []string{"127.0.0.0/8"}, "ignore_robots_txt": true}))
	if got, isErr := fetch(t, ignoring, map[string]any{"url": srv.URL + "/private/x"}); isErr || !strings.Contains(got, "page /private/x") {
		t.Errorf("ignore_robots_txt = %q", got)
	}
}

func TestContentKinds(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	article, err := os.ReadFile(filepath.Join("testdata", "html", "article.html"))
	if err != nil {
		t.Fatal(err)
	}
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			http.NotFound(w, r)
		case "/img":
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write(png)
		case "/json":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"a": 1}`)
		case "/article":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write(article)
		}
	})
	p := sdktest.StartInProcess(t, web.New(), sdktest.WithSettings(loopback))
	res := p.Call("fetch", map[string]any{"url": srv.URL + "/img"})
	if img := res.Content[1]; img.Type != "image" || img.MimeType != "image/png" || !bytes.Equal(img.Data, png) {
		t.Errorf("image fetch = %v", res)
	}
	if got, _ := fetch(t, p, map[string]any{"url": srv.URL + "/json"}); !strings.Contains(got, `{"a": 1}`) {
		t.Errorf("json = %q", got)
	}
	got, isErr := fetch(t, p, map[string]any{"url": srv.URL + "/article"})
	if isErr || !strings.Contains(got, "Switchboard 1.0 is out") || strings.Contains(got, "Privacy") || !strings.Contains(got, "["+"filesystem]("+srv.URL+"/docs/filesystem)") {
		t.Errorf("article as Markdown = %q", got)
	}
	if got, _ := fetch(t, p, map[string]any{"url": srv.URL + "/article", "raw": true}); !strings.Contains(got, "<footer>") {
		t.Errorf("raw article = %q", got[:min(200, len(got))])
	}
}

func TestHTMLToMarkdownGolden(t *testing.T) {
	for _, name := range []string{"article", "simple"} {
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", "html", name+".html"))
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse("https://switchboard.example/blog/" + name)
			got, err := web.HTMLToMarkdown(in, u)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "html", name+".md")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if got != string(want) {
				t.Errorf("Markdown of %s:\n%s\nwant:\n%s", name, got, want)
			}
		})
	}
}

func TestSearch(t *testing.T) {
	searx := server(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/search" || r.URL.Query().Get("format") != "json" {
			http.Error(w, "bad", http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"results": [`)
		for i := 1; i <= 12; i++ {
			if i > 1 {
				fmt.Fprint(w, ",")
			}
			fmt.Fprintf(w, `{"title": "Result %d for %s", "url": "https://r%d.example/", "content": "snippet %d"}`, i, r.URL.Query().Get("q"), i, i)
		}
		fmt.Fprint(w, `]}`)
	})
	none := sdktest.StartInProcess(t, web.New())
	if none.Tool("search") != nil {
		t.Error("search is listed without a provider")
	}
	// The provider is trusted config: reachable on loopback without
	// opening loopback for fetch.
	p := sdktest.StartInProcess(t, web.New(), sdktest.WithSettings(map[string]any{"search": map[string]any{"provider": "searxng", "url": searx.URL}}))
	if p.Tool("search") == nil {
		t.Fatal("search is not listed with a provider")
	}
	got := p.Call("search", map[string]any{"query": "mcp hosts", "max_results": 3}).Text()
	if !strings.Contains(got, "1. Result 1 for mcp hosts") || !strings.Contains(got, "3. Result 3") || strings.Contains(got, "Result 4") {
		t.Errorf("search = %q", got)
	}
	if got := p.Call("search", map[string]any{"query": "x", "max_results": 50}).Text(); strings.Contains(got, "Result 11") {
		t.Errorf("max_results is not capped at 10: %q", got)
	}
	if got, isErr := fetch(t, p, map[string]any{"url": searx.URL + "/search"}); !isErr || !strings.Contains(got, "loopback") {
		t.Errorf("fetch of the provider's loopback address = %q, want refused", got)
	}
}

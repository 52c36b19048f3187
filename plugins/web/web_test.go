package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/plugins/web"
	"github.com/switchboard-mcp/switchboard/sdk/sdktest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction(sdktest.ReattachWaitFunction),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"))
}

func TestBlocked(t *testing.T) {
	for _, a := range []string{"127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "100.64.0.1", "169.254.169.254",
		"0.0.0.0", "255.255.255.255", "224.0.0.1", "::1", "::", "fe80::1", "fc00::1", "fec0::1",
		"::ffff:169.254.169.254", "::ffff:7f00:1", "64:ff9b::7f00:1", "::7f00:1"} {
		if web.Blocked(netip.MustParseAddr(a)) == "" {
			t.Errorf("Blocked(%s) = \"\", want refused", a)
		}
	}
	for _, a := range []string{"93.184.216.34", "2606:2800:220:1::1", "8.8.8.8"} {
		if r := web.Blocked(netip.MustParseAddr(a)); r != "" {
			t.Errorf("Blocked(%s) = %q, want allowed", a, r)
		}
	}
}

func TestFetch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, strings.Repeat("abcdefghij", 10))
	}))
	t.Cleanup(srv.Close)

	deflt := sdktest.StartInProcess(t, web.New())
	res := deflt.Call("fetch", map[string]any{"url": srv.URL})
	if !res.GetIsError() || !strings.Contains(sdktest.Text(res), "loopback") {
		t.Errorf("default fetch of %s = %q, want refused as loopback", srv.URL, sdktest.Text(res))
	}
	for _, u := range []string{"http://2130706433/", "http://017700000001/", "http://0x7f000001/", "http://[::ffff:169.254.169.254]/",
		"http://[::1]/", "http://localhost./", "file:///etc/passwd", "http://user:pw@example.com/"} {
		res := deflt.Call("fetch", map[string]any{"url": u})
		if !res.GetIsError() {
			t.Errorf("fetch(%s) = %q, want refused", u, sdktest.Text(res))
		}
	}

	open := sdktest.StartInProcess(t, web.New(), sdktest.WithSettings(map[string]any{"allow_private_networks": []string{"127.0.0.0/8"}}))
	res = open.Call("fetch", map[string]any{"url": srv.URL, "max_length": 30})
	got := sdktest.Text(res)
	if res.GetIsError() || !strings.Contains(got, "abcdefghij") || !strings.Contains(got, "start_index=30") {
		t.Errorf("fetch with 127.0.0.0/8 allowed = %q", got)
	}
	res = open.Call("fetch", map[string]any{"url": srv.URL + "/redirect"})
	if !res.GetIsError() || !strings.Contains(sdktest.Text(res), "link-local") {
		t.Errorf("redirect to metadata = %q, want refused", sdktest.Text(res))
	}
}

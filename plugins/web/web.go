// Package web is the built-in web plugin: fetches http(s) URLs with no way
// to reach loopback, private, link-local or other non-public addresses
// unless the config opens a range on purpose.
package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/sdk"
)

// Name is the built-in's server name.
const Name = "web"

// Version is the plugin's version.
const Version = "0.1.0"

// Limits on one fetch.
const (
	maxBody      = 5 << 20
	fetchTimeout = 30 * time.Second
	maxRedirects = 5
	defaultMax   = 20000
)

// Settings is the `builtin "web" {}` block.
type Settings struct {
	// AllowPrivateNetworks opens CIDR ranges that are refused by default
	// (for example "127.0.0.0/8" for a local test server).
	AllowPrivateNetworks []string `hcl:"allow_private_networks,optional" json:"allow_private_networks,omitempty"`
	// UserAgent is sent with every request.
	UserAgent string `hcl:"user_agent,optional" json:"user_agent,omitempty"`
}

type plugin struct {
	allowed   []netip.Prefix
	userAgent string
	client    *http.Client
}

// New returns the web plugin.
func New() *sdk.Server {
	s := sdk.NewServer(Name, Version, sdk.WithInstructions(
		"Fetches public web pages. Private and local network addresses are refused."))
	p := &plugin{}
	s.OnConfigure(func(_ context.Context, cfg sdk.Config) error { return p.configure(cfg) })
	sdk.AddTool(s, sdk.Tool{
		Name:        "fetch",
		Title:       "Fetch a URL",
		Description: "Fetch an http or https URL and return its content as text. Long content is cut at max_length; fetch the rest with start_index.",
		ReadOnly:    true,
		OpenWorld:   sdk.Bool(true),
		PermissionPattern: func(_ context.Context, args json.RawMessage) ([]string, error) {
			var a struct {
				URL string `json:"url"`
			}
			_ = json.Unmarshal(args, &a)
			u, err := url.Parse(a.URL)
			if err != nil || u.Hostname() == "" {
				return []string{"invalid-url"}, nil
			}
			return []string{strings.ToLower(u.Hostname())}, nil
		},
	}, p.fetch)
	return s
}

func (p *plugin) configure(cfg sdk.Config) error {
	var st Settings
	if err := cfg.Decode(&st); err != nil {
		return err
	}
	for _, c := range st.AllowPrivateNetworks {
		pr, err := netip.ParsePrefix(c)
		if err != nil {
			return fmt.Errorf("web: allow_private_networks: %q is not a CIDR range such as 127.0.0.0/8", c)
		}
		p.allowed = append(p.allowed, pr.Masked())
	}
	p.userAgent = st.UserAgent
	if p.userAgent == "" {
		p.userAgent = "Switchboard-web/" + Version + " (+MCP tool server)"
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, Control: p.checkDial}
	p.client = &http.Client{
		Timeout: fetchTimeout,
		Transport: &http.Transport{
			DialContext:            dialer.DialContext,
			Proxy:                  nil, // a proxy would dial for us, past the check
			TLSHandshakeTimeout:    10 * time.Second,
			ResponseHeaderTimeout:  fetchTimeout,
			MaxResponseHeaderBytes: 1 << 20,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			return checkURL(req.URL)
		},
	}
	return nil
}

// checkDial runs on the address actually dialled, after DNS, so a name
// that resolves (or re-resolves) to a private address is refused.
func (p *plugin) checkDial(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("refusing to dial %s: not an IP address", address)
	}
	addr := ap.Addr()
	for _, pr := range p.allowed {
		if pr.Contains(addr.Unmap()) {
			return nil
		}
	}
	if reason := Blocked(addr); reason != "" {
		return fmt.Errorf("refusing to connect to %s: %s address (open it with allow_private_networks if you mean it)", addr, reason)
	}
	return nil
}

var blockedRanges = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible"},
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "NAT64"},
	{netip.MustParsePrefix("fc00::/7"), "unique-local"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// Blocked returns why addr may not be dialled by default, or "".
// IPv4-mapped addresses are judged as the IPv4 address they carry.
func Blocked(addr netip.Addr) string {
	if addr.Is4In6() {
		if r := Blocked(addr.Unmap()); r != "" {
			return r + " (IPv4-mapped)"
		}
		return ""
	}
	if addr.Is4() && addr == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return "broadcast"
	}
	for _, b := range blockedRanges {
		if b.prefix.Contains(addr) {
			return b.reason
		}
	}
	return ""
}

// checkURL refuses schemes other than http(s) and URLs with credentials.
func checkURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("only http and https URLs are fetched, not %q", u.Scheme)
	}
	if u.User != nil {
		return errors.New("URLs with a user name or password are refused")
	}
	if u.Hostname() == "" {
		return errors.New("the URL has no host")
	}
	return nil
}

type fetchArgs struct {
	URL        string `json:"url" jsonschema:"description=The http or https URL to fetch"`
	MaxLength  int    `json:"max_length,omitempty" jsonschema:"description=Maximum characters to return (default 20000),minimum=1"`
	StartIndex int    `json:"start_index,omitempty" jsonschema:"description=Character offset to start from, to read past a cut,minimum=0"`
	Raw        bool   `json:"raw,omitempty" jsonschema:"description=Return the body as served, without conversion"`
}

func (p *plugin) fetch(ctx context.Context, _ *sdk.Request, in fetchArgs) (*sdk.Result, error) {
	u, err := url.Parse(in.URL)
	if err != nil {
		return sdk.Errorf("invalid URL %q: %v", in.URL, err), nil
	}
	if err := checkURL(u); err != nil {
		return sdk.Errorf("%v", err), nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return sdk.Errorf("invalid URL %q: %v", in.URL, err), nil
	}
	req.Header.Set("User-Agent", p.userAgent)
	resp, err := p.client.Do(req)
	if err != nil {
		return sdk.Errorf("fetch %s failed: %v", in.URL, err), nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return sdk.Errorf("reading %s failed: %v", in.URL, err), nil
	}
	if len(body) > maxBody {
		return sdk.Errorf("%s is larger than the %d-byte limit", in.URL, maxBody), nil
	}
	ctype := resp.Header.Get("Content-Type")
	if !utf8.Valid(body) {
		return sdk.Errorf("%s returned %s that is not text (%d bytes)", resp.Request.URL, ctype, len(body)), nil
	}
	text := []rune(string(body))
	maxLen := in.MaxLength
	if maxLen <= 0 {
		maxLen = defaultMax
	}
	start := min(in.StartIndex, len(text))
	end := min(start+maxLen, len(text))
	var b strings.Builder
	fmt.Fprintf(&b, "URL: %s\nStatus: %d\nContent-Type: %s\n\n", resp.Request.URL, resp.StatusCode, ctype)
	b.WriteString(string(text[start:end]))
	if end < len(text) {
		fmt.Fprintf(&b, "\n\n[Content cut at %d of %d characters: call fetch again with start_index=%d for more.]", end, len(text), end)
	}
	if resp.StatusCode >= 400 {
		return sdk.Errorf("%s", b.String()), nil
	}
	return sdk.Text(b.String()), nil
}

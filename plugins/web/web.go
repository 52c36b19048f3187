// Package web is the built-in web plugin: fetches http(s) pages as clean
// Markdown, and searches through a configured provider, with no way to
// reach loopback, private, link-local or other non-public addresses unless
// the config opens a range on purpose.
//
// Every connection goes through a guard: the host is resolved once, every
// address it resolves to must be public (or in allow_private_networks),
// and the connection is made to exactly those addresses, checked once more
// on the socket. Numeric hosts in any form (2130706433, 0x7f000001,
// 017700000001, IPv4-mapped IPv6) are addresses, not names. Redirects are
// followed at most five times, each checked the same way.
package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/sdk"
)

// Name is the built-in's server name.
const Name = "web"

// Version is the plugin's version.
const Version = "0.2.0"

// Defaults.
const (
	DefaultMaxBody   = 5 << 20
	DefaultTimeout   = 30 * time.Second
	DefaultMaxLength = 20000
	maxRedirects     = 5
)

// Settings is the `builtin "web" {}` block.
type Settings struct {
	// AllowPrivateNetworks opens CIDR ranges that are refused by default
	// (for example "127.0.0.0/8" for a local test server).
	AllowPrivateNetworks []string `hcl:"allow_private_networks,optional" json:"allow_private_networks,omitempty"`
	// UserAgent is sent with every request and used for robots.txt.
	UserAgent string `hcl:"user_agent,optional" json:"user_agent,omitempty"`
	// IgnoreRobotsTxt fetches pages robots.txt disallows.
	IgnoreRobotsTxt bool `hcl:"ignore_robots_txt,optional" json:"ignore_robots_txt,omitempty"`
	// Timeout bounds one fetch, redirects included ("30s").
	Timeout string `hcl:"timeout,optional" json:"timeout,omitempty"`
	// MaxBodyBytes caps a response body after decompression (5 MB).
	MaxBodyBytes int64 `hcl:"max_body_bytes,optional" json:"max_body_bytes,omitempty"`
	// Search configures the search tool; without it there is none.
	Search *SearchSettings `hcl:"search,block" json:"search,omitempty"`
}

// SearchSettings is the `search {}` block inside `builtin "web" {}`.
type SearchSettings struct {
	// Provider is the search API: "searxng".
	Provider string `hcl:"provider" json:"provider"`
	// URL is the provider's base URL (a SearXNG instance with the JSON
	// format enabled). It is trusted: it may be on a private network.
	URL string `hcl:"url" json:"url"`
}

// Options are for embedding and tests.
type Options struct {
	// Resolver replaces the system resolver.
	Resolver Resolver
}

type plugin struct {
	opts       Options
	guard      *guard
	userAgent  string
	robots     bool
	timeout    time.Duration
	maxBody    int64
	client     *http.Client
	search     *SearchSettings
	searchHTTP *http.Client

	robotsMu    sync.Mutex
	robotsCache map[string]*robotsEntry
}

// New returns the web plugin.
func New() *sdk.Server { return NewWithOptions(Options{}) }

// NewWithOptions returns the web plugin with a custom resolver.
func NewWithOptions(o Options) *sdk.Server {
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	s := sdk.NewServer(Name, Version, sdk.WithInstructions(
		"Fetches public web pages as Markdown. Private and local network addresses are refused."))
	p := &plugin{opts: o, robotsCache: map[string]*robotsEntry{}}
	s.OnConfigure(func(_ context.Context, cfg sdk.Config) error {
		if err := p.configure(cfg); err != nil {
			return err
		}
		if p.search != nil {
			sdk.AddTool(s, sdk.Tool{
				Name: "search", Title: "Search the web",
				Description: "Search the web and return the top results (title, URL, snippet).",
				ReadOnly:    true, OpenWorld: sdk.Bool(true),
			}, p.runSearch)
		}
		return nil
	})
	sdk.AddTool(s, sdk.Tool{
		Name:        "fetch",
		Title:       "Fetch a URL",
		Description: "Fetch an http or https URL. HTML comes back as Markdown of the page's main content, text and JSON as text, images as images. Long content is cut at max_length; the result says which start_index fetches the rest. raw returns the body as served.",
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
			return []string{strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")}, nil
		},
	}, p.fetch)
	return s
}

func (p *plugin) configure(cfg sdk.Config) error {
	var st Settings
	if err := cfg.Decode(&st); err != nil {
		return err
	}
	g := &guard{resolver: p.opts.Resolver}
	for _, c := range st.AllowPrivateNetworks {
		pr, err := netip.ParsePrefix(c)
		if err != nil {
			return fmt.Errorf("web: allow_private_networks: %q is not a CIDR range such as 127.0.0.0/8", c)
		}
		g.allowed = append(g.allowed, pr.Masked())
	}
	p.guard = g
	p.userAgent = st.UserAgent
	if p.userAgent == "" {
		p.userAgent = "SwitchboardFetch/" + Version + " (+https://modelcontextprotocol.io; autonomous)"
	}
	p.robots = !st.IgnoreRobotsTxt
	p.timeout = DefaultTimeout
	if st.Timeout != "" {
		d, err := time.ParseDuration(st.Timeout)
		if err != nil || d <= 0 {
			return fmt.Errorf("web: timeout %q is not a positive duration", st.Timeout)
		}
		p.timeout = d
	}
	p.maxBody = st.MaxBodyBytes
	if p.maxBody <= 0 {
		p.maxBody = DefaultMaxBody
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, Control: g.control}
	p.client = &http.Client{
		Timeout: p.timeout,
		Transport: &http.Transport{
			DialContext:            g.dialContext(dialer),
			Proxy:                  nil, // a proxy would connect for us, past the guard
			TLSHandshakeTimeout:    10 * time.Second,
			ResponseHeaderTimeout:  p.timeout,
			MaxResponseHeaderBytes: 1 << 20,
			MaxIdleConnsPerHost:    2,
			IdleConnTimeout:        30 * time.Second,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			if err := checkURL(req.URL); err != nil {
				return fmt.Errorf("redirect to %s refused: %w", req.URL, err)
			}
			if _, err := g.resolve(req.Context(), req.URL.Hostname()); err != nil {
				return fmt.Errorf("redirect to %s refused: %w", req.URL, err)
			}
			return nil
		},
	}
	if st.Search != nil {
		if st.Search.Provider != "searxng" {
			return fmt.Errorf("web: search provider %q is not supported; use \"searxng\"", st.Search.Provider)
		}
		if u, err := url.Parse(st.Search.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("web: search url %q is not an http(s) URL", st.Search.URL)
		}
		p.search = st.Search
		p.searchHTTP = &http.Client{Timeout: p.timeout}
	}
	return nil
}

// checkURL refuses schemes other than http(s) and URLs with credentials.
func checkURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("only http and https URLs are fetched, not %q", u.Scheme)
	}
	if u.User != nil {
		return fmt.Errorf("URLs with a user name or password are refused")
	}
	if u.Hostname() == "" {
		return fmt.Errorf("the URL has no host")
	}
	return nil
}

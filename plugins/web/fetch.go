package web

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"codeberg.org/readeck/go-readability/v2"
	htmltomarkdown "github.com/JohannesKaufmann/html-to-markdown/v2"
	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/temoto/robotstxt"

	"github.com/switchboard-mcp/switchboard/sdk"
)

type fetchArgs struct {
	URL        string `json:"url" jsonschema:"description=The http or https URL to fetch"`
	MaxLength  int    `json:"max_length,omitempty" jsonschema:"description=Maximum characters to return (default 20000),minimum=1,maximum=1000000"`
	StartIndex int    `json:"start_index,omitempty" jsonschema:"description=Character offset to start from, to read past a cut,minimum=0"`
	Raw        bool   `json:"raw,omitempty" jsonschema:"description=Return the body as served, without conversion to Markdown"`
}

func (p *plugin) fetch(ctx context.Context, _ *sdk.Request, in fetchArgs) (*sdk.Result, error) {
	u, err := url.Parse(strings.TrimSpace(in.URL))
	if err != nil {
		return sdk.ErrorResult("invalid URL %q: %v", in.URL, err), nil
	}
	if err := checkURL(u); err != nil {
		return sdk.ErrorResult("%v", err), nil
	}
	if in.MaxLength < 0 || in.StartIndex < 0 || in.MaxLength > 1000000 {
		return sdk.ErrorResult("max_length must be 1..1000000 and start_index at least 0"), nil
	}
	// Refuse early with a clear reason; the dial checks again.
	if _, err := p.guard.resolve(ctx, u.Hostname()); err != nil {
		return sdk.ErrorResult("fetch %s refused: %v", u, err), nil
	}
	if p.robots {
		if err := p.robotsAllow(ctx, u); err != nil {
			return sdk.ErrorResult("%v", err), nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return sdk.ErrorResult("invalid URL %q: %v", in.URL, err), nil
	}
	req.Header.Set("User-Agent", p.userAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/markdown,text/plain,application/json,*/*;q=0.8")
	resp, err := p.client.Do(req)
	if err != nil {
		if ctx.Err() != nil && ctx.Err() != context.Canceled {
			return sdk.ErrorResult("fetch %s: no complete answer within %s", u, p.timeout), nil
		}
		return sdk.ErrorResult("fetch %s failed: %v", u, err), nil
	}
	defer resp.Body.Close()
	// The transport decompresses gzip itself; the limit applies to what
	// comes out, so a compression bomb stops at the cap.
	body, err := io.ReadAll(io.LimitReader(resp.Body, p.maxBody+1))
	if err != nil {
		if ctx.Err() != nil {
			return sdk.ErrorResult("fetch %s: the body did not arrive within %s", u, p.timeout), nil
		}
		return sdk.ErrorResult("reading %s failed: %v", u, err), nil
	}
	if int64(len(body)) > p.maxBody {
		return sdk.ErrorResult("%s is larger than the %d-byte limit (after decompression)", resp.Request.URL, p.maxBody), nil
	}
	final := resp.Request.URL
	ctype := resp.Header.Get("Content-Type")
	mediaType, _, _ := mime.ParseMediaType(ctype)
	if mediaType == "" {
		mediaType = http.DetectContentType(body)
		mediaType, _, _ = strings.Cut(mediaType, ";")
	}
	header := fmt.Sprintf("URL: %s\nStatus: %d\nContent-Type: %s\n", final, resp.StatusCode, ctype)

	if strings.HasPrefix(mediaType, "image/") && !in.Raw {
		r := sdk.Text(header).WithImage(body, mediaType)
		if resp.StatusCode >= 400 {
			return sdk.ErrorResult("%s", header), nil
		}
		return r, nil
	}
	var text string
	switch {
	case in.Raw:
		text = string(body)
	case mediaType == "text/html" || mediaType == "application/xhtml+xml":
		text, err = HTMLToMarkdown(body, final)
		if err != nil {
			return sdk.ErrorResult("%sconverting the page failed: %v; try raw", header, err), nil
		}
	case isText(mediaType):
		text = string(body)
	default:
		return sdk.ErrorResult("%s%s is %s, which is neither text nor an image (%d bytes)", header, final, mediaType, len(body)), nil
	}
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	page, note := window(text, in.StartIndex, in.MaxLength)
	out := header + "\n" + page + note
	if resp.StatusCode >= 400 {
		return sdk.ErrorResult("%s", out), nil
	}
	return sdk.Text(out), nil
}

func isText(mt string) bool {
	return strings.HasPrefix(mt, "text/") || mt == "application/json" || strings.HasSuffix(mt, "+json") ||
		mt == "application/xml" || strings.HasSuffix(mt, "+xml") || mt == "application/javascript" || mt == "application/x-ndjson"
}

// window cuts text to [start, start+max) in characters and says how to get
// the rest.
func window(text string, start, maxLen int) (string, string) {
	if maxLen <= 0 {
		maxLen = DefaultMaxLength
	}
	runes := []rune(text)
	if start >= len(runes) {
		if len(runes) == 0 {
			return "", ""
		}
		return "", fmt.Sprintf("\n[No more content: start_index %d is past the end (%d characters).]", start, len(runes))
	}
	end := min(start+maxLen, len(runes))
	note := ""
	if end < len(runes) {
		note = fmt.Sprintf("\n\n[Content cut at character %d of %d. Call fetch again with start_index=%d to get more.]", end, len(runes), end)
	}
	return string(runes[start:end]), note
}

// HTMLToMarkdown extracts a page's main content (Readability) and renders
// it as Markdown with absolute links. A page Readability cannot make sense
// of is converted whole.
func HTMLToMarkdown(body []byte, pageURL *url.URL) (string, error) {
	var title string
	content := body
	if art, err := readability.FromReader(bytes.NewReader(body), pageURL); err == nil && art.Node != nil {
		var b bytes.Buffer
		if art.RenderHTML(&b) == nil && b.Len() > 0 {
			content = b.Bytes()
			title = strings.TrimSpace(art.Title())
		}
	}
	md, err := htmltomarkdown.ConvertString(string(content), converter.WithDomain(pageURL.Scheme+"://"+pageURL.Host))
	if err != nil {
		return "", err
	}
	md = strings.TrimSpace(md)
	if title != "" && !strings.HasPrefix(md, "# ") {
		md = "# " + title + "\n\n" + md
	}
	return md + "\n", nil
}

type robotsEntry struct {
	data    *robotstxt.RobotsData
	err     error
	fetched time.Time
}

// robotsTTL is how long a site's robots.txt is trusted.
const robotsTTL = time.Hour

// robotsAllow fetches (and caches) the site's robots.txt and refuses paths
// it disallows for our User-Agent. A missing robots.txt allows everything;
// one that cannot be fetched (5xx, network) refuses, as RFC 9309 asks.
func (p *plugin) robotsAllow(ctx context.Context, u *url.URL) error {
	key := u.Scheme + "://" + u.Host
	p.robotsMu.Lock()
	e := p.robotsCache[key]
	p.robotsMu.Unlock()
	if e == nil || time.Since(e.fetched) > robotsTTL {
		e = p.fetchRobots(ctx, key)
		p.robotsMu.Lock()
		p.robotsCache[key] = e
		p.robotsMu.Unlock()
	}
	if e.err != nil {
		return fmt.Errorf("%s/robots.txt could not be read (%v), so fetching is not allowed; set ignore_robots_txt = true in the web block to fetch anyway", key, e.err)
	}
	agent, _, _ := strings.Cut(p.userAgent, "/")
	path := u.EscapedPath()
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	if path == "" {
		path = "/"
	}
	if !e.data.TestAgent(path, agent) {
		return fmt.Errorf("%s/robots.txt disallows %s for %s; the site asks automated agents not to fetch it (set ignore_robots_txt = true in the web block to override)", key, path, agent)
	}
	return nil
}

var robotsFlight sync.Mutex

func (p *plugin) fetchRobots(ctx context.Context, base string) *robotsEntry {
	robotsFlight.Lock()
	defer robotsFlight.Unlock()
	ctx, cancel := context.WithTimeout(ctx, min(p.timeout, 10*time.Second))
	defer cancel()
	e := &robotsEntry{fetched: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/robots.txt", nil)
	if err != nil {
		e.err = err
		return e
	}
	req.Header.Set("User-Agent", p.userAgent)
	resp, err := p.client.Do(req)
	if err != nil {
		e.err = err
		return e
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 512<<10))
	if err != nil {
		e.err = err
		return e
	}
	if resp.StatusCode >= 500 {
		e.err = fmt.Errorf("status %d", resp.StatusCode)
		return e
	}
	e.data, e.err = robotstxt.FromStatusAndBytes(resp.StatusCode, body)
	return e
}

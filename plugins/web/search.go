package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/switchboard-mcp/switchboard/sdk"
)

type searchArgs struct {
	Query      string `json:"query" jsonschema:"description=What to search for"`
	MaxResults int    `json:"max_results,omitempty" jsonschema:"description=How many results (default 5, at most 10),minimum=1,maximum=10"`
}

// runSearch queries the configured SearXNG instance's JSON API.
func (p *plugin) runSearch(ctx context.Context, _ *sdk.Request, in searchArgs) (*sdk.Result, error) {
	q := strings.TrimSpace(in.Query)
	if q == "" {
		return sdk.ErrorResult("query is empty"), nil
	}
	n := in.MaxResults
	if n <= 0 {
		n = 5
	}
	n = min(n, 10)
	u, _ := url.Parse(strings.TrimRight(p.search.URL, "/") + "/search")
	u.RawQuery = url.Values{"q": {q}, "format": {"json"}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", p.userAgent)
	req.Header.Set("Accept", "application/json")
	resp, err := p.searchHTTP.Do(req)
	if err != nil {
		return sdk.ErrorResult("search provider %s failed: %v", p.search.URL, err), nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, p.maxBody))
	if err != nil {
		return sdk.ErrorResult("search provider %s failed: %v", p.search.URL, err), nil
	}
	if resp.StatusCode != http.StatusOK {
		return sdk.ErrorResult("search provider %s answered %d (is format=json enabled in its settings?)", p.search.URL, resp.StatusCode), nil
	}
	var r struct {
		Results []struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Content string `json:"content"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return sdk.ErrorResult("search provider %s did not answer JSON: %v", p.search.URL, err), nil
	}
	if len(r.Results) == 0 {
		return sdk.Textf("No results for %q.", q), nil
	}
	var b strings.Builder
	for i, res := range r.Results {
		if i == n {
			break
		}
		fmt.Fprintf(&b, "%d. %s\n   %s\n   %s\n\n", i+1, res.Title, res.URL, strings.TrimSpace(res.Content))
	}
	return sdk.Text(strings.TrimRight(b.String(), "\n")), nil
}

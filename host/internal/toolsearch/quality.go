package toolsearch

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

// The retrieval-quality set (testdata/): catalogue.json, servers and their
// tools (the built-ins as `switchboard tools --json` lists them, and
// synthetic servers modelled on well-known MCP servers), and queries.json,
// natural-language requests with the tools that should answer them.

// Query is one request of a query set and the canonical names of the
// tools that answer it.
type Query struct {
	Query  string   `json:"query"`
	Expect []string `json:"expect"`
}

// LoadCatalogue reads a catalogue file: {"servers": [{"name", "tools":
// [{"name", "description", "params": {name: description}}]}]}.
func LoadCatalogue(path string) ([]Doc, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c struct {
		Servers []struct {
			Name  string `json:"name"`
			Tools []struct {
				Name        string            `json:"name"`
				Title       string            `json:"title"`
				Description string            `json:"description"`
				Params      map[string]string `json:"params"`
			} `json:"tools"`
		} `json:"servers"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("toolsearch: %s: %w", path, err)
	}
	var docs []Doc
	for _, s := range c.Servers {
		for _, t := range s.Tools {
			d := Doc{Name: s.Name + "." + t.Name, Title: t.Title, Description: t.Description}
			for n, desc := range t.Params {
				d.Params = append(d.Params, Param{Name: n, Description: desc})
			}
			slices.SortFunc(d.Params, func(a, b Param) int { return strings.Compare(a.Name, b.Name) })
			docs = append(docs, d)
		}
	}
	return docs, nil
}

// LoadQueries reads a query set: {"queries": [{"query", "expect": [names]}]}.
func LoadQueries(path string) ([]Query, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var q struct {
		Queries []Query `json:"queries"`
	}
	if err := json.Unmarshal(b, &q); err != nil {
		return nil, fmt.Errorf("toolsearch: %s: %w", path, err)
	}
	return q.Queries, nil
}

// Miss is a request none of whose expected tools was among the k best.
type Miss struct {
	Query
	Got []string
}

// Recall is recall@k over queries: the share of them one of whose
// expected tools is among the k best; and the misses.
func Recall(ix *Index, queries []Query, k int) (float64, []Miss) {
	if len(queries) == 0 {
		return 0, nil
	}
	found := 0
	var misses []Miss
	for _, q := range queries {
		var got []string
		for _, h := range ix.Search(q.Query, k) {
			got = append(got, h.Doc.Name)
		}
		if slices.ContainsFunc(q.Expect, func(e string) bool { return slices.Contains(got, e) }) {
			found++
			continue
		}
		misses = append(misses, Miss{Query: q, Got: got})
	}
	return float64(found) / float64(len(queries)), misses
}

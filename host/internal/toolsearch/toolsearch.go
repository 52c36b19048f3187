// Package toolsearch ranks tools for a natural-language request with BM25
// (Okapi, k1 = 1.2, b = 0.75) over each tool's fields: its name (and its
// server's), title, description, and the names and descriptions of its
// parameters, each field weighted (BM25F-style: weighted term counts and
// a weighted length). Words are lowercased, split at punctuation, '_',
// '.', '-' and camelCase humps, stripped of common English endings
// ("issues" and "issue", "creating" and "create" meet), and a few words
// with the same meaning in tool catalogues are made one ("remove" and
// "delete"). Common words ("the", "please") are dropped.
//
// An Index is built once from a fixed list of documents and is safe for
// concurrent Search calls; build a new one when the tools change.
package toolsearch

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"unicode"
)

// Doc is one tool as the index sees it.
type Doc struct {
	// Name is the tool's canonical name, "<server>.<tool>".
	Name        string
	Title       string
	Description string
	// Params are the names and descriptions of its input parameters.
	Params []Param
}

// Param is one input parameter of a tool.
type Param struct {
	Name, Description string
}

// ParamsFromSchema reads the top-level properties of a JSON Schema
// (their names and descriptions), in name order.
func ParamsFromSchema(schema []byte) []Param {
	var s struct {
		Properties map[string]struct {
			Description string `json:"description"`
			Title       string `json:"title"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	out := make([]Param, 0, len(s.Properties))
	for name, p := range s.Properties {
		d := p.Description
		if d == "" {
			d = p.Title
		}
		out = append(out, Param{Name: name, Description: d})
	}
	slices.SortFunc(out, func(a, b Param) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Field weights: a word in a tool's name says more than one in a
// parameter's description.
const (
	weightName      = 3.0
	weightTitle     = 2.0
	weightDesc      = 1.0
	weightParamName = 1.0
	weightParamDesc = 0.5
)

// BM25's constants.
const (
	k1 = 1.2
	b  = 0.75
)

// Index is a BM25 index over a list of tools.
type Index struct {
	docs     []Doc
	tf       []map[string]float64 // per document: weighted term counts
	length   []float64            // per document: weighted length
	avgLen   float64
	postings map[string][]int // term -> documents that have it
	idf      map[string]float64
}

// New indexes docs.
func New(docs []Doc) *Index {
	ix := &Index{docs: docs, tf: make([]map[string]float64, len(docs)), length: make([]float64, len(docs)), postings: map[string][]int{}, idf: map[string]float64{}}
	var total float64
	for i, d := range docs {
		tf := map[string]float64{}
		add := func(text string, w float64) {
			for _, t := range Terms(text) {
				tf[t] += w
				ix.length[i] += w
			}
		}
		add(d.Name, weightName)
		add(d.Title, weightTitle)
		add(d.Description, weightDesc)
		for _, p := range d.Params {
			add(p.Name, weightParamName)
			add(p.Description, weightParamDesc)
		}
		ix.tf[i] = tf
		total += ix.length[i]
		for t := range tf {
			ix.postings[t] = append(ix.postings[t], i)
		}
	}
	if len(docs) > 0 {
		ix.avgLen = total / float64(len(docs))
	}
	n := float64(len(docs))
	for t, p := range ix.postings {
		df := float64(len(p))
		ix.idf[t] = math.Log(1 + (n-df+0.5)/(df+0.5))
	}
	return ix
}

// Len is the number of tools indexed.
func (ix *Index) Len() int { return len(ix.docs) }

// Hit is one tool found.
type Hit struct {
	Doc   Doc
	Score float64
}

// Search returns the k best tools for query, best first (ties in index
// order); tools that share no word with the query are not returned.
func (ix *Index) Search(query string, k int) []Hit {
	if k <= 0 || len(ix.docs) == 0 {
		return nil
	}
	scores := map[int]float64{}
	seen := map[string]bool{}
	for _, t := range Terms(query) {
		if seen[t] {
			continue
		}
		seen[t] = true
		idf := ix.idf[t]
		for _, d := range ix.postings[t] {
			f := ix.tf[d][t]
			norm := 1 - b + b*ix.length[d]/ix.avgLen
			scores[d] += idf * f * (k1 + 1) / (f + k1*norm)
		}
	}
	hits := make([]Hit, 0, len(scores))
	order := make([]int, 0, len(scores))
	for d := range scores {
		order = append(order, d)
	}
	slices.SortFunc(order, func(a, b int) int {
		switch sa, sb := scores[a], scores[b]; {
		case sa > sb:
			return -1
		case sa < sb:
			return 1
		}
		return a - b
	})
	for _, d := range order[:min(k, len(order))] {
		hits = append(hits, Hit{Doc: ix.docs[d], Score: scores[d]})
	}
	return hits
}

// Terms splits text into the index's terms: lowercased words split at
// anything but letters and digits and at camelCase humps, stemmed,
// synonyms made one, common words dropped.
func Terms(text string) []string {
	var out []string
	var word []rune
	flush := func() {
		if len(word) == 0 {
			return
		}
		w := string(word)
		word = word[:0]
		if stop[w] {
			return
		}
		w = stem(w)
		if s, ok := synonyms[w]; ok {
			w = s
		}
		if w != "" && !stop[w] {
			out = append(out, w)
		}
	}
	prev := rune(0)
	for _, r := range text {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if unicode.IsUpper(r) && unicode.IsLower(prev) {
				flush() // camelCase
			}
			word = append(word, unicode.ToLower(r))
		default:
			flush()
		}
		prev = r
	}
	flush()
	return out
}

// stem strips common English endings (a light stemmer: it only has to
// make the forms of one word meet, on both sides of a search).
func stem(w string) string {
	if len(w) <= 3 {
		return w
	}
	for _, s := range []struct{ suffix, repl string }{
		{"ies", "y"},
		{"sses", "ss"},
		{"ches", "ch"},
		{"shes", "sh"},
		{"xes", "x"},
		{"ing", ""},
		{"ed", ""},
		{"es", "e"},
		{"s", ""},
	} {
		if strings.HasSuffix(w, s.suffix) && len(w)-len(s.suffix) >= 3 {
			if strings.HasSuffix(w, "ss") && s.suffix == "s" {
				return w
			}
			base := w[:len(w)-len(s.suffix)] + s.repl
			if s.suffix == "ing" || s.suffix == "ed" {
				base = undouble(base)
			}
			return trimE(base)
		}
	}
	return trimE(w)
}

// undouble turns "committ" (from "committed") into "commit".
func undouble(w string) string {
	if n := len(w); n >= 4 && w[n-1] == w[n-2] && !strings.ContainsRune("lsz", rune(w[n-1])) {
		return w[:n-1]
	}
	return w
}

// trimE drops a final 'e' so "create", "creates", "creating" and "created"
// all give "creat".
func trimE(w string) string {
	if len(w) > 3 && strings.HasSuffix(w, "e") {
		return w[:len(w)-1]
	}
	return w
}

// stop are words too common to tell tools apart.
var stop = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an the of to in on for with and or from by at as is are be been was were it its
		this that these those i me my we our you your he she they them their please can could would should will shall
		do does did done have has had get got some any all each every which what when where who whom how why
		there here into onto over about up down out if then than so such just also very much more most only
		want need like let make sure using use via`) {
		stop[w] = true
	}
	// Synonyms are looked up after stemming; build the table from
	// stemmed words.
	raw := map[string][]string{
		"delete":     {"remove", "erase", "rm", "destroy", "drop", "trash"},
		"find":       {"search", "lookup", "locate", "query", "grep"},
		"list":       {"enumerate", "ls", "show"},
		"create":     {"new", "add"},
		"repository": {"repo", "repositories", "repos"},
		"pull":       {"pr", "prs", "merge"},
		"message":    {"msg", "chat", "post", "dm"},
		"directory":  {"folder", "dir", "folders", "directories"},
		"file":       {"files", "document", "doc"},
		"fetch":      {"download", "retrieve", "webpage", "web", "website"},
		"run":        {"execute", "exec", "command", "shell", "terminal"},
		"event":      {"meeting", "appointment", "events"},
		"database":   {"db", "sql", "table"},
		"edit":       {"modify", "change", "update", "replace", "patch"},
		"email":      {"mail", "gmail", "inbox"},
		"screenshot": {"capture", "snapshot"},
		"kill":       {"stop", "terminate", "cancel"},
	}
	for canon, words := range raw {
		c := stem(canon)
		for _, w := range append(words, canon) {
			synonyms[stem(w)] = c
		}
	}
}

// synonyms maps a stemmed word to the one stemmed word that stands for its
// meaning.
var synonyms = map[string]string{}

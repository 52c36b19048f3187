package frontend

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// fitFrontend is a front end that only fits results, saving under a
// temporary data_dir.
func fitFrontend(t *testing.T) *Frontend {
	t.Helper()
	f := &Frontend{log: hclog.NewNullLogger()}
	f.saved.setDir(t.TempDir())
	return f
}

func texts(r *toolcall.Result) []string {
	var out []string
	for _, c := range r.Content {
		if c.Type == toolcall.TypeText {
			out = append(out, c.Text)
		}
	}
	return out
}

func links(r *toolcall.Result) []toolcall.Content {
	var out []toolcall.Content
	for _, c := range r.Content {
		if c.Type == toolcall.TypeResourceLink {
			out = append(out, c)
		}
	}
	return out
}

// readAll reads a saved result through its pages, as a client would.
func readAll(t *testing.T, f *Frontend, owner, uri string, limit int) string {
	t.Helper()
	id := strings.TrimPrefix(uri, ResultsURIPrefix)
	var b strings.Builder
	offset, pages := 0, 0
	for {
		p, err := f.saved.read(owner, id, offset, limit)
		if err != nil {
			t.Fatalf("read(%s, offset %d): %v", id, offset, err)
		}
		if n := utf8.RuneCountInString(p.text); n > p.limitUsed {
			t.Fatalf("page at %d has %d characters, over its limit %d", offset, n, p.limitUsed)
		}
		b.WriteString(p.text)
		pages++
		if p.next < 0 {
			break
		}
		offset = p.next
		if pages > 10000 {
			t.Fatal("pages without end")
		}
	}
	return b.String()
}

func TestFitAtTheLimits(t *testing.T) {
	const limit = 1000
	req := fitRequest{canonical: "fx.big", owner: "o", maxChars: limit, by: "max_result_chars"}
	for _, tc := range []struct {
		name      string
		items     []string
		wantKept  []int // characters of each text item sent, before the marker
		wantSaved []int // characters of each saved item
	}{
		{"one item exactly at the limit", []string{strings.Repeat("a", limit)}, []int{limit}, nil},
		{"one item one over", []string{strings.Repeat("a", limit+1)}, []int{limit}, []int{limit + 1}},
		{"multibyte exactly at the limit", []string{strings.Repeat("é", limit)}, []int{limit}, nil},
		{"multibyte one over", []string{strings.Repeat("日", limit+1)}, []int{limit}, []int{limit + 1}},
		{"items together at the limit", []string{strings.Repeat("a", 600), strings.Repeat("b", 400)}, []int{600, 400}, nil},
		{"items together one over", []string{strings.Repeat("a", 600), strings.Repeat("b", 401)}, []int{600, 400}, []int{401}},
		{"the item after the cut is left out", []string{strings.Repeat("a", 600), strings.Repeat("b", 600), strings.Repeat("c", 600)}, []int{600, 400}, []int{600, 600}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fitFrontend(t)
			res := &toolcall.Result{}
			for _, s := range tc.items {
				res.Content = append(res.Content, toolcall.TextContent(s))
			}
			if !needsFit(res, req) {
				if tc.wantSaved != nil {
					t.Fatal("needsFit = false for a result over the limit")
				}
				return
			}
			if tc.wantSaved == nil {
				t.Fatal("needsFit = true for a result within the limit")
			}
			out := f.fitResult(res, req)
			got := texts(out)
			if len(got) != len(tc.wantKept)+1 {
				t.Fatalf("got %d text items, want %d and the marker: %q", len(got), len(tc.wantKept), got)
			}
			total, kept := 0, 0
			for _, s := range tc.items {
				total += utf8.RuneCountInString(s)
			}
			for i, n := range tc.wantKept {
				if c := utf8.RuneCountInString(got[i]); c != n {
					t.Errorf("item %d has %d characters, want %d", i, c, n)
				}
				kept += n
				if !strings.HasPrefix(tc.items[i], got[i]) {
					t.Errorf("item %d is not the beginning of what the tool returned", i)
				}
			}
			marker := got[len(got)-1]
			if want := fmt.Sprintf("returned %d characters of text and only the first %d are here", total, kept); !strings.Contains(marker, want) {
				t.Errorf("marker = %q, want it to say %q", marker, want)
			}
			if want := fmt.Sprintf("%d characters were left out", total-kept); !strings.Contains(marker, want) {
				t.Errorf("marker = %q, want it to say %q", marker, want)
			}
			ls := links(out)
			if len(ls) != len(tc.wantSaved) {
				t.Fatalf("got %d resource links, want %d", len(ls), len(tc.wantSaved))
			}
			for i, l := range ls {
				whole := readAll(t, f, "o", l.URI, 0)
				if utf8.RuneCountInString(whole) != tc.wantSaved[i] {
					t.Errorf("saved item %d has %d characters, want %d", i, utf8.RuneCountInString(whole), tc.wantSaved[i])
				}
				if whole != tc.items[len(tc.items)-len(ls)+i] {
					t.Errorf("saved item %d is not the item the tool returned", i)
				}
				if _, err := f.saved.read("someone else", strings.TrimPrefix(l.URI, ResultsURIPrefix), 0, 0); err == nil {
					t.Error("another client read a saved result")
				}
			}
			// Pages of an odd size still give back the whole.
			if len(ls) > 0 && readAll(t, f, "o", ls[0].URI, 7) != tc.items[len(tc.items)-len(ls)] {
				t.Error("reading in pages of 7 characters does not give the whole item back")
			}
		})
	}
}

func TestFitJSON(t *testing.T) {
	const limit = 1000
	rows := make([]map[string]any, 200)
	for i := range rows {
		rows[i] = map[string]any{"n": i, "name": fmt.Sprintf("row %d", i), "tags": []string{"a", "b"}}
	}
	raw, _ := json.Marshal(map[string]any{"rows": rows, "after": "x"})
	f := fitFrontend(t)
	res := &toolcall.Result{Content: []toolcall.Content{toolcall.TextContent(string(raw))}, StructuredContent: raw}
	out := f.fitResult(res, fitRequest{canonical: "fx.big", owner: "o", maxChars: limit, by: "max_result_chars"})
	got := texts(out)
	if len(got) != 2 {
		t.Fatalf("got %d text items, want the JSON and the marker", len(got))
	}
	for name, b := range map[string][]byte{"text": []byte(got[0]), "structured content": out.StructuredContent} {
		if !json.Valid(b) {
			t.Errorf("the cut %s is not valid JSON: %.200s", name, b)
		}
		if len(b) > limit {
			t.Errorf("the cut %s has %d bytes, over %d", name, len(b), limit)
		}
		var v struct {
			Rows []map[string]any `json:"rows"`
		}
		if err := json.Unmarshal(b, &v); err != nil || len(v.Rows) == 0 {
			t.Errorf("the cut %s lost its beginning: %v %.100s", name, err, b)
		}
	}
	if !strings.Contains(got[1], "still parses") {
		t.Errorf("marker = %q, want it to say the JSON still parses", got[1])
	}
	if ls := links(out); len(ls) != 2 {
		t.Errorf("got %d resource links, want one for the text and one for the structured content", len(ls))
	} else if readAll(t, f, "o", ls[1].URI, 0) != string(raw) {
		t.Error("the saved structured content is not what the tool returned")
	}
}

func TestFitPagingArguments(t *testing.T) {
	f := fitFrontend(t)
	schema := []byte(`{"type":"object","properties":{"path":{"type":"string"},"offset":{"type":"integer"},"limit":{"type":"integer"}}}`)
	req := fitRequest{canonical: "fx.paged", owner: "o", maxChars: 1000, by: "max_result_chars", paging: pagingArgs(schema)}
	out := f.fitResult(&toolcall.Result{Content: []toolcall.Content{toolcall.TextContent(strings.Repeat("p", 1001))}}, req)
	got := texts(out)
	if m := got[len(got)-1]; !strings.Contains(m, "paging arguments (offset, limit)") {
		t.Errorf("marker = %q, want it to name offset and limit", m)
	}
	if ls := links(out); len(ls) != 0 {
		t.Errorf("a tool with paging arguments got %d resource links, want none", len(ls))
	}
	if got := pagingArgs([]byte(`{"type":"object","properties":{"path":{"type":"string"},"head":{"type":"integer"}}}`)); got != nil {
		t.Errorf("pagingArgs(without an offset) = %v, want none", got)
	}
}

func TestFitImages(t *testing.T) {
	f := fitFrontend(t)
	req := fitRequest{canonical: "fx.big", owner: "o", maxChars: 1000, by: "max_result_chars", imageBytes: 100}
	img := func(n int) toolcall.Content {
		return toolcall.Content{Type: toolcall.TypeImage, Data: make([]byte, n), MIMEType: "image/png"}
	}
	at := &toolcall.Result{Content: []toolcall.Content{toolcall.TextContent("hi"), img(100)}}
	if needsFit(at, req) {
		t.Error("an image exactly at max_image_bytes needs fitting")
	}
	over := &toolcall.Result{Content: []toolcall.Content{toolcall.TextContent("hi"), img(101)}}
	if !needsFit(over, req) {
		t.Fatal("an image one byte over max_image_bytes does not need fitting")
	}
	out := f.fitResult(over, req)
	for _, c := range out.Content {
		if c.Type == toolcall.TypeImage {
			t.Error("the image over max_image_bytes was sent")
		}
	}
	got := texts(out)
	if len(got) != 2 || got[0] != "hi" || !strings.Contains(got[1], "not sent: it is over max_image_bytes (100 bytes") {
		t.Errorf("texts = %q, want the text and a reason", got)
	}
}

func TestFitOff(t *testing.T) {
	req := fitRequest{canonical: "fx.big", owner: "o", maxChars: 0}
	if needsFit(&toolcall.Result{Content: []toolcall.Content{toolcall.TextContent(strings.Repeat("a", 1<<20))}}, req) {
		t.Error("max_result_chars = 0 still cuts")
	}
}

func TestShrinkJSON(t *testing.T) {
	for _, tc := range []struct {
		in    string
		limit int
		want  string
	}{
		{`{"a":1}`, 7, `{"a":1}`},
		{`{"a":1,"b":2}`, 12, `{"a":1}`},
		{`[1,2,3,4]`, 6, `[1,2]`},
		{`{"s":"hello world"}`, 12, `{"s":"hell"}`},
		{`[[1,2,3],[4]]`, 8, `[[1,2]]`},
		{`"abcdef"`, 5, `"abc"`},
		{`12345`, 3, `null`},
		{`{"z":1,"a":2}`, 100, `{"z":1,"a":2}`},
	} {
		if got := string(shrinkJSON([]byte(tc.in), tc.limit)); got != tc.want {
			t.Errorf("shrinkJSON(%s, %d) = %s, want %s", tc.in, tc.limit, got, tc.want)
		}
	}
}

func FuzzShrinkJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":"ccc"}],"d":null}`, `["é日本",true,false,1.5e3]`, `"\u0000<>&"`, `[]`, `{}`} {
		f.Add(s, 5)
		f.Add(s, 12)
	}
	f.Fuzz(func(t *testing.T, in string, limit int) {
		if !json.Valid([]byte(in)) || limit < 0 || limit > 1<<16 {
			return
		}
		out := shrinkJSON([]byte(in), limit)
		if !json.Valid(out) {
			t.Fatalf("shrinkJSON(%q, %d) = %q, not JSON", in, limit, out)
		}
		if string(out) != "null" && len(out) > limit {
			t.Fatalf("shrinkJSON(%q, %d) = %q, %d bytes", in, limit, out, len(out))
		}
	})
}

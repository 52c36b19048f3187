package frontend

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/yosida95/uritemplate/v3"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// Saved results: the whole of a text cut to fit (results.go), kept under
// data_dir/results and served by the host itself as the resources
// switchboard://results/ID, read in pages with ?offset=N&limit=M
// (characters). data_dir is the control plane: no tool can read these
// files (the sandboxes hide data_dir, and the built-ins refuse its paths),
// only the MCP client whose call made them, through resources/read.
//
// Each result is two files: ID (the text) and ID.json (its owner, MIME
// type and tool). Results older than savedMaxAge are removed, and the
// oldest go when the folder holds more than savedMaxBytes.

// ResultsURIPrefix is how the URIs of saved results begin.
const ResultsURIPrefix = "switchboard://results/"

// resultsTemplate is the URI template of saved results.
const resultsTemplate = "switchboard://results/{id}{?offset,limit}"

const (
	savedMaxAge   = 24 * time.Hour
	savedMaxBytes = 512 << 20
	// maxPage bounds one page a client asks for (characters).
	maxPage = 4 << 20
)

// savedStore is the folder of saved results.
type savedStore struct {
	mu  sync.Mutex
	dir string // "" when the front end has no data_dir: nothing is saved
}

type savedMeta struct {
	Owner    string    `json:"owner"`
	Tool     string    `json:"tool"`
	MIMEType string    `json:"mime_type"`
	Chars    int       `json:"chars"`
	Page     int       `json:"page"`
	Created  time.Time `json:"created"`
}

func (s *savedStore) setDir(dataDir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dir = ""
	if dataDir != "" {
		s.dir = filepath.Join(dataDir, "results")
	}
}

var savedID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// hostInstance tells this host process's saved results from those of the
// other hosts that share its data_dir.
var hostInstance = func() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

// resultOwner is whom a saved result belongs to: an authenticated caller
// (across its sessions and the hosts that know it), else the client's
// session in this host process. Every stdio session is the same "mcp:stdio"
// to mcp-go, so without the process a second host on the same config read
// the first one's results (red team round 4).
func resultOwner(client string) string {
	if strings.HasPrefix(client, "caller:") {
		return client
	}
	return client + "@" + hostInstance
}

// save writes c's whole text and returns the resource link to it.
func (s *savedStore) save(owner, tool string, c cutRef, page int) (toolcall.Content, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dir == "" {
		return toolcall.Content{}, errors.New("the front end has no data_dir")
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return toolcall.Content{}, err
	}
	s.prune()
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	mime := "text/plain"
	if c.json {
		mime = "application/json"
	}
	chars := utf8.RuneCountInString(c.text)
	meta, err := json.Marshal(savedMeta{Owner: resultOwner(owner), Tool: tool, MIMEType: mime, Chars: chars, Page: page, Created: time.Now().UTC()})
	if err != nil {
		return toolcall.Content{}, err
	}
	path := filepath.Join(s.dir, id)
	if err := os.WriteFile(path, []byte(c.text), 0o600); err != nil {
		return toolcall.Content{}, err
	}
	if err := os.WriteFile(path+".json", meta, 0o600); err != nil {
		_ = os.Remove(path)
		return toolcall.Content{}, err
	}
	what := "text item"
	if c.index < 0 {
		what = "structured content"
	}
	return toolcall.Content{
		Type: toolcall.TypeResourceLink, URI: ResultsURIPrefix + id, MIMEType: mime,
		Name: fmt.Sprintf("%s result (%d characters)", tool, chars),
		Description: fmt.Sprintf("The whole %s of this %s result that was cut: %d characters (%d bytes). Read it with resources/read, in pages: %s%s?offset=0&limit=%d, then offset=%d, and so on.",
			what, tool, chars, len(c.text), ResultsURIPrefix, id, page, page),
	}, nil
}

// prune removes results past savedMaxAge, then the oldest while the
// folder is over savedMaxBytes; s.mu held.
func (s *savedStore) prune() {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	type file struct {
		id   string
		mod  time.Time
		size int64
	}
	var files []file
	var total int64
	for _, e := range ents {
		if !savedID.MatchString(e.Name()) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		if time.Since(info.ModTime()) > savedMaxAge {
			s.remove(e.Name())
			continue
		}
		files = append(files, file{e.Name(), info.ModTime(), info.Size()})
		total += info.Size()
	}
	slices.SortFunc(files, func(a, b file) int { return a.mod.Compare(b.mod) })
	for _, f := range files {
		if total <= savedMaxBytes {
			break
		}
		s.remove(f.id)
		total -= f.size
	}
}

func (s *savedStore) remove(id string) {
	_ = os.Remove(filepath.Join(s.dir, id))
	_ = os.Remove(filepath.Join(s.dir, id+".json"))
}

// page is one page of a saved result.
type page struct {
	text      string
	mime      string
	offset    int
	total     int
	next      int // -1 on the last page
	limitUsed int
}

// read returns the page of result id at offset (characters) of at most
// limit characters (0: the page size it was saved with), for owner.
func (s *savedStore) read(owner, id string, offset, limit int) (page, error) {
	s.mu.Lock()
	dir := s.dir
	s.mu.Unlock()
	if dir == "" || !savedID.MatchString(id) {
		return page{}, fmt.Errorf("no saved result %q", id)
	}
	mb, err := os.ReadFile(filepath.Join(dir, id+".json"))
	if err != nil {
		return page{}, fmt.Errorf("saved result %s is gone (results are kept %s): call the tool again", id, savedMaxAge)
	}
	var meta savedMeta
	if err := json.Unmarshal(mb, &meta); err != nil {
		return page{}, fmt.Errorf("saved result %s is damaged: call the tool again", id)
	}
	if meta.Owner != resultOwner(owner) {
		return page{}, fmt.Errorf("saved result %s belongs to another client session", id)
	}
	if limit <= 0 {
		limit = meta.Page
	}
	if limit <= 0 || limit > maxPage {
		limit = min(max(limit, 1), maxPage)
	}
	data, err := os.ReadFile(filepath.Join(dir, id))
	if err != nil {
		return page{}, fmt.Errorf("saved result %s is gone: call the tool again", id)
	}
	text := string(data)
	start := runeOffset(text, offset)
	end := start + runeOffset(text[start:], limit)
	p := page{text: text[start:end], mime: meta.MIMEType, offset: offset, total: meta.Chars, next: -1, limitUsed: limit}
	if end < len(text) {
		p.next = offset + limit
	}
	return p, nil
}

// runeOffset is the byte index of the n-th character of s (len(s) past
// its end).
func runeOffset(s string, n int) int {
	i := 0
	for c := 0; c < n && i < len(s); c++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return i
}

// resultsTemplateEntry is the resource template the host serves saved
// results under (installed with the servers' templates, features.go).
func (f *Frontend) resultsTemplateEntry() server.ServerResourceTemplate {
	ut := uritemplate.MustNew(resultsTemplate)
	return server.ServerResourceTemplate{
		Template: mcp.ResourceTemplate{
			URITemplate: &mcp.URITemplate{Template: ut},
			Name:        "saved-result",
			Title:       "A tool result that was cut to fit",
			Description: "The whole text of a tool result the host cut to max_result_chars, read in pages of characters with ?offset=N&limit=M. Only the session whose call made it can read it.",
		},
		Handler: f.readSaved,
	}
}

// readSaved serves resources/read of a saved result.
func (f *Frontend) readSaved(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	u, err := url.Parse(req.Params.URI)
	if err != nil || !strings.HasPrefix(req.Params.URI, ResultsURIPrefix) {
		return nil, fmt.Errorf("%q is not a saved result's URI (%sID?offset=N&limit=M)", req.Params.URI, ResultsURIPrefix)
	}
	id := strings.TrimPrefix(u.Path, "/")
	if u.Host != "results" {
		return nil, fmt.Errorf("%q is not a saved result's URI (%sID?offset=N&limit=M)", req.Params.URI, ResultsURIPrefix)
	}
	num := func(name string) (int, error) {
		v := u.Query().Get(name)
		if v == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s=%q must be a whole number of characters, 0 or more", name, v)
		}
		return n, nil
	}
	offset, err := num("offset")
	if err != nil {
		return nil, err
	}
	limit, err := num("limit")
	if err != nil {
		return nil, err
	}
	p, err := f.saved.read(clientID(ctx), id, offset, limit)
	if err != nil {
		return nil, err
	}
	meta := map[string]any{"offset": p.offset, "limit": p.limitUsed, "totalChars": p.total}
	if p.next >= 0 {
		meta["next"] = fmt.Sprintf("%s%s?offset=%d&limit=%d", ResultsURIPrefix, id, p.next, p.limitUsed)
	}
	return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: p.mime, Text: p.text, Meta: map[string]any{"switchboard/page": meta}}}, nil
}

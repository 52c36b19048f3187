package launcher

import (
	"bytes"
	"sync"

	"github.com/switchboard-mcp/switchboard/internal/protocol"
)

// Protocol returns the plugin's protocol client, for the version 2
// features (resources, prompts, completion, notifications) that the
// launcher itself does not wrap.
func (p *Plugin) Protocol() *protocol.Client { return p.proto }

// offeredVersions watches a plugin's raw stderr for the line an SDK plugin
// writes when it shares no protocol version with the host
// (protocol.VersionsLine), so that the refusal names every version the
// plugin speaks, not only the one go-plugin reports.
type offeredVersions struct {
	mu      sync.Mutex
	partial []byte
	found   []int
}

func (o *offeredVersions) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.found != nil || len(o.partial) > 4096 {
		return len(b), nil // found, or not an SDK plugin's start: stop looking
	}
	o.partial = append(o.partial, b...)
	for {
		i := bytes.IndexByte(o.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(o.partial[:i])
		o.partial = o.partial[i+1:]
		if vs, ok := protocol.ParseVersionsLine(line); ok {
			o.found = vs
			return len(b), nil
		}
	}
}

func (o *offeredVersions) versions() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.found
}

package launcher

import "github.com/switchboard-mcp/switchboard/internal/protocol"

// Protocol returns the plugin's protocol client, for the version 2
// features (resources, prompts, completion, notifications) that the
// launcher itself does not wrap.
func (p *Plugin) Protocol() *protocol.Client { return p.proto }

package protocol

import (
	"encoding/json"
	"fmt"
	"net"

	plugin "github.com/hashicorp/go-plugin"
)

// EnvReattach names the variable that makes the host use plugins started
// by hand (`switchboard-plugin-NAME --debug`, for a debugger) instead of
// starting them: a JSON object from server name to Reattach, as a plugin
// in debug mode prints it.
const EnvReattach = "SWITCHBOARD_REATTACH"

// EnvPluginDebug set to 1 (or the --debug flag) makes an SDK plugin serve
// in debug mode: it does not need a host to start it, prints the line that
// attaches a host to it, and runs until interrupted.
const EnvPluginDebug = "SWITCHBOARD_PLUGIN_DEBUG"

// Reattach is where a plugin started by hand listens.
type Reattach struct {
	Protocol        string `json:"protocol"`
	ProtocolVersion int    `json:"protocol_version"`
	Pid             int    `json:"pid"`
	Network         string `json:"network"`
	Address         string `json:"address"`
}

// ReattachOf describes go-plugin's reattach config.
func ReattachOf(rc *plugin.ReattachConfig) Reattach {
	return Reattach{Protocol: string(rc.Protocol), ProtocolVersion: rc.ProtocolVersion, Pid: rc.Pid, Network: rc.Addr.Network(), Address: rc.Addr.String()}
}

// Config is go-plugin's reattach config for r.
func (r Reattach) Config() (*plugin.ReattachConfig, error) {
	var addr net.Addr
	var err error
	switch r.Network {
	case "unix":
		addr, err = net.ResolveUnixAddr("unix", r.Address)
	case "tcp":
		addr, err = net.ResolveTCPAddr("tcp", r.Address)
	default:
		err = fmt.Errorf("network %q is neither unix nor tcp", r.Network)
	}
	if err != nil {
		return nil, fmt.Errorf("reattach address: %w", err)
	}
	if r.Protocol != string(plugin.ProtocolGRPC) || r.Pid <= 0 || r.ProtocolVersion <= 0 {
		return nil, fmt.Errorf("reattach: want a grpc plugin with a pid and a protocol version, got %+v", r)
	}
	return &plugin.ReattachConfig{Protocol: plugin.ProtocolGRPC, ProtocolVersion: r.ProtocolVersion, Addr: addr, Pid: r.Pid, Test: true}, nil
}

// ParseReattach reads EnvReattach's value.
func ParseReattach(v string) (map[string]Reattach, error) {
	var m map[string]Reattach
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		return nil, fmt.Errorf("%s: %w (it is what a plugin started with --debug prints)", EnvReattach, err)
	}
	return m, nil
}

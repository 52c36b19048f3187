package protocol

import (
	"context"
	"fmt"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// The host service (pluginv1.Host) is a back-channel the host offers one
// plugin, the built-in `switchboard` server, over go-plugin's broker: the
// host serves it on a broker stream id it sends in
// ConfigureRequest.host_service, and the plugin dials that id. A plugin
// that is given no id (every third-party plugin) has nothing to dial.

type hostConnKey struct{}

// HostConn returns the connection to the host service that the plugin's
// Configure was given, or nil when the host offered none. Only the ctx
// passed to Handler.Configure carries it; the connection lives as long as
// the plugin.
func HostConn(ctx context.Context) *grpc.ClientConn {
	c, _ := ctx.Value(hostConnKey{}).(*grpc.ClientConn)
	return c
}

// dialHost dials the host service on broker stream id (plugin side).
func dialHost(broker *plugin.GRPCBroker, id uint32) (*grpc.ClientConn, error) {
	if broker == nil {
		return nil, fmt.Errorf("protocol: the host offers a host service (broker id %d), but this plugin has no broker", id)
	}
	conn, err := broker.DialWithOptions(id, GRPCDialOptions()...)
	if err != nil {
		return nil, fmt.Errorf("protocol: dialing the host service (broker id %d): %w", id, err)
	}
	return conn, nil
}

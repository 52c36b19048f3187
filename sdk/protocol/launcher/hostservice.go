package launcher

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
)

// HostService is a back-channel the host offers one plugin over go-plugin's
// broker (pluginv1.Host; only the built-in `switchboard` server gets one).
// The launcher serves it on a broker stream id of that plugin's own
// connection, sends the id in Configure, and accepts a request only over
// mutual TLS with that plugin's certificate (go-plugin's AutoMTLS), so no
// other process, and no other plugin, can reach it. A plugin launched
// without one is given no id and has nothing to dial.
type HostService interface {
	// Register adds the service to the gRPC server that answers plugin
	// server (one per start of the plugin).
	Register(s *grpc.Server, server string)
	// Enter is told of each tool call the host sends the plugin: the
	// caller it belongs to (package caller) and the tool. The service
	// uses it to answer only for calls in flight; leave is called when
	// the call ends.
	Enter(server, owner, tool string) (leave func())
}

// serveHost serves spec.HostService on a new broker stream id and returns
// the id (0 when the plugin gets none). The server stops when the plugin's
// connection closes (go-plugin closes the broker).
func (p *Plugin) serveHost() (uint32, error) {
	svc := p.spec.HostService
	if svc == nil || p.spec.Reattach != nil || p.proto == nil || p.proto.Broker == nil {
		return 0, nil
	}
	broker := p.proto.Broker
	id := broker.NextId()
	name := p.spec.Name
	go broker.AcceptAndServe(id, func(opts []grpc.ServerOption) *grpc.Server {
		opts = append(opts, protocol.GRPCServerOptions()...)
		opts = append(opts, grpc.ChainUnaryInterceptor(p.hostGuard), grpc.ChainStreamInterceptor(p.hostStreamGuard))
		s := grpc.NewServer(opts...)
		svc.Register(s, name)
		return s
	})
	return id, nil
}

// hostGuard refuses a request that did not come over mutual TLS with the
// plugin's certificate: the broker's server requires and verifies it, and
// this checks again, so that a server built without TLS serves nothing.
func (p *Plugin) hostGuard(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := p.checkHostPeer(ctx); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (p *Plugin) hostStreamGuard(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := p.checkHostPeer(ss.Context()); err != nil {
		return err
	}
	return handler(srv, ss)
}

func (p *Plugin) checkHostPeer(ctx context.Context) error {
	pr, ok := peer.FromContext(ctx)
	if !ok {
		return status.Error(codes.PermissionDenied, "host service: unknown peer")
	}
	if pr.LocalAddr != nil {
		p.hostAddr.Store(pr.LocalAddr.Network() + ":" + pr.LocalAddr.String())
	}
	ti, ok := pr.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 {
		return status.Error(codes.PermissionDenied, fmt.Sprintf("host service: only plugin %s may use it, over its own mutual-TLS connection", p.spec.Name))
	}
	return nil
}

// HostServiceAddr is the address the host service of the plugin answers
// on ("unix:/tmp/…"), once the plugin has used it; "" before, and for a
// plugin that has none.
func (p *Plugin) HostServiceAddr() string {
	s, _ := p.hostAddr.Load().(string)
	return s
}

// HostServiceID is the broker stream id of the plugin's host service,
// as sent in Configure: 0 for a plugin that has none.
func (p *Plugin) HostServiceID() uint32 { return p.hostID }

// enter tells the host service of a call, when the plugin has one.
func (p *Plugin) enter(owner, tool string) func() {
	if p.spec.HostService == nil {
		return func() {}
	}
	return p.spec.HostService.Enter(p.spec.Name, owner, tool)
}

package supervisor

import (
	"context"
	"maps"
	"slices"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/feature"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// A supervised server forwards the features beyond tools (package feature)
// to its current instance, if that instance has them. Subscriptions are
// the server's, not the instance's: they are renewed on every new
// instance, so that a client subscribed before a restart keeps its updates.

// featureInstance returns the current instance's features (starting it
// if need be); the caller calls release when done with it.
func (srv *Server) featureInstance(ctx context.Context, what string) (feature.Server, error) {
	inst, err := srv.acquire(ctx)
	if err != nil {
		return nil, err
	}
	f, ok := inst.(feature.Server)
	if !ok {
		srv.release()
		return nil, protocol.Errorf(protocol.CodeUnavailable, "server %s has no %s", srv.name, what)
	}
	return f, nil
}

// ReadResource reads a resource of the current instance.
func (srv *Server) ReadResource(ctx context.Context, uri string) ([]toolcall.Content, error) {
	f, err := srv.featureInstance(ctx, "resources")
	if err != nil {
		return nil, err
	}
	defer srv.release()
	return f.ReadResource(ctx, uri)
}

// GetPrompt renders a prompt of the current instance.
func (srv *Server) GetPrompt(ctx context.Context, name string, args map[string]string) (*feature.PromptResult, error) {
	f, err := srv.featureInstance(ctx, "prompts")
	if err != nil {
		return nil, err
	}
	defer srv.release()
	return f.GetPrompt(ctx, name, args)
}

// Complete asks the current instance for completions.
func (srv *Server) Complete(ctx context.Context, req feature.CompleteRequest) (*feature.Completion, error) {
	f, err := srv.featureInstance(ctx, "completion")
	if err != nil {
		return nil, err
	}
	defer srv.release()
	return f.Complete(ctx, req)
}

// Subscribe records the subscription and passes it to the current
// instance.
func (srv *Server) Subscribe(ctx context.Context, uri string, on bool) error {
	f, err := srv.featureInstance(ctx, "resource subscriptions")
	if err != nil {
		return err
	}
	defer srv.release()
	if err := f.Subscribe(ctx, uri, on); err != nil {
		return err
	}
	srv.mu.Lock()
	if on {
		if srv.subs == nil {
			srv.subs = map[string]bool{}
		}
		srv.subs[uri] = true
	} else {
		delete(srv.subs, uri)
	}
	srv.mu.Unlock()
	return nil
}

// Watch passes on the events of each instance in turn until ctx ends or
// the server is closed. A ListChanged event first updates the server's
// description, once the supervisor's vet hook (SetVet) accepts it; a
// change it refuses is not adopted and its event is dropped.
func (srv *Server) Watch(ctx context.Context, fn func(feature.Event)) error {
	for {
		srv.mu.Lock()
		inst, state, next := srv.inst, srv.state, srv.instChanged()
		subs := slices.Collect(maps.Keys(srv.subs))
		srv.mu.Unlock()
		if state == Stopped {
			return protocol.ErrUnavailable
		}
		if f, ok := inst.(feature.Server); ok && state == Ready {
			for _, uri := range subs {
				if err := f.Subscribe(ctx, uri, true); err != nil {
					srv.sup.log.Warn("resource subscription not renewed", "server", srv.name, "uri", uri, "error", err)
				}
			}
			err := f.Watch(ctx, func(ev feature.Event) {
				if ev.Kind == feature.ListChanged {
					d := inst.Describe()
					if err := srv.sup.vetDesc(srv.name, d); err != nil {
						// The instance now serves what was refused: calls
						// are refused too, from now on, not once the host
						// has taken the server out.
						srv.mu.Lock()
						if srv.inst == inst {
							srv.held, srv.heldInst = err, inst
						}
						srv.mu.Unlock()
						srv.sup.log.Warn("list change not adopted", "server", srv.name, "error", err)
						return
					}
					srv.mu.Lock()
					if srv.inst == inst {
						srv.desc, srv.held, srv.heldInst = d, nil, nil
					}
					srv.mu.Unlock()
				}
				fn(ev)
			})
			if ctx.Err() != nil {
				return ctx.Err()
			}
			srv.sup.log.Debug("event stream ended", "server", srv.name, "error", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-next:
		}
	}
}

// instChanged returns a channel closed at the next change of instance;
// srv.mu held.
func (srv *Server) instChanged() <-chan struct{} {
	if srv.newInst == nil {
		srv.newInst = make(chan struct{})
	}
	return srv.newInst
}

// signalInst wakes the watchers of the instance; srv.mu held.
func (srv *Server) signalInst() {
	if srv.newInst != nil {
		close(srv.newInst)
		srv.newInst = nil
	}
}

var _ feature.Server = (*Server)(nil)

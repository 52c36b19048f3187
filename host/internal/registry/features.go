package registry

import (
	"context"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/feature"
)

// The registry watches the events of every server that has features beyond
// tools (package feature) for as long as the server is registered: a list
// change re-reads the server (Refresh, so subscribers of the tool set hear
// of it too), and every event goes to the listeners (OnEvent), which the
// front end uses for resource updates and log messages.

// watch starts the watch of e's events, if it has any; r.mu held.
func (r *Registry) watch(e *Entry) {
	f, ok := e.Server.(feature.Server)
	if !ok {
		return
	}
	ctx, stop := context.WithCancel(r.baseCtx)
	e.stop = stop
	name := e.Server.Name()
	r.watchers.Add(1)
	go func() {
		defer r.watchers.Done()
		defer stop()
		_ = f.Watch(ctx, func(ev feature.Event) {
			if ev.Kind == feature.ListChanged {
				r.Refresh(name)
			}
			r.subsMu.Lock()
			ls := r.listeners
			r.subsMu.Unlock()
			for _, fn := range ls {
				fn(name, ev)
			}
		})
	}()
}

// OnEvent calls fn with every event of every server, on that server's
// watching goroutine; a ListChanged event after the registry re-read the
// server. fn must not block for long.
func (r *Registry) OnEvent(fn func(server string, ev feature.Event)) {
	r.subsMu.Lock()
	r.listeners = append(r.listeners[:len(r.listeners):len(r.listeners)], fn)
	r.subsMu.Unlock()
}

// Features returns the features of the server called name, or false when
// it has none or is not registered.
func (r *Registry) Features(name string) (feature.Server, bool) {
	e := r.Entry(name)
	if e == nil {
		return nil, false
	}
	f, ok := e.Server.(feature.Server)
	return f, ok
}

// SetPrefixes sets the prefix of each server's exposed names (tools and
// prompts: "<prefix>__<name>", or the bare name when the prefix is "");
// a server not in m uses its name. The set replaces the previous one (a
// reload) and subscribers are told.
func (r *Registry) SetPrefixes(m map[string]string) {
	r.subsMu.Lock()
	r.prefixes = m
	r.subsMu.Unlock()
	r.notify()
}

// Prefix returns the prefix of server's exposed names.
func (r *Registry) Prefix(server string) string {
	r.subsMu.Lock()
	defer r.subsMu.Unlock()
	if p, ok := r.prefixes[server]; ok {
		return p
	}
	return server
}

package launcher

import (
	"context"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/caller"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/feature"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// Protocol returns the plugin's protocol client, for the version 2
// features (resources, prompts, completion, notifications) that the
// launcher itself does not wrap.
func (p *Plugin) Protocol() *protocol.Client { return p.proto }

// The version 2 features (package feature). A version 1 plugin answers
// each with an error: it offers tools only.

func (p *Plugin) v2(what string) error {
	if p.version < protocol.Version2 {
		return protocol.Errorf(protocol.CodeUnavailable, "plugin %s speaks protocol %d, which has no %s", p.spec.Name, p.version, what)
	}
	return nil
}

// ReadResource reads one of the plugin's resources. The caller's identity
// (package caller) goes with it as its owner.
func (p *Plugin) ReadResource(ctx context.Context, uri string) ([]toolcall.Content, error) {
	if err := p.v2("resources"); err != nil {
		return nil, err
	}
	resp, err := p.proto.ReadResource(ctx, &pluginv1.ReadResourceRequest{Uri: uri, Owner: caller.From(ctx)})
	if err != nil {
		return nil, err
	}
	out := make([]toolcall.Content, 0, len(resp.GetContents()))
	for _, c := range resp.GetContents() {
		out = append(out, protocol.ResourceFromWire(c))
	}
	return out, nil
}

// GetPrompt renders one of the plugin's prompts.
func (p *Plugin) GetPrompt(ctx context.Context, name string, args map[string]string) (*feature.PromptResult, error) {
	if err := p.v2("prompts"); err != nil {
		return nil, err
	}
	resp, err := p.proto.GetPrompt(ctx, &pluginv1.GetPromptRequest{Name: name, Arguments: args, Owner: caller.From(ctx)})
	if err != nil {
		return nil, err
	}
	out := &feature.PromptResult{Description: resp.GetDescription()}
	for _, m := range resp.GetMessages() {
		if c, ok := protocol.ContentFromWire(m.GetContent()); ok {
			out.Messages = append(out.Messages, feature.PromptMessage{Role: m.GetRole(), Content: c})
		}
	}
	return out, nil
}

// Complete asks the plugin for completions.
func (p *Plugin) Complete(ctx context.Context, req feature.CompleteRequest) (*feature.Completion, error) {
	if err := p.v2("completion"); err != nil {
		return nil, err
	}
	resp, err := p.proto.Complete(ctx, &pluginv1.CompleteRequest{RefType: req.RefType, Ref: req.Ref, Argument: req.Argument, Value: req.Value, Context: req.Context})
	if err != nil {
		return nil, err
	}
	return &feature.Completion{Values: resp.GetValues(), Total: int(resp.GetTotal()), HasMore: resp.GetHasMore()}, nil
}

// Subscribe starts or stops updates of one of the plugin's resources.
func (p *Plugin) Subscribe(ctx context.Context, uri string, on bool) error {
	if err := p.v2("resource subscriptions"); err != nil {
		return err
	}
	return p.proto.Subscribe(ctx, &pluginv1.SubscribeRequest{Uri: uri, Unsubscribe: !on})
}

// Watch receives the plugin's notifications until ctx ends or the plugin
// goes. On a list change it describes the plugin again before passing the
// event on, so that Describe already shows the new lists. A version 1
// plugin has no events: Watch waits for ctx or the plugin's exit.
func (p *Plugin) Watch(ctx context.Context, fn func(feature.Event)) error {
	if p.v2("notifications") != nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.Done():
			return protocol.ErrUnavailable
		}
	}
	return p.proto.Notifications(ctx, func(n *pluginv1.Notification) {
		switch k := n.GetKind().(type) {
		case *pluginv1.Notification_ResourceUpdated:
			fn(feature.Event{Kind: feature.ResourceUpdated, URI: k.ResourceUpdated.GetUri()})
		case *pluginv1.Notification_ListChanged:
			if err := p.describe(ctx); err != nil {
				p.log.Warn("the plugin's lists changed but describing it again failed", "error", err)
				return
			}
			fn(feature.Event{Kind: feature.ListChanged})
		}
	})
}

var _ feature.Server = (*Plugin)(nil)

package protocol

import (
	"math"
	"time"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// This file is where a plugin's Describe becomes the host's description
// of it (toolcall.Description), and back (the manifest cache keeps the
// wire form on disk).

// DescriptionFromWire converts a plugin's Describe answer. Empty lists
// become nil.
func DescriptionFromWire(d *pluginv1.DescribeResponse) *toolcall.Description {
	if d == nil {
		return nil
	}
	out := &toolcall.Description{
		Name: d.GetName(), PluginVersion: d.GetPluginVersion(), SDKVersion: d.GetSdkVersion(),
		Instructions: d.GetInstructions(), Completions: d.GetCompletions(), ResourceSubscribe: d.GetResourceSubscribe(),
	}
	if v := d.GetProtocolVersions(); len(v) > 0 {
		out.ProtocolVersions = append([]int32(nil), v...)
	}
	if s := d.GetSandbox(); s != nil {
		out.Sandbox = &toolcall.SandboxNeeds{Read: nonEmpty(s.GetRead()), Write: nonEmpty(s.GetWrite()), Network: s.GetNetwork()}
	}
	for _, t := range d.GetTools() {
		out.Tools = append(out.Tools, ToolFromWire(t))
	}
	for _, r := range d.GetResources() {
		out.Resources = append(out.Resources, &toolcall.Resource{
			URI: r.GetUri(), Name: r.GetName(), Title: r.GetTitle(), Description: r.GetDescription(),
			MIMEType: r.GetMimeType(), Size: r.GetSize(), AnnotationsJSON: nonEmpty(r.GetAnnotationsJson()),
		})
	}
	for _, r := range d.GetResourceTemplates() {
		out.ResourceTemplates = append(out.ResourceTemplates, &toolcall.ResourceTemplate{
			URITemplate: r.GetUriTemplate(), Name: r.GetName(), Title: r.GetTitle(), Description: r.GetDescription(),
			MIMEType: r.GetMimeType(), AnnotationsJSON: nonEmpty(r.GetAnnotationsJson()),
		})
	}
	for _, p := range d.GetPrompts() {
		pp := &toolcall.Prompt{Name: p.GetName(), Title: p.GetTitle(), Description: p.GetDescription()}
		for _, a := range p.GetArguments() {
			pp.Arguments = append(pp.Arguments, &toolcall.PromptArgument{Name: a.GetName(), Title: a.GetTitle(), Description: a.GetDescription(), Required: a.GetRequired()})
		}
		out.Prompts = append(out.Prompts, pp)
	}
	return out
}

// ToolFromWire converts one tool of a plugin's Describe answer.
func ToolFromWire(t *pluginv1.Tool) *toolcall.Tool {
	out := &toolcall.Tool{
		Name: t.GetName(), Title: t.GetTitle(), Description: t.GetDescription(),
		InputSchema: nonEmpty(t.GetInputSchema()), OutputSchema: nonEmpty(t.GetOutputSchema()),
		Access:                  accessFromWire(t.GetAccess()),
		SkipDuplicateCheck:      t.GetSkipDuplicateCheck(),
		CustomPermissionPattern: t.GetCustomPermissionPattern(),
		MaxDuration:             time.Duration(min(t.GetMaxDurationMs(), math.MaxInt64/uint64(time.Millisecond))) * time.Millisecond, //nolint:gosec // G115: clamped
	}
	if a := t.GetAnnotations(); a != nil {
		out.Annotations = &toolcall.Annotations{Title: a.Title, ReadOnlyHint: a.ReadOnlyHint, DestructiveHint: a.DestructiveHint, IdempotentHint: a.IdempotentHint, OpenWorldHint: a.OpenWorldHint}
	}
	return out
}

// accessFromWire converts an access level; one this host does not know
// (from a newer plugin) is unspecified, which the host treats as write.
func accessFromWire(a pluginv1.Access) toolcall.Access {
	switch a {
	case pluginv1.Access_ACCESS_READ:
		return toolcall.AccessRead
	case pluginv1.Access_ACCESS_WRITE:
		return toolcall.AccessWrite
	}
	return toolcall.AccessUnspecified
}

// DescriptionToWire converts a description back to the wire form
// (DescriptionFromWire of it gives an equal description).
func DescriptionToWire(d *toolcall.Description) *pluginv1.DescribeResponse {
	if d == nil {
		return nil
	}
	out := &pluginv1.DescribeResponse{
		Name: d.Name, PluginVersion: d.PluginVersion, SdkVersion: d.SDKVersion, Instructions: d.Instructions,
		Completions: d.Completions, ResourceSubscribe: d.ResourceSubscribe, ProtocolVersions: d.ProtocolVersions,
	}
	if s := d.Sandbox; s != nil {
		out.Sandbox = &pluginv1.SandboxNeeds{Read: s.Read, Write: s.Write, Network: s.Network}
	}
	for _, t := range d.Tools {
		wt := &pluginv1.Tool{
			Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema,
			Access: pluginv1.Access(t.Access), SkipDuplicateCheck: t.SkipDuplicateCheck, CustomPermissionPattern: t.CustomPermissionPattern,
			MaxDurationMs: uint64(t.MaxDuration / time.Millisecond), //nolint:gosec // G115: a duration the wire gave, or 0
		}
		if a := t.Annotations; a != nil {
			wt.Annotations = &pluginv1.Annotations{Title: a.Title, ReadOnlyHint: a.ReadOnlyHint, DestructiveHint: a.DestructiveHint, IdempotentHint: a.IdempotentHint, OpenWorldHint: a.OpenWorldHint}
		}
		out.Tools = append(out.Tools, wt)
	}
	for _, r := range d.Resources {
		out.Resources = append(out.Resources, &pluginv1.Resource{Uri: r.URI, Name: r.Name, Title: r.Title, Description: r.Description, MimeType: r.MIMEType, Size: r.Size, AnnotationsJson: r.AnnotationsJSON})
	}
	for _, r := range d.ResourceTemplates {
		out.ResourceTemplates = append(out.ResourceTemplates, &pluginv1.ResourceTemplate{UriTemplate: r.URITemplate, Name: r.Name, Title: r.Title, Description: r.Description, MimeType: r.MIMEType, AnnotationsJson: r.AnnotationsJSON})
	}
	for _, p := range d.Prompts {
		wp := &pluginv1.Prompt{Name: p.Name, Title: p.Title, Description: p.Description}
		for _, a := range p.Arguments {
			wp.Arguments = append(wp.Arguments, &pluginv1.PromptArgument{Name: a.Name, Title: a.Title, Description: a.Description, Required: a.Required})
		}
		out.Prompts = append(out.Prompts, wp)
	}
	return out
}

// nonEmpty returns s, or nil when it is empty.
func nonEmpty[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return s
}

package toolcall

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"
)

// Description is what a tool server says about itself: its tools, the
// other features it offers and what its sandbox must grant. A plugin's
// comes from its Describe (converted in package protocol), an external
// MCP server's from its tools, resources and prompts lists (package
// external), a lazy server's from its cached manifest.
//
// A Description is not changed once it is handed out: a server whose
// lists change hands out a new one.
type Description struct {
	Name          string
	PluginVersion string
	SDKVersion    string
	Instructions  string
	Tools         []*Tool
	// Sandbox is what the server needs its sandbox to grant (nil: it
	// declared nothing).
	Sandbox           *SandboxNeeds
	Resources         []*Resource
	ResourceTemplates []*ResourceTemplate
	Prompts           []*Prompt
	// Completions: the server completes prompt and resource template
	// arguments. ResourceSubscribe: it sends updates of subscribed
	// resources.
	Completions       bool
	ResourceSubscribe bool
	// ProtocolVersions are the plugin protocol versions the server speaks.
	ProtocolVersions []int32
}

// Access is the access level a tool declares.
type Access int8

// The access levels, numbered as on the wire.
const (
	// AccessUnspecified: the tool declared none; the host treats it as
	// AccessWrite.
	AccessUnspecified Access = iota
	// AccessRead: the tool only reads.
	AccessRead
	// AccessWrite: the tool may change things.
	AccessWrite
)

// Tool is one tool of a server.
type Tool struct {
	Name        string
	Title       string
	Description string
	// InputSchema and OutputSchema are JSON Schemas (OutputSchema is nil
	// when the tool declares none).
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	Annotations  *Annotations // nil: none
	Access       Access
	// SkipDuplicateCheck: the host does not refuse a call identical to the
	// one before it.
	SkipDuplicateCheck bool
	// CustomPermissionPattern: the server tells the host, per call, what
	// the call would do (PermissionPatterns).
	CustomPermissionPattern bool
	// MaxDuration is the longest the tool asks to be given (0: the host's
	// limit).
	MaxDuration time.Duration
}

// Annotations are MCP's tool annotations; a nil field was not given.
type Annotations struct {
	Title           *string
	ReadOnlyHint    *bool
	DestructiveHint *bool
	IdempotentHint  *bool
	OpenWorldHint   *bool
}

// Resource is a resource a server lists.
type Resource struct {
	URI         string
	Name        string
	Title       string
	Description string
	MIMEType    string
	Size        int64
	// AnnotationsJSON is MCP's resource annotations as JSON (nil: none).
	AnnotationsJSON json.RawMessage
}

// ResourceTemplate is a resource template a server lists.
type ResourceTemplate struct {
	URITemplate     string
	Name            string
	Title           string
	Description     string
	MIMEType        string
	AnnotationsJSON json.RawMessage
}

// Prompt is a prompt a server lists.
type Prompt struct {
	Name        string
	Title       string
	Description string
	Arguments   []*PromptArgument
}

// PromptArgument is one argument of a prompt.
type PromptArgument struct {
	Name        string
	Title       string
	Description string
	Required    bool
}

// SandboxNeeds is what a server declares its sandbox must grant: paths to
// read, paths to write, and the network.
type SandboxNeeds struct {
	Read    []string
	Write   []string
	Network bool
}

// Equal reports whether d and o describe the same server: the same
// fields, lists in the same order (a nil list and an empty one are the
// same, as are a nil and an empty schema).
func (d *Description) Equal(o *Description) bool {
	if d == nil || o == nil {
		return d == o
	}
	return d.Name == o.Name && d.PluginVersion == o.PluginVersion && d.SDKVersion == o.SDKVersion &&
		d.Instructions == o.Instructions && d.Completions == o.Completions && d.ResourceSubscribe == o.ResourceSubscribe &&
		slices.Equal(d.ProtocolVersions, o.ProtocolVersions) &&
		d.Sandbox.Equal(o.Sandbox) &&
		slices.EqualFunc(d.Tools, o.Tools, (*Tool).Equal) &&
		slices.EqualFunc(d.Resources, o.Resources, (*Resource).equal) &&
		slices.EqualFunc(d.ResourceTemplates, o.ResourceTemplates, (*ResourceTemplate).equal) &&
		slices.EqualFunc(d.Prompts, o.Prompts, (*Prompt).equal)
}

// Equal reports whether t and o are the same tool, field by field.
func (t *Tool) Equal(o *Tool) bool {
	if t == nil || o == nil {
		return t == o
	}
	return t.Name == o.Name && t.Title == o.Title && t.Description == o.Description &&
		bytes.Equal(t.InputSchema, o.InputSchema) && bytes.Equal(t.OutputSchema, o.OutputSchema) &&
		t.Annotations.equal(o.Annotations) && t.Access == o.Access &&
		t.SkipDuplicateCheck == o.SkipDuplicateCheck && t.CustomPermissionPattern == o.CustomPermissionPattern &&
		t.MaxDuration == o.MaxDuration
}

// Equal reports whether n and o grant the same (nil grants nothing, like
// an empty SandboxNeeds).
func (n *SandboxNeeds) Equal(o *SandboxNeeds) bool {
	if n == nil {
		n = &SandboxNeeds{}
	}
	if o == nil {
		o = &SandboxNeeds{}
	}
	return slices.Equal(n.Read, o.Read) && slices.Equal(n.Write, o.Write) && n.Network == o.Network
}

func (a *Annotations) equal(o *Annotations) bool {
	if a == nil || o == nil {
		return a == o
	}
	return eqPtr(a.Title, o.Title) && eqPtr(a.ReadOnlyHint, o.ReadOnlyHint) && eqPtr(a.DestructiveHint, o.DestructiveHint) &&
		eqPtr(a.IdempotentHint, o.IdempotentHint) && eqPtr(a.OpenWorldHint, o.OpenWorldHint)
}

func eqPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func (r *Resource) equal(o *Resource) bool {
	if r == nil || o == nil {
		return r == o
	}
	return r.URI == o.URI && r.Name == o.Name && r.Title == o.Title && r.Description == o.Description &&
		r.MIMEType == o.MIMEType && r.Size == o.Size && bytes.Equal(r.AnnotationsJSON, o.AnnotationsJSON)
}

func (r *ResourceTemplate) equal(o *ResourceTemplate) bool {
	if r == nil || o == nil {
		return r == o
	}
	return r.URITemplate == o.URITemplate && r.Name == o.Name && r.Title == o.Title && r.Description == o.Description &&
		r.MIMEType == o.MIMEType && bytes.Equal(r.AnnotationsJSON, o.AnnotationsJSON)
}

func (p *Prompt) equal(o *Prompt) bool {
	if p == nil || o == nil {
		return p == o
	}
	return p.Name == o.Name && p.Title == o.Title && p.Description == o.Description &&
		slices.EqualFunc(p.Arguments, o.Arguments, func(a, b *PromptArgument) bool {
			if a == nil || b == nil {
				return a == b
			}
			return *a == *b
		})
}

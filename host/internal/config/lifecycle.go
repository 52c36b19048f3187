package config

import (
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// StartMode is when a server's process starts: `start = "eager" | "lazy"`.
type StartMode string

// The start modes.
const (
	// StartAuto (no setting) is lazy for built-ins and plugins once their
	// manifest is cached, eager otherwise (the first start learns it).
	StartAuto StartMode = ""
	// StartEager starts the server with the host.
	StartEager StartMode = "eager"
	// StartLazy lists the server's tools from its cached manifest and
	// starts it at its first call.
	StartLazy StartMode = "lazy"
)

// Lifecycle is when a server runs: a server block's start and
// idle_timeout (defaults: the top-level attributes of the same names).
type Lifecycle struct {
	Start StartMode
	// IdleTimeout stops a server nobody has called for this long (0 =
	// never); its tools stay listed and the next call starts it again.
	IdleTimeout time.Duration
}

// lifecycle reads start and idle_timeout of the block defined at def
// (def == nil: the top-level attributes), over the defaults dflt.
func (b *builder) lifecycle(def *hcl.Range, start, idle *string, dflt Lifecycle) Lifecycle {
	at := func(name string) hcl.Range {
		if def == nil {
			return b.at(name)
		}
		return b.in(*def, name)
	}
	l := dflt
	if start != nil {
		switch m := StartMode(*start); m {
		case StartEager, StartLazy:
			l.Start = m
		default:
			b.errAt(at("start"), "Invalid start", fmt.Sprintf("start = %q: use \"eager\" (start with the host) or \"lazy\" (start at the first call; its tools are listed from the cached manifest).", *start))
		}
	}
	if idle != nil {
		if *idle == "0" || *idle == "0s" {
			l.IdleTimeout = 0
		} else if d, ok := b.duration(at("idle_timeout"), "idle_timeout", *idle); ok {
			l.IdleTimeout = d
		}
	}
	return l
}

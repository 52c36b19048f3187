package frontend

import (
	"context"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/switchboard-mcp/switchboard/host/internal/approvals"
)

// PendingServer is a server that waits for a person's yes before it may
// start (a new or changed .mcp.json entry).
type PendingServer struct {
	Name string
	// What says what would run (the command line or URL), for the person.
	What string
	// Hash identifies the entry as asked about; the approval is for it.
	Hash string
}

// ServerApprover is where the host keeps servers that wait for approval.
// PendingServers may be called at any time; ApproveServer records a yes
// for the entry with that hash (not for whatever the entry is by then) and
// starts the server.
type ServerApprover interface {
	PendingServers() []PendingServer
	ApproveServer(ctx context.Context, name, hash string) error
}

// SetServerApprover makes the front end ask clients that can elicit about
// pending servers, once per session, after the client first lists the
// tools: sessions of the 2025-11-25 era with the elicitation capability
// (a 2026-07-28 client can only be asked inside a call).
func (f *Frontend) SetServerApprover(a ServerApprover) {
	f.approverMu.Lock()
	f.approver = a
	f.approverMu.Unlock()
}

// hooks are the front end's mcp-go hooks: audit of refusals, and pending
// servers put to the person.
func (f *Frontend) hooks() *server.Hooks {
	h := f.auditHooks()
	h.AddAfterListTools(f.askAboutServers)
	f.featureHooks(h)
	h.AddOnUnregisterSession(func(_ context.Context, s server.ClientSession) { f.forgetSession(s.SessionID()) })
	return h
}

// askAboutServers is the after-tools/list hook: the session is initialized
// by then, so the host may send it requests.
func (f *Frontend) askAboutServers(ctx context.Context, _ any, _ *mcp.ListToolsRequest, _ *mcp.ListToolsResult) {
	f.approverMu.Lock()
	a := f.approver
	f.approverMu.Unlock()
	// Only a session of the 2025-11-25 era may be sent a request outside
	// a call; 2026-07-28 clients ask through a call's input request, and
	// there is no call to hang this on, so they use `switchboard approve`.
	if info := server.RequestProtocolInfoFromContext(ctx); a == nil || (info != nil && info.Modern) || !approvals.ClientCanElicit(ctx) {
		return
	}
	session := server.ClientSessionFromContext(ctx)
	if session == nil {
		return
	}
	if _, asked := f.askedSessions.LoadOrStore(session.SessionID(), true); asked {
		return
	}
	pending := a.PendingServers()
	if len(pending) == 0 {
		return
	}
	// The request runs outside the tools/list call it follows, bounded so a
	// client that never answers does not keep it forever.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Minute)
	f.asking.Add(1)
	go func() {
		defer f.asking.Done()
		defer cancel()
		for _, p := range pending {
			res, err := f.srv.RequestElicitation(sctx, approvals.ServerQuestion(p.Name, p.What))
			if err != nil {
				f.log.Debug("could not ask about a pending server", "server", p.Name, "error", err)
				return
			}
			if approvals.ServerApproved(res) {
				if err := a.ApproveServer(sctx, p.Name, p.Hash); err != nil {
					f.log.Warn("approving a pending server failed", "server", p.Name, "error", err)
				}
			}
		}
	}()
}

// askState is the front end's memory of which sessions were asked.
type askState struct {
	approverMu    sync.Mutex
	approver      ServerApprover
	askedSessions sync.Map
	asking        sync.WaitGroup
}

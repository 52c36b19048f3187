package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-mcp/switchboard/host/internal/control"
	"github.com/switchboard-mcp/switchboard/host/internal/frontend"
	"github.com/switchboard-mcp/switchboard/host/internal/statuspage"
)

// waitingServers are the servers that wait for a person: quarantined
// (their tools changed) or awaiting approval (.mcp.json), with why.
func waitingServers(rows []ServerInfo) []string {
	var out []string
	for _, r := range rows {
		if r.Status == StatusQuarantined || r.Status == StatusAwaitingApproval {
			out = append(out, fmt.Sprintf("%s (%s): %s; `switchboard approve %s`", r.Name, r.Status, r.Error, r.Name))
		}
	}
	return out
}

func (a *app) uiCmd() *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "ui [--listen 127.0.0.1:PORT]",
		Short: "Serve the status page of the running host(s) on this config (serve --http has it at /status)",
		Long: "Serve the status page of a running host on this config: its servers, recent calls, refusals\n" +
			"and what waits for approval, updated live. A host serving over HTTP has it at /status itself;\n" +
			"this command serves it beside a stdio host, reading it through the control socket.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := a.dataDir()
			if err != nil {
				return fail(2, "%v", err)
			}
			if _, err := a.controlCall(cmd, "GET", "/v1/status"); err != nil {
				return err // no host: say so now, not on the page
			}
			ln, err := frontend.ListenHTTP(listen, frontend.HTTPOptions{})
			if err != nil {
				return fail(2, "%v", err)
			}
			src := statuspage.Source{Interval: 500 * time.Millisecond, Snapshot: func() (statuspage.Snapshot, error) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				replies, err := control.Call(ctx, dir, "GET", "/v1/activity")
				if err != nil {
					return statuspage.Snapshot{}, err
				}
				for _, r := range replies { // the first host that answers
					var s statuspage.Snapshot
					if r.Code == http.StatusOK && json.Unmarshal(r.Body, &s) == nil {
						return s, nil
					}
				}
				return statuspage.Snapshot{}, errors.New("no running host answered")
			}}
			hs := &http.Server{Handler: frontend.CheckOrigin(ln.Addr(), statuspage.Handler(src)), ReadHeaderTimeout: 10 * time.Second}
			url := "http://" + ln.Addr().String() + statuspage.Path
			fmt.Fprintf(a.stderr, "switchboard: status page at %s\n", url)
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			go func() {
				<-ctx.Done()
				_ = hs.Close()
			}()
			if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fail(2, "ui: %v", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8766", "address to serve the page on (loopback)")
	return cmd
}

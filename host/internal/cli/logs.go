package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-mcp/switchboard/host/internal/control"
	"github.com/switchboard-mcp/switchboard/host/internal/logbook"
)

// FollowLogs implements control.LogReader from the host's log book.
func (c hostControl) FollowLogs(name string, since time.Time, follow bool) ([]logbook.Line, <-chan logbook.Line, func(), error) {
	if c.book == nil {
		return nil, nil, nil, errors.New("this host keeps no logs")
	}
	var names []string
	for _, si := range ServerInfos(c.h.Registry()) {
		names = append(names, si.Name)
	}
	if !slices.Contains(names, name) {
		return nil, nil, nil, fmt.Errorf("no server named %q on this host; its servers: %s", name, strings.Join(names, ", "))
	}
	if !follow {
		return c.book.Lines(name, since), nil, func() {}, nil
	}
	past, next, stop := c.book.Follow(name, since)
	return past, next, stop, nil
}

func (a *app) logsCmd() *cobra.Command {
	var (
		follow bool
		since  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "logs NAME",
		Short: "Print one server's recent log lines from every running host (--follow for new ones)",
		Long: "Print one server's recent log lines (what it wrote on stderr and what the host logged about it)\n" +
			"from every running host on this config: the last 1000 lines at info and above (debug too when\n" +
			"log_level is debug), kept in memory by the host.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := a.dataDir()
			if err != nil {
				return fail(2, "%v", err)
			}
			q := url.Values{"name": {args[0]}}
			if since > 0 {
				q.Set("since", time.Now().Add(-since).UTC().Format(time.RFC3339Nano))
			}
			ctx := cmd.Context()
			if follow {
				q.Set("follow", "1")
				var stop func()
				ctx, stop = signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
				defer stop()
			}
			hosts := map[string]bool{}
			var refused []string
			err = control.Stream(ctx, dir, "/v1/logs?"+q.Encode(), func(sock string, code int, b []byte) {
				if code != 200 {
					var e struct {
						Error string `json:"error"`
					}
					_ = json.Unmarshal(b, &e)
					refused = append(refused, e.Error)
					return
				}
				hosts[sock] = true
				if a.jsonOut {
					fmt.Fprintf(a.stdout, "%s\n", b)
					return
				}
				var l logbook.Line
				if json.Unmarshal(b, &l) != nil {
					return
				}
				fmt.Fprintln(a.stdout, l.String())
			})
			if err != nil {
				if errors.Is(err, control.ErrNoHost) {
					if _, cerr := a.controlCall(cmd, "GET", "/v1/status"); cerr != nil {
						return cerr // the same diagnosis as status
					}
				}
				return fail(2, "%v", err)
			}
			if len(hosts) == 0 && len(refused) > 0 {
				return fail(1, "%s", refused[0])
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines until interrupted")
	cmd.Flags().DurationVar(&since, "since", 0, "only lines from this long ago (e.g. 5m)")
	cmd.Flags().BoolVar(&a.jsonOut, "json", false, "print each line as JSON")
	return cmd
}

package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/switchboard-mcp/switchboard/host/internal/auth"
	"github.com/switchboard-mcp/switchboard/host/internal/strictmode"
)

// tokenCmd manages the static bearer tokens of the HTTP front end: `token
// new NAME [--access read|write]`, `token list`, `token revoke NAME`. Only
// each token's SHA-256 is kept (in the auth block's tokens_file, default
// data_dir/tokens.json); the token itself is printed once.
func (a *app) tokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke the bearer tokens of `serve --http`",
	}
	var access string
	newCmd := &cobra.Command{
		Use:   "new NAME",
		Short: "Create a token and print it once (only its hash is stored)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			if err := strictmode.PrivateDir(cfg.DataDir); err != nil {
				return fail(2, "data_dir: %v", err)
			}
			secret, err := auth.NewToken(cfg.Auth.TokensFile, args[0], access)
			if err != nil {
				return fail(2, "%v", err)
			}
			fmt.Fprintln(a.stdout, secret)
			fmt.Fprintf(a.stderr, "switchboard: token %q (access %s) saved as a hash in %s; this is the only time it is shown. Clients send it as \"Authorization: Bearer TOKEN\"; a caller %q block in the config narrows what it may do.\n",
				args[0], access, cfg.Auth.TokensFile, args[0])
			return nil
		},
	}
	newCmd.Flags().StringVar(&access, "access", "write", "read: the token may list and call READ tools only; write: every tool the config allows")
	listCmd := &cobra.Command{
		Use:   "list",
		Short: "List the tokens: name, access, created",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			tokens, err := auth.LoadTokens(cfg.Auth.TokensFile)
			if err != nil {
				return fail(2, "%v", err)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tACCESS\tCREATED")
			for _, t := range tokens {
				acc := t.Access
				if acc == "" {
					acc = "write"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, acc, t.Created.Format("2006-01-02 15:04:05Z"))
			}
			return tw.Flush()
		},
	}
	revokeCmd := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Remove a token; a running host refuses it from its next request",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			if err := auth.RevokeToken(cfg.Auth.TokensFile, args[0]); err != nil {
				return fail(2, "%v", err)
			}
			fmt.Fprintf(a.stderr, "switchboard: token %q revoked\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(newCmd, listCmd, revokeCmd)
	return cmd
}

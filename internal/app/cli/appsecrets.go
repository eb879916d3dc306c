package cli

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/chimehq/chime/internal/app/api"
)

// newAppSecretSubcommands builds "chime app secret set|list|delete": the
// secrets kept per app, which timers refer to as {{secret.NAME}}.
func newAppSecretSubcommands(o *clientOptions) []*cobra.Command {
	return []*cobra.Command{newAppSecretSetCmd(o), newAppSecretListCmd(o), newAppSecretDeleteCmd(o)}
}

func appSecretsPath(app string) string { return "/api/v1/apps/" + url.PathEscape(app) + "/secrets" }

func newAppSecretSetCmd(o *clientOptions) *cobra.Command {
	var (
		app, valueFile  string
		hosts, commands []string
	)
	cmd := &cobra.Command{
		Use:   "set NAME --app APP --value-file PATH|- (--host HOST ... | --command CMD ...)",
		Short: "Create or replace a secret of an app, which its timers refer to as {{secret.NAME}}",
		Long: `Store a secret for an app's timers: they refer to it as {{secret.NAME}} in
an HTTP header value, the userinfo of an HTTP URL, an HTTP body or a shell
env value, and chime puts the value in when the action runs, only for a
URL whose host is one of --host or a shell command that is one of
--command. The value is read from --value-file ("-": standard input; one
trailing newline is dropped), never from the command line; the server
keeps it encrypted (--secret-key) and never shows it again. Replacing a
secret replaces its hosts and commands too.

  printf %s "$TOKEN" | chime app secret set API_TOKEN --app billing --value-file - --host api.example.com`,
		Args: exactArgs(1, "the secret's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			switch {
			case app == "":
				return usageErrorf("--app is required")
			case valueFile == "":
				return usageErrorf("--value-file is required (a path, or - for standard input)")
			case len(hosts) == 0 && len(commands) == 0:
				return usageErrorf("give at least one --host or --command the secret may be sent to")
			}
			var b []byte
			if valueFile == "-" {
				b, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), 1<<20))
			} else {
				b, err = os.ReadFile(valueFile)
			}
			if err != nil {
				return fmt.Errorf("read the value: %w", err)
			}
			value := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
			var out api.AppSecret
			raw, err := c.do(cmd.Context(), "PUT", appSecretsPath(app)+"/"+url.PathEscape(args[0]), nil,
				api.AppSecretRequest{Value: &value, Hosts: hosts, Commands: commands}, &out)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return printJSON(cmd.OutOrStdout(), raw)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "set secret %s of app %s\n", out.Name, app)
			return err
		},
	}
	cmd.Flags().StringVar(&app, "app", "", "the app")
	cmd.Flags().StringVar(&valueFile, "value-file", "", `file holding the value; "-" reads standard input`)
	cmd.Flags().StringSliceVar(&hosts, "host", nil, "a URL host the secret may be sent to (repeat, or comma-separated)")
	cmd.Flags().StringArrayVar(&commands, "command", nil, "a shell command, as actions name it, that may be given the secret (repeat)")
	return cmd
}

func newAppSecretListCmd(o *clientOptions) *cobra.Command {
	var app string
	cmd := &cobra.Command{
		Use:   "list --app APP",
		Short: "List an app's secrets: names, hosts, commands and dates, never values",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if app == "" {
				return usageErrorf("--app is required")
			}
			var out api.AppSecrets
			raw, err := c.do(cmd.Context(), "GET", appSecretsPath(app), nil, nil, &out)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return printJSON(cmd.OutOrStdout(), raw)
			}
			tb := newTable(cmd.OutOrStdout(), "NAME", "HOSTS", "COMMANDS", "UPDATED")
			for _, s := range out.Secrets {
				tb.row(s.Name, strings.Join(s.Hosts, ","), strings.Join(s.Commands, ","), fmtTime(&s.UpdatedAt))
			}
			return tb.flush()
		},
	}
	cmd.Flags().StringVar(&app, "app", "", "the app")
	return cmd
}

func newAppSecretDeleteCmd(o *clientOptions) *cobra.Command {
	var app string
	cmd := &cobra.Command{
		Use:   "delete NAME --app APP",
		Short: "Delete a secret of an app (timers that refer to it fail until it is set again)",
		Args:  exactArgs(1, "the secret's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if app == "" {
				return usageErrorf("--app is required")
			}
			return newDeleteCmd(o, "", "", "", appSecretsPath(app)+"/", "deleted secret").RunE(cmd, args)
		},
	}
	cmd.Flags().StringVar(&app, "app", "", "the app")
	return cmd
}

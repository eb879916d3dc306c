package cli

import (
	"fmt"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/chimehq/chime/internal/app/api"
)

func init() { addCommand(newAppCmd) }

// newAppCmd builds "chime app", the per-app commands over the REST API.
func newAppCmd() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:     "app",
		Aliases: []string{"apps"},
		Short:   "Manage an app on a chime server: its callback signing secret, pause and resume its timers",
	}
	addClientFlags(cmd, &o)
	cmd.AddCommand(newAppSecretCmd(&o),
		newAppPauseCmd(&o, "pause", "Pause every timer of an app (see chime timer pause)"),
		newAppPauseCmd(&o, "resume", "Resume every paused timer of an app"))
	return cmd
}

func newAppSecretCmd(o *clientOptions) *cobra.Command {
	var (
		app     string
		rotate  bool
		overlap string
	)
	cmd := &cobra.Command{
		Use:   "secret --app APP [--rotate [--overlap D]] | secret set|list|delete",
		Short: "Show, or rotate, the secret that signs an app's HTTP callbacks; set, list or delete the app's secrets",
		Long: `Show the secret that signs the HTTP callbacks of an app's timers
(webhook-signature, the Standard Webhooks scheme: see docs/callbacks.md).
An app that has no secret yet gets one.

With --rotate, a new secret is made; the secrets signing until now keep
signing beside it for the server's --signing-overlap (24h by default), or
for --overlap ("0s" stops them at once, for a secret that leaked).

  chime app secret --app billing
  chime app secret --app billing --rotate -o json

The subcommands set, list and delete manage the secrets kept for the app's
timers ({{secret.NAME}}): see "chime app secret set --help".`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if app == "" {
				return usageErrorf("--app is required")
			}
			if cmd.Flags().Changed("overlap") && !rotate {
				return usageErrorf("--overlap applies to --rotate")
			}
			path := "/api/v1/apps/" + url.PathEscape(app) + "/signing-secret"
			method := "GET"
			var body any
			if rotate {
				method, path = "POST", path+"/rotate"
				if cmd.Flags().Changed("overlap") {
					body = api.RotateRequest{Overlap: &overlap}
				}
			}
			var out api.SigningSecret
			raw, err := c.do(cmd.Context(), method, path, nil, body, &out)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return printJSON(cmd.OutOrStdout(), raw)
			}
			tb := newTable(cmd.OutOrStdout())
			tb.row("App:", out.App)
			tb.row("Secret:", out.Secret)
			tb.row("Version:", strconv.Itoa(out.Version))
			tb.row("Created:", fmtTime(&out.CreatedAt))
			for _, v := range out.Active {
				if v.Version != out.Version {
					tb.row("Also signing:", fmt.Sprintf("version %d until %s", v.Version, fmtTime(v.ExpiresAt)))
				}
			}
			return tb.flush()
		},
	}
	cmd.AddCommand(newAppSecretSubcommands(o)...)
	cmd.Flags().StringVar(&app, "app", "", "the app")
	cmd.Flags().BoolVar(&rotate, "rotate", false, "make a new secret; the current ones keep signing for the overlap")
	cmd.Flags().StringVar(&overlap, "overlap", "", `with --rotate: how long the current secrets keep signing, a Go duration (server default --signing-overlap)`)
	return cmd
}

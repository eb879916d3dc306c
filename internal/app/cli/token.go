package cli

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/chimehq/chime/internal/app/api"
)

func init() {
	addCommand(newTokenCmd)
	addCommand(newAuditCmd)
}

// newTokenCmd builds "chime token": create, list and revoke API tokens
// (admin tokens only).
func newTokenCmd() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke API tokens (needs an admin token)",
	}
	addClientFlags(cmd, &o)
	cmd.AddCommand(newTokenCreateCmd(&o), newTokenListCmd(&o), newDeleteCmd(&o, "revoke ID", "Revoke a token: every node refuses it within 5 seconds", "one token ID", "/api/v1/tokens/", "revoked token"))
	return cmd
}

func newTokenCreateCmd(o *clientOptions) *cobra.Command {
	var (
		in        api.TokenRequest
		expiresAt string
	)
	cmd := &cobra.Command{
		Use:   "create --name N --role read|write|admin [--app A]... [--ttl D | --expires-at T]",
		Short: "Create a token and print it: it is shown this once",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if in.Name == "" {
				return usageErrorf("--name is required")
			}
			if in.Role == "" {
				return usageErrorf("--role is required (read, write or admin)")
			}
			if in.TTL != "" && expiresAt != "" {
				return usageErrorf("give --ttl or --expires-at, not both")
			}
			if in.TTL != "" {
				if d, err := time.ParseDuration(in.TTL); err != nil || d <= 0 {
					return usageErrorf("--ttl must be a positive Go duration such as 720h, not %q", in.TTL)
				}
			}
			if expiresAt != "" {
				at, err := time.Parse(time.RFC3339, expiresAt)
				if err != nil {
					return usageErrorf("--expires-at must be an RFC 3339 time such as 2027-01-02T15:04:05Z, not %q", expiresAt)
				}
				in.ExpiresAt = &at
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			var out api.Token
			raw, err := c.do(cmd.Context(), "POST", "/api/v1/tokens", nil, in, &out)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return printJSON(cmd.OutOrStdout(), raw)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "created token %s (%s, %s, apps: %s, expires: %s)\n", out.ID, out.Name, out.Role, appsText(out.Apps), expiresText(out.ExpiresAt))
			fmt.Fprintln(cmd.ErrOrStderr(), "keep it now: it is not shown again")
			_, err = fmt.Fprintln(w, out.Token)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.Name, "name", "", "what the token is for (shown in lists and the audit log)")
	f.StringVar(&in.Role, "role", "", "read (GET only), write (also change, trigger and backfill timers) or admin (everything)")
	f.StringArrayVar(&in.Apps, "app", nil, "limit the token to this app (repeatable); none: every app")
	f.StringVar(&in.TTL, "ttl", "", "the token stops working this long from now, a Go duration such as 720h; none: it works until revoked")
	f.StringVar(&expiresAt, "expires-at", "", "the token stops working at this RFC 3339 time (instead of --ttl)")
	return cmd
}

func expiresText(at *time.Time) string {
	if at == nil {
		return "never"
	}
	return at.Format(time.RFC3339)
}

func appsText(apps []string) string {
	if len(apps) == 0 {
		return "all"
	}
	return strings.Join(apps, ",")
}

func newTokenListCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the tokens (without their secrets)",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var out api.TokenList
			raw, err := c.do(cmd.Context(), "GET", "/api/v1/tokens", nil, nil, &out)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return printJSON(cmd.OutOrStdout(), raw)
			}
			t := newTable(cmd.OutOrStdout(), "ID", "NAME", "ROLE", "APPS", "CREATED", "EXPIRES", "LAST USED")
			for _, tok := range out.Tokens {
				t.row(tok.ID, tok.Name, tok.Role, appsText(tok.Apps), fmtTime(&tok.CreatedAt), expiresText(tok.ExpiresAt), fmtTime(tok.LastUsedAt))
			}
			return t.flush()
		},
	}
}

// newAuditCmd builds "chime audit": the audit log, newest first.
func newAuditCmd() *cobra.Command {
	var (
		o                   clientOptions
		app, target, cursor string
		limit               int
	)
	cmd := &cobra.Command{
		Use:   "audit [--app A] [--target ID] [--limit N] [--cursor C]",
		Short: "Print the audit log of changes, newest first",
	}
	addClientFlags(cmd, &o)
	cmd.Args = exactArgs(0, "no arguments")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if limit < 1 {
			return usageErrorf("--limit must be at least 1, got %d", limit)
		}
		c, err := o.client()
		if err != nil {
			return err
		}
		q := url.Values{"limit": {strconv.Itoa(limit)}}
		for k, v := range map[string]string{"app": app, "target": target, "cursor": cursor} {
			if v != "" {
				q.Set(k, v)
			}
		}
		var out api.AuditList
		raw, err := c.do(cmd.Context(), "GET", "/api/v1/audit", q, nil, &out)
		if err != nil {
			return err
		}
		if c.output == "json" {
			return printJSON(cmd.OutOrStdout(), raw)
		}
		t := newTable(cmd.OutOrStdout(), "TIME", "ACTION", "APP", "TARGET", "BY", "FROM", "DETAIL")
		for _, e := range out.Entries {
			by := e.TokenName
			if by == "" {
				by = "-"
			}
			t.row(fmtTime(&e.At), e.Action, e.App, e.Target, by, e.Remote, truncate(e.Detail, 60))
		}
		if err := t.flush(); err != nil {
			return err
		}
		if out.NextCursor != "" {
			fmt.Fprintf(cmd.ErrOrStderr(), "more: --cursor %s\n", out.NextCursor)
		}
		return nil
	}
	f := cmd.Flags()
	f.StringVar(&app, "app", "", "only this app's entries")
	f.StringVar(&target, "target", "", "only entries about this id (timer, token or app)")
	f.IntVar(&limit, "limit", 100, "entries per page (at most 1000)")
	f.StringVar(&cursor, "cursor", "", "next page cursor printed by the previous call")
	return cmd
}

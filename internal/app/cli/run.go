package cli

import (
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/chimehq/chime/internal/app/api"
)

// newRunCmd builds "chime run", the run commands over the REST API.
func newRunCmd() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "run",
		Short: "List and show the runs (fires) of timers",
	}
	addClientFlags(cmd, &o)
	cmd.AddCommand(newRunListCmd(&o), newRunGetCmd(&o))
	return cmd
}

func newRunListCmd(o *clientOptions) *cobra.Command {
	var (
		timer, status, cursor string
		limit                 int
	)
	cmd := &cobra.Command{
		Use:   "list --timer ID [--status S] [--limit N] [--cursor C]",
		Short: "List a timer's runs, newest first",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timer == "" {
				return usageErrorf("--timer is required")
			}
			if limit < 1 {
				return usageErrorf("--limit must be at least 1, got %d", limit)
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			q := url.Values{"limit": {strconv.Itoa(limit)}}
			if status != "" {
				q.Set("status", status)
			}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			var out api.RunList
			raw, err := c.do(cmd.Context(), "GET", "/api/v1/timers/"+url.PathEscape(timer)+"/runs", q, nil, &out)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return printJSON(cmd.OutOrStdout(), raw)
			}
			tb := newTable(cmd.OutOrStdout(), "ID", "SCHEDULED", "STATUS", "ATTEMPT", "DURATION", "NODE", "ERROR")
			for _, r := range out.Runs {
				status := r.Status
				if r.Reason != "" {
					status += " (" + r.Reason + ")"
				}
				tb.row(r.ID, fmtTime(&r.ScheduledAt), status, strconv.Itoa(r.Attempt), duration(r),
					dash(r.Node), dash(truncate(r.Error, 60)))
			}
			if err := tb.flush(); err != nil {
				return err
			}
			if out.NextCursor != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "more runs: --cursor %s\n", out.NextCursor)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&timer, "timer", "", "the timer: its ID or APP/NAME (required)")
	cmd.Flags().StringVar(&status, "status", "", "only runs in this status: pending, running, succeeded, failed, skipped, cancelled")
	cmd.Flags().IntVar(&limit, "limit", 20, "number of runs")
	cmd.Flags().StringVar(&cursor, "cursor", "", "next page cursor from the previous list")
	return cmd
}

func newRunGetCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "get ID",
		Short: "Show a run, with its attempts, output and error",
		Args:  exactArgs(1, "one run ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var out api.Run
			raw, err := c.do(cmd.Context(), "GET", "/api/v1/runs/"+url.PathEscape(args[0]), nil, nil, &out)
			if err != nil {
				return err
			}
			return c.printRun(cmd.OutOrStdout(), raw, &out)
		},
	}
}

// printRun prints a run as JSON or as a list of fields.
func (c *client) printRun(w io.Writer, raw []byte, r *api.Run) error {
	if c.output == "json" {
		return printJSON(w, raw)
	}
	tb := newTable(w)
	tb.row("ID:", r.ID)
	tb.row("Timer:", r.TimerID)
	tb.row("Scheduled:", fmtTime(&r.ScheduledAt))
	tb.row("Due:", fmtTime(&r.DueAt))
	tb.row("Status:", r.Status)
	if r.NextAttemptAt != nil {
		tb.row("Next attempt:", fmtTime(r.NextAttemptAt))
	}
	if r.Reason != "" {
		tb.row("Reason:", r.Reason)
	}
	tb.row("Attempt:", strconv.Itoa(r.Attempt))
	tb.row("Manual:", strconv.FormatBool(r.Manual))
	if r.RerunOf != "" {
		tb.row("Rerun of:", r.RerunOf+" (scheduled "+fmtTime(r.RerunScheduledAt)+")")
	}
	tb.row("Started:", fmtTime(r.StartedAt))
	tb.row("Finished:", fmtTime(r.FinishedAt))
	tb.row("Duration:", duration(r))
	tb.row("Node:", dash(r.Node))
	if r.HTTPStatus != 0 {
		tb.row("HTTP status:", strconv.Itoa(r.HTTPStatus))
	}
	tb.row("Error:", dash(r.Error))
	if err := tb.flush(); err != nil {
		return err
	}
	if len(r.ResponseHeaders) > 0 {
		fmt.Fprintln(w, "Response headers:")
		hb := newTable(w)
		for _, k := range slices.Sorted(maps.Keys(r.ResponseHeaders)) {
			hb.row("  "+k+":", r.ResponseHeaders[k])
		}
		if err := hb.flush(); err != nil {
			return err
		}
	}
	if len(r.Attempts) > 0 {
		fmt.Fprintln(w, "Attempts:")
		ab := newTable(w, "  #", "STATUS", "NODE", "STARTED", "DURATION", "HTTP", "ERROR")
		for _, a := range r.Attempts {
			code := "-"
			if a.HTTPStatus != 0 {
				code = strconv.Itoa(a.HTTPStatus)
			}
			ab.row("  "+strconv.Itoa(a.Attempt), string(a.Status), dash(a.Node), fmtTime(&a.StartedAt),
				strconv.FormatInt(a.DurationMS, 10)+"ms", code, dash(truncate(a.Error, 60)))
		}
		if err := ab.flush(); err != nil {
			return err
		}
	}
	if r.Output != "" {
		_, err := fmt.Fprintf(w, "Output:\n%s\n", r.Output)
		return err
	}
	return nil
}

func duration(r *api.Run) string {
	if r.FinishedAt == nil {
		return "-"
	}
	return strconv.FormatInt(r.DurationMS, 10) + "ms"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"time"

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
		app, timer, status, since, until, cursor string
		limit                                    int
		all, upcoming                            bool
	)
	cmd := &cobra.Command{
		Use:   "list [--app A] [--timer ID] [--status S] [--since 1h] [--until T] [--limit N] [--cursor C | --all] [--upcoming]",
		Short: "List the runs that came, of every timer or of some, newest first; or a timer's upcoming fires",
		Long: `List the runs that came (scheduled up to now), newest first, of every timer the token may see,
or only of an app (--app), a timer (--timer, its ID or APP/NAME) or a status (--status), scheduled
since a time (--since, a duration back from now such as 1h or 30m, or an RFC 3339 time) and before
another (--until). With --upcoming, list instead the planned fires of the timer (--timer required):
its pending runs after now, soonest first.

Each page is --limit runs; the next page is --cursor with the cursor printed after a page, or --all
fetches every page.`,
		Example: `  chime run list --app billing --status failed --since 1h
  chime run list --timer billing/invoice
  chime run list --timer billing/invoice --upcoming`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 1 || limit > api.MaxPageSize {
				return usageErrorf("--limit must be from 1 to %d, got %d", api.MaxPageSize, limit)
			}
			if all && cursor != "" {
				return usageErrorf("--all and --cursor do not go together: --all fetches every page")
			}
			path, q := "/api/v1/runs", url.Values{"limit": {strconv.Itoa(limit)}}
			if upcoming {
				if timer == "" || app != "" || since != "" || until != "" || status != "" && status != "pending" {
					return usageErrorf("--upcoming lists one timer's planned fires: it takes --timer, and neither --app, --since, --until nor --status")
				}
				path = "/api/v1/timers/" + url.PathEscape(timer) + "/runs"
				q.Set("view", "upcoming")
			} else {
				for k, v := range map[string]string{"app": app, "timer": timer, "status": status} {
					if v != "" {
						q.Set(k, v)
					}
				}
				now := time.Now()
				for _, t := range []struct{ flag, param, v string }{{"since", "from", since}, {"until", "to", until}} {
					if t.v == "" {
						continue
					}
					at, err := parseSince(t.v, now)
					if err != nil {
						return usageErrorf("--%s: %v", t.flag, err)
					}
					q.Set(t.param, at.UTC().Format(time.RFC3339Nano))
				}
			}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			var runs []*api.Run
			var raws []json.RawMessage
			next := ""
			for {
				var out api.RunList
				raw, err := c.do(cmd.Context(), "GET", path, q, nil, &out)
				if err != nil {
					return err
				}
				runs, next = append(runs, out.Runs...), out.NextCursor
				raws = append(raws, raw)
				if !all || next == "" {
					break
				}
				q.Set("cursor", next)
			}
			if c.output == "json" {
				if len(raws) == 1 {
					return printJSON(cmd.OutOrStdout(), raws[0])
				}
				raw, err := json.Marshal(api.RunList{Runs: runs})
				if err != nil {
					return err
				}
				return printJSON(cmd.OutOrStdout(), raw)
			}
			tb := newTable(cmd.OutOrStdout(), "ID", "TIMER", "SCHEDULED", "STATUS", "ATTEMPT", "DURATION", "NODE", "ERROR")
			for _, r := range runs {
				status := r.Status
				if r.Reason != "" {
					status += " (" + r.Reason + ")"
				}
				tb.row(r.ID, r.TimerID, fmtTime(&r.ScheduledAt), status, strconv.Itoa(r.Attempt), duration(r),
					dash(r.Node), dash(truncate(r.Error, 60)))
			}
			if err := tb.flush(); err != nil {
				return err
			}
			if len(runs) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "no runs")
			}
			if next != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "more runs: --cursor %s (or --all)\n", next)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&app, "app", "", "only runs of this app's timers")
	cmd.Flags().StringVar(&timer, "timer", "", "only runs of this timer: its ID or APP/NAME")
	cmd.Flags().StringVar(&status, "status", "", "only runs in this status: pending, running, succeeded, failed, skipped, cancelled")
	cmd.Flags().StringVar(&since, "since", "", "only runs scheduled since then: a duration back from now (1h, 30m) or an RFC 3339 time")
	cmd.Flags().StringVar(&until, "until", "", "only runs scheduled before then, as --since (default now)")
	cmd.Flags().BoolVar(&upcoming, "upcoming", false, "list the timer's planned fires (after now, soonest first) instead")
	cmd.Flags().IntVar(&limit, "limit", 20, "number of runs a page")
	cmd.Flags().StringVar(&cursor, "cursor", "", "next page cursor from the previous list")
	cmd.Flags().BoolVar(&all, "all", false, "fetch every page")
	return cmd
}

// parseSince reads an instant: a duration back from now (1h, 90m, 2h30m)
// or an RFC 3339 time.
func parseSince(v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("the duration %q must be positive", v)
		}
		return now.Add(-d), nil
	}
	at, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither a duration such as 1h nor an RFC 3339 time such as 2026-01-02T15:04:05Z", v)
	}
	return at, nil
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

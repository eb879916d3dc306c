package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/chimehq/chime/internal/app/api"
)

// newAppPauseCmd builds "chime app pause APP" and "chime app resume APP".
func newAppPauseCmd(o *clientOptions, verb, short string) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " APP",
		Short: short,
		Args:  exactArgs(1, "one app name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var out api.BatchResult
			raw, err := c.do(cmd.Context(), "POST", "/api/v1/apps/"+url.PathEscape(args[0])+"/"+verb, nil, nil, &out)
			if err != nil {
				return err
			}
			if c.output == "json" {
				return printJSON(cmd.OutOrStdout(), raw)
			}
			return printBatch(cmd.OutOrStdout(), &out)
		},
	}
}

// newTimerBatchCmd builds "chime timer batch": one action on many timers,
// named by --id or selected by a filter, following the answer's
// next_cursor until the filter's last page.
func newTimerBatchCmd(o *clientOptions) *cobra.Command {
	var (
		action, app, search, enabled string
		ids                          []string
	)
	cmd := &cobra.Command{
		Use:   "batch --action enable|disable|delete|pause|resume (--id ID ... | [--app APP] [--search S] [--enabled true|false])",
		Short: "Enable, disable, delete, pause or resume many timers at once",
		Long: `Apply one action to the timers named by --id (repeat it, or give a
comma-separated list) or to every timer a filter selects (--app, --search,
--enabled: the filters of "chime timer list"; no filter selects every timer
the token may see). Each change is audited. It prints the timers changed and
those not changed, with why (already paused, not found).

  chime timer batch --action pause --app billing
  chime timer batch --action disable --app billing --search nightly
  chime timer batch --action delete --id 01J...,01K...`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if action == "" {
				return usageErrorf("--action is required: enable, disable, delete, pause or resume")
			}
			filtered := app != "" || search != "" || enabled != ""
			if len(ids) > 0 && filtered {
				return usageErrorf("--id and the filters (--app, --search, --enabled) exclude each other")
			}
			req := api.BatchRequest{Action: action, IDs: ids}
			if len(ids) == 0 {
				req.Filter = &api.BatchFilter{App: app, Search: search}
				if enabled != "" {
					b, err := strconv.ParseBool(enabled)
					if err != nil {
						return usageErrorf("--enabled must be true or false, not %q", enabled)
					}
					req.Filter.Enabled = &b
				}
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			all := api.BatchResult{Action: action, Changed: []string{}, Unchanged: []api.BatchNoop{}, Failed: []api.BatchItem{}, Results: []api.BatchItem{}}
			for {
				var out api.BatchResult
				if _, err := c.do(cmd.Context(), "POST", "/api/v1/timers:batch", nil, req, &out); err != nil {
					return err
				}
				all.Changed = append(all.Changed, out.Changed...)
				all.Unchanged = append(all.Unchanged, out.Unchanged...)
				all.Failed = append(all.Failed, out.Failed...)
				all.Results = append(all.Results, out.Results...)
				if out.NextCursor == "" || req.Filter == nil {
					break
				}
				req.Filter.Cursor = out.NextCursor
			}
			if c.output == "json" {
				return printJSONValue(cmd.OutOrStdout(), all)
			}
			return printBatch(cmd.OutOrStdout(), &all)
		},
	}
	f := cmd.Flags()
	f.StringVar(&action, "action", "", "enable, disable, delete, pause or resume (required)")
	f.StringSliceVar(&ids, "id", nil, "a timer ID or APP/NAME (repeat, or comma-separate)")
	f.StringVar(&app, "app", "", "only timers of this app")
	f.StringVar(&search, "search", "", "only timers whose name contains this (ignoring case)")
	f.StringVar(&enabled, "enabled", "", "only enabled (true) or disabled (false) timers")
	return cmd
}

// printBatch prints what a bulk action changed.
func printBatch(w io.Writer, r *api.BatchResult) error {
	tb := newTable(w, "ID", "RESULT")
	for _, id := range r.Changed {
		tb.row(id, r.Action+"d")
	}
	for _, n := range r.Unchanged {
		tb.row(n.ID, "unchanged: "+n.Reason)
	}
	for _, f := range r.Failed {
		tb.row(f.ID, fmt.Sprintf("failed (%d): %s", f.Status, f.Reason))
	}
	if err := tb.flush(); err != nil {
		return err
	}
	if len(r.Failed) > 0 {
		_, err := fmt.Fprintf(w, "%d changed, %d unchanged, %d failed\n", len(r.Changed), len(r.Unchanged), len(r.Failed))
		return err
	}
	_, err := fmt.Fprintf(w, "%d changed, %d unchanged\n", len(r.Changed), len(r.Unchanged))
	return err
}

// printJSONValue prints v as indented JSON.
func printJSONValue(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return printJSON(w, b)
}

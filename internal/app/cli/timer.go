package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/internal/timers"
)

func init() {
	addCommand(newTimerCmd)
	addCommand(newRunCmd)
}

// newTimerCmd builds "chime timer", the timer commands over the REST API.
func newTimerCmd() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:     "timer",
		Aliases: []string{"timers"},
		Short:   "Create, list, change and fire timers on a chime server",
		Long: "Create, list, change and fire timers on a chime server.\n\n" +
			"A timer's ID may also be APP/NAME: chime timer get demo/ping.",
	}
	addClientFlags(cmd, &o)
	cmd.AddCommand(
		newTimerCreateCmd(&o),
		newTimerListCmd(&o),
		newTimerShowCmd(&o, "get", "Show a timer", "GET", ""),
		newTimerUpdateCmd(&o),
		newDeleteCmd(&o, "delete ID", "Delete a timer and its runs", "one timer ID", "/api/v1/timers/", "deleted timer"),
		newTimerShowCmd(&o, "enable", "Enable a timer: it fires on its schedule again", "POST", "/enable"),
		newTimerShowCmd(&o, "disable", "Disable a timer: its pending runs are cancelled", "POST", "/disable"),
		newTimerShowCmd(&o, "pause", "Pause a timer: it keeps its schedule, and its fires are recorded skipped (reason paused)", "POST", "/pause"),
		newTimerShowCmd(&o, "resume", "Resume a paused timer from its next fire (the paused fires are not caught up)", "POST", "/resume"),
		newTimerBatchCmd(&o),
		newTimerTriggerCmd(&o),
	)
	return cmd
}

// timerFlags are the flags that define or change a timer.
type timerFlags struct {
	file        string
	app         string
	name        string
	description string
	schedule    string
	tz          string
	url         string
	method      string
	headers     []string
	body        string
	timeout     string
	maxAttempts int
	backoff     string
	disabled    bool
	after       []string
}

func (f *timerFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVarP(&f.file, "file", "f", "", "read the timer as API JSON from `FILE` (- for stdin); other flags override it")
	fs.StringVar(&f.app, "app", "", "application (namespace) of the timer")
	fs.StringVar(&f.name, "name", "", "name of the timer, unique within its app")
	fs.StringVar(&f.description, "description", "", "free text")
	fs.StringVar(&f.schedule, "schedule", "", `schedule spec: cron ("*/5 * * * *"), "@every 10s", "@at 2026-01-02T15:04:05Z"...`)
	fs.StringVar(&f.tz, "tz", "", "IANA time zone of the schedule (server default UTC)")
	fs.StringVar(&f.url, "url", "", "URL the HTTP action calls")
	fs.StringVar(&f.method, "method", "", "HTTP method: GET, POST, PUT, PATCH, DELETE (server default POST)")
	fs.StringArrayVar(&f.headers, "header", nil, "HTTP header of the action, `'Name: value'` or Name=value, repeatable; 'Name:' or Name= removes it on update")
	fs.StringVar(&f.body, "body", "", "HTTP body of the action, sent as written")
	fs.StringVar(&f.timeout, "timeout", "", `action timeout, a Go duration (server default "30s")`)
	fs.IntVar(&f.maxAttempts, "max-attempts", 0, "attempts per fire, the first included (server default 1)")
	fs.StringVar(&f.backoff, "backoff", "", `delay before the first retry, doubled each time (server default "1s")`)
	fs.BoolVar(&f.disabled, "disabled", false, "create or set the timer disabled (--disabled=false enables it)")
	fs.StringArrayVar(&f.after, "after", nil, "run after the timer `TIMER=ON` (an id or app/name; ON: success, failure or finish), repeatable; replaces the timer's after (--after= clears it); with it --schedule may be left out")
}

// fieldFlags are the flags that change a field of a timer.
var fieldFlags = []string{"app", "name", "description", "schedule", "tz", "url", "method", "header",
	"body", "timeout", "max-attempts", "backoff", "disabled", "after"}

// changed reports whether any field flag was given.
func (f *timerFlags) changed(cmd *cobra.Command) bool {
	for _, name := range fieldFlags {
		if cmd.Flags().Changed(name) {
			return true
		}
	}
	return false
}

// apply sets the fields of t that the given flags name.
func (f *timerFlags) apply(cmd *cobra.Command, t *api.Timer) error {
	ch := cmd.Flags().Changed
	if ch("app") {
		t.App = f.app
	}
	if ch("name") {
		t.Name = f.name
	}
	if ch("description") {
		t.Description = f.description
	}
	if ch("schedule") {
		t.Schedule = f.schedule
	}
	if ch("tz") {
		t.Timezone = f.tz
	}
	if ch("timeout") {
		t.Timeout = f.timeout
	}
	if ch("max-attempts") || ch("backoff") {
		if t.Retry == nil {
			t.Retry = &api.Retry{MaxAttempts: timers.DefaultMaxAttempts}
		}
		if ch("max-attempts") {
			t.Retry.MaxAttempts = f.maxAttempts
		}
		if ch("backoff") {
			t.Retry.Backoff = f.backoff
		}
	}
	if ch("disabled") {
		enabled := !f.disabled
		t.Enabled = &enabled
	}
	if ch("after") {
		t.After = nil
		for _, kv := range f.after {
			if kv == "" {
				continue
			}
			up, on, ok := strings.Cut(kv, "=")
			if !ok || strings.TrimSpace(up) == "" {
				return usageErrorf("--after %q is not TIMER=ON (ON: success, failure or finish)", kv)
			}
			t.After = append(t.After, api.Dependency{Timer: strings.TrimSpace(up), On: strings.TrimSpace(on)})
		}
	}
	if !ch("url") && !ch("method") && !ch("header") && !ch("body") {
		return nil
	}
	if t.Action == nil || t.Action.Type != "http" || t.Action.HTTP == nil {
		if !ch("url") {
			return usageErrorf("--method, --header and --body apply to an HTTP action: give --url too")
		}
		t.Action = &api.Action{Type: "http", HTTP: &api.HTTPAction{}}
	}
	h := t.Action.HTTP
	if ch("url") {
		h.URL = f.url
	}
	if ch("method") {
		h.Method = strings.ToUpper(f.method)
	}
	if ch("body") {
		h.Body = f.body
	}
	for _, kv := range f.headers {
		k, v, ok := cutHeader(kv)
		if !ok {
			return usageErrorf("--header %q is not 'Name: value' or Name=value", kv)
		}
		if h.Header == nil {
			h.Header = map[string]string{}
		}
		if v == "" {
			delete(h.Header, k)
		} else {
			h.Header[k] = v
		}
	}
	return nil
}

// cutHeader splits a --header value, "Name: value" (as curl and the web UI
// write it) or "Name=value", at the first colon or equals sign: neither
// may appear in a header name.
func cutHeader(kv string) (name, value string, ok bool) {
	i := strings.IndexAny(kv, ":=")
	if i < 0 {
		return "", "", false
	}
	name, value = strings.TrimSpace(kv[:i]), strings.TrimSpace(kv[i+1:])
	return name, value, name != ""
}

// readFile reads the timer JSON of -f: the raw bytes, and the decoded
// timer.
func (f *timerFlags) readFile(cmd *cobra.Command) ([]byte, *api.Timer, error) {
	var (
		raw []byte
		err error
	)
	if f.file == "-" {
		raw, err = io.ReadAll(cmd.InOrStdin())
	} else {
		raw, err = os.ReadFile(f.file)
	}
	if err != nil {
		return nil, nil, usageErrorf("read timer file: %w", err)
	}
	var t api.Timer
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return nil, nil, usageErrorf("timer file %s: %w", f.file, err)
	}
	return raw, &t, nil
}

func newTimerCreateCmd(o *clientOptions) *cobra.Command {
	var f timerFlags
	cmd := &cobra.Command{
		Use:   "create (--app APP --name NAME --schedule SPEC --url URL [flags] | -f FILE)",
		Short: "Create a timer",
		Long: `Create a timer from flags (an HTTP callback) or from a file with the API's
JSON (-f FILE, - for stdin), which can define any action. Flags given with -f
override the file's fields.

  chime timer create --app demo --name ping --schedule '@every 5s' --url http://127.0.0.1:9000/hook
  chime timer create -f timer.json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var body any
			t := &api.Timer{}
			if f.file != "" {
				raw, ft, err := f.readFile(cmd)
				if err != nil {
					return err
				}
				// Without overriding flags the file goes to the server as
				// written, so that the server alone judges it.
				body, t = raw, ft
			} else {
				for _, name := range []string{"app", "name", "schedule", "url"} {
					if name == "schedule" && cmd.Flags().Changed("after") {
						continue // runs after its upstreams
					}
					if !cmd.Flags().Changed(name) {
						return usageErrorf("--%s is required (or give the timer as JSON with -f)", name)
					}
				}
			}
			if f.changed(cmd) {
				if err := f.apply(cmd, t); err != nil {
					return err
				}
				body = t
			}
			var out api.Timer
			raw, err := c.do(cmd.Context(), "POST", "/api/v1/timers", nil, body, &out)
			if err != nil {
				return err
			}
			return c.printTimer(cmd.OutOrStdout(), raw, &out)
		},
	}
	f.register(cmd)
	return cmd
}

func newTimerUpdateCmd(o *clientOptions) *cobra.Command {
	var f timerFlags
	cmd := &cobra.Command{
		Use:   "update ID [flags]",
		Short: "Change the given fields of a timer",
		Long: `Change only the fields named by flags: the timer is read, changed and written
back whole. With -f FILE the file replaces the timer, then flags apply.
The action's secrets, which the server shows as <redacted>, are kept when
nothing else of the action changes; a change to the action (its URL, method,
body, headers, command, args, env names) must give each secret again
(--header 'Authorization=Bearer ...'), else the server refuses it.

  chime timer update 01J... --schedule '*/10 * * * *' --header 'X-Token=abc'`,
		Args: exactArgs(1, "one timer ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if f.file == "" && !f.changed(cmd) {
				return usageErrorf("nothing to update: give the fields to change as flags, or -f FILE")
			}
			path := "/api/v1/timers/" + url.PathEscape(args[0])
			var t *api.Timer
			if f.file != "" {
				_, ft, err := f.readFile(cmd)
				if err != nil {
					return err
				}
				t = ft
			} else {
				t = &api.Timer{}
				if _, err := c.do(cmd.Context(), "GET", path, nil, nil, t); err != nil {
					return err
				}
			}
			if err := f.apply(cmd, t); err != nil {
				return err
			}
			var out api.Timer
			raw, err := c.do(cmd.Context(), "PUT", path, nil, t, &out)
			if err != nil {
				return err
			}
			return c.printTimer(cmd.OutOrStdout(), raw, &out)
		},
	}
	f.register(cmd)
	return cmd
}

func newTimerListCmd(o *clientOptions) *cobra.Command {
	var (
		app, enabled, cursor, search, sort string
		limit                              int
	)
	cmd := &cobra.Command{
		Use:   "list [--app APP] [--enabled true|false] [--search TEXT] [--sort id|next_fire] [--limit N] [--cursor C]",
		Short: "List timers",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if app != "" {
				q.Set("app", app)
			}
			if enabled != "" {
				if _, err := strconv.ParseBool(enabled); err != nil {
					return usageErrorf("--enabled must be true or false, not %q", enabled)
				}
				q.Set("enabled", enabled)
			}
			if search != "" {
				q.Set("search", search)
			}
			if sort != "" {
				q.Set("sort", sort)
			}
			if limit != 0 {
				q.Set("limit", strconv.Itoa(limit))
			}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			var out api.TimerList
			raw, err := c.do(cmd.Context(), "GET", "/api/v1/timers", q, nil, &out)
			if err != nil {
				return err
			}
			switch c.output {
			case "json":
				return printJSON(cmd.OutOrStdout(), raw)
			case "id":
				for _, t := range out.Timers {
					fmt.Fprintln(cmd.OutOrStdout(), t.ID)
				}
				return nil
			}
			tb := newTable(cmd.OutOrStdout(), "ID", "APP", "NAME", "SCHEDULE", "TZ", "ENABLED", "NEXT FIRE")
			for _, t := range out.Timers {
				next := "-"
				if len(t.NextFireTimes) > 0 {
					next = fmtTime(&t.NextFireTimes[0])
				}
				tb.row(t.ID, t.App, t.Name, t.Schedule, t.Timezone, strconv.FormatBool(t.Enabled != nil && *t.Enabled), next)
			}
			if err := tb.flush(); err != nil {
				return err
			}
			if out.NextCursor != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "more timers: --cursor %s\n", out.NextCursor)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&app, "app", "", "only timers of this app")
	cmd.Flags().StringVar(&enabled, "enabled", "", "only enabled (true) or disabled (false) timers")
	cmd.Flags().StringVar(&search, "search", "", "only timers whose name contains TEXT (ignoring case)")
	cmd.Flags().StringVar(&sort, "sort", "", "order: id (the default, oldest first) or next_fire (soonest first)")
	cmd.Flags().IntVar(&limit, "limit", 0, "page size (server default 100)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "next page cursor from the previous list")
	return cmd
}

// newTimerShowCmd builds a command that sends method to the timer's path
// plus suffix and shows the timer of the answer: "timer get", "timer
// enable" and "timer disable".
func newTimerShowCmd(o *clientOptions, verb, short, method, suffix string) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " ID",
		Short: short,
		Args:  exactArgs(1, "one timer ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var out api.Timer
			raw, err := c.do(cmd.Context(), method, "/api/v1/timers/"+url.PathEscape(args[0])+suffix, nil, nil, &out)
			if err != nil {
				return err
			}
			if verb == "get" && c.output == "table" && out.Schedule != "" {
				// The fires as the timer makes them, each with its jitter.
				var next api.NextFires
				if _, err := c.do(cmd.Context(), "GET", "/api/v1/timers/"+url.PathEscape(out.ID)+"/next", url.Values{"n": {"10"}}, nil, &next); err != nil {
					return err
				}
				return c.printTimerFires(cmd.OutOrStdout(), raw, &out, next.Fires)
			}
			return c.printTimer(cmd.OutOrStdout(), raw, &out)
		},
	}
}

func newTimerTriggerCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "trigger ID",
		Short: "Fire a timer now, outside its schedule, and show the new run",
		Args:  exactArgs(1, "one timer ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var out api.Run
			raw, err := c.do(cmd.Context(), "POST", "/api/v1/timers/"+url.PathEscape(args[0])+"/trigger", nil, nil, &out)
			if err != nil {
				return err
			}
			return c.printRun(cmd.OutOrStdout(), raw, &out)
		},
	}
}

// printTimer prints a timer as JSON or as a list of fields.
func (c *client) printTimer(w io.Writer, raw []byte, t *api.Timer) error {
	return c.printTimerFires(w, raw, t, nil)
}

// printTimerFires is printTimer with the timer's next fires from GET
// /api/v1/timers/{id}/next (nil: those of the timer's answer), each with
// when it is due when its jitter moves it.
func (c *client) printTimerFires(w io.Writer, raw []byte, t *api.Timer, fires []api.NextFire) error {
	switch c.output {
	case "json":
		return printJSON(w, raw)
	case "id":
		_, err := fmt.Fprintln(w, t.ID)
		return err
	}
	tb := newTable(w)
	tb.row("ID:", t.ID)
	tb.row("App:", t.App)
	tb.row("Name:", t.Name)
	if t.Description != "" {
		tb.row("Description:", t.Description)
	}
	tb.row("Schedule:", t.Schedule)
	for _, d := range t.After {
		tb.row("After:", d.Timer+" on "+d.On)
	}
	tb.row("Timezone:", t.Timezone)
	tb.row("Enabled:", strconv.FormatBool(t.Enabled != nil && *t.Enabled))
	tb.row("Paused:", strconv.FormatBool(t.Paused))
	tb.row("Action:", describeAction(t.Action))
	if t.Action != nil && t.Action.HTTP != nil {
		for k, v := range t.Action.HTTP.Header {
			tb.row("Header:", k+": "+v)
		}
		if t.Action.HTTP.Body != "" {
			tb.row("Body:", truncate(t.Action.HTTP.Body, 80))
		}
	}
	tb.row("Timeout:", t.Timeout)
	if t.Retry != nil {
		tb.row("Retry:", fmt.Sprintf("%d attempts, backoff %s", t.Retry.MaxAttempts, t.Retry.Backoff))
	}
	tb.row("Created:", fmtTime(t.CreatedAt))
	tb.row("Updated:", fmtTime(t.UpdatedAt))
	if fires == nil {
		for _, at := range t.NextFireTimes {
			fires = append(fires, api.NextFire{ScheduledAt: at, DueAt: at})
		}
	}
	if len(fires) == 0 {
		tb.row("Next fires:", "-")
	}
	for i, f := range fires {
		label := ""
		if i == 0 {
			label = "Next fires:"
		}
		at := fmtTime(&f.ScheduledAt)
		if !f.DueAt.Equal(f.ScheduledAt) {
			at += " (due " + fmtTime(&f.DueAt) + ", jitter)"
		}
		tb.row(label, at)
	}
	return tb.flush()
}

func describeAction(a *api.Action) string {
	switch {
	case a == nil:
		return "-"
	case a.HTTP != nil:
		return a.HTTP.Method + " " + a.HTTP.URL
	case a.Handler != nil:
		return "handler " + a.Handler.Name
	case a.Shell != nil:
		return "shell " + strings.Join(append([]string{a.Shell.Command}, a.Shell.Args...), " ")
	}
	return a.Type
}

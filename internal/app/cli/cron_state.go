package cli

// chime cron state and chime cron list: the running node, asked through
// its REST API at the address of the state file.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/chimehq/chime/internal/app/api"
)

func init() {
	addCronCommand(newCronStateCmd)
	addCronCommand(newCronListCmd)
}

// nodeClient returns a client of the running node's API, with o's token
// and CA (the server and output of o are ignored).
func nodeClient(dir string, o clientOptions) (*client, DaemonState, error) {
	st, ok := runningState(dir)
	if !ok {
		return nil, st, &ExitError{Code: 3, Err: fmt.Errorf("chime is not running in %s", dir)}
	}
	if st.Addr == "" {
		return nil, st, &ExitError{Code: 1, Err: fmt.Errorf("chime (pid %d) is starting: no API address yet", st.PID)}
	}
	// --token, CHIME_TOKEN, or else the node's own admin token when it was
	// given through the environment, lets the daemon commands in.
	if o.token == "" {
		o.token = os.Getenv(EnvToken)
	}
	if o.token == "" {
		o.token = os.Getenv(EnvName("admin-token"))
	}
	o.server, o.output = "http://"+st.Addr, "table"
	if st.TLS {
		o.server = "https://" + st.Addr
	}
	c, err := o.client()
	return c, st, err
}

// allTimers fetches every timer, page by page.
func allTimers(ctx context.Context, c *client) ([]*api.Timer, error) {
	var out []*api.Timer
	cursor := ""
	for {
		q := url.Values{"limit": {"1000"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page api.TimerList
		if _, err := c.do(ctx, "GET", "/api/v1/timers", q, nil, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Timers...)
		if page.NextCursor == "" || len(page.Timers) == 0 {
			return out, nil
		}
		cursor = page.NextCursor
	}
}

// nextFire is a timer's next fire, zero when none.
func nextFire(t *api.Timer) time.Time {
	if len(t.NextFireTimes) == 0 {
		return time.Time{}
	}
	return t.NextFireTimes[0]
}

// StateReport is the output of chime cron state -o json.
type StateReport struct {
	Running   bool       `json:"running"`
	PID       int        `json:"pid,omitempty"`
	Uptime    string     `json:"uptime,omitempty"`
	NodeID    string     `json:"node_id,omitempty"`
	Addr      string     `json:"addr,omitempty"`
	Timers    int        `json:"timers"`
	Enabled   int        `json:"enabled"`
	NextFires []NextFire `json:"next_fires"`
	StartedAt *time.Time `json:"started_at,omitempty"`
}

// NextFire is one upcoming fire.
type NextFire struct {
	At    time.Time `json:"at"`
	App   string    `json:"app"`
	Timer string    `json:"timer"`
}

// addNodeClientFlags adds --token and --ca-cert to a command that talks to
// the daemon of the data dir.
func addNodeClientFlags(cmd *cobra.Command, o *clientOptions) {
	cmd.Flags().StringVar(&o.token, "token", "", "API token (env "+EnvToken+", else the daemon's CHIME_ADMIN_TOKEN)")
	cmd.Flags().StringVar(&o.caCert, "ca-cert", "", "PEM file of the CA of the node's certificate (env "+EnvCACert+")")
}

func newCronStateCmd() *cobra.Command {
	var (
		dir    string
		output string
		n      int
		co     clientOptions
	)
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Show whether the node runs: pid, uptime, node id, timers and next fires",
		Long:  "Show whether the node of the data dir runs, and its pid, uptime, node id, timers and next fires. The exit code is 0 when it runs and 3 when it does not.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return usageErrorf("--output must be table or json, not %q", output)
			}
			w := cmd.OutOrStdout()
			c, st, err := nodeClient(dir, co)
			if err != nil {
				var ee *ExitError
				if errors.As(err, &ee) && ee.Code == 3 {
					if output == "json" {
						b, _ := json.MarshalIndent(StateReport{NextFires: []NextFire{}}, "", "  ")
						fmt.Fprintln(w, string(b))
					} else {
						fmt.Fprintf(w, "state:  stopped\n")
					}
					return &ExitError{Code: 3, Err: fmt.Errorf("chime is not running in %s", dir)}
				}
				return err
			}
			timers, err := allTimers(cmd.Context(), c)
			if err != nil {
				return err
			}
			started := st.StartedAt
			rep := StateReport{Running: true, PID: st.PID, NodeID: st.NodeID, Addr: st.Addr, Timers: len(timers),
				StartedAt: &started, Uptime: time.Since(st.StartedAt).Round(time.Second).String(), NextFires: []NextFire{}}
			for _, t := range timers {
				if t.Enabled != nil && *t.Enabled {
					rep.Enabled++
				}
				for _, f := range t.NextFireTimes {
					rep.NextFires = append(rep.NextFires, NextFire{At: f, App: t.App, Timer: t.Name})
				}
			}
			sort.Slice(rep.NextFires, func(i, j int) bool { return rep.NextFires[i].At.Before(rep.NextFires[j].At) })
			if len(rep.NextFires) > n {
				rep.NextFires = rep.NextFires[:n]
			}
			if output == "json" {
				b, _ := json.MarshalIndent(rep, "", "  ")
				fmt.Fprintln(w, string(b))
				return nil
			}
			fmt.Fprintf(w, "state:   running\npid:     %d\nuptime:  %s\nnode:    %s\nlisten:  %s\ntimers:  %d (%d enabled)\n",
				rep.PID, rep.Uptime, rep.NodeID, rep.Addr, rep.Timers, rep.Enabled)
			if len(rep.NextFires) == 0 {
				fmt.Fprintln(w, "next fires: none")
				return nil
			}
			fmt.Fprintln(w, "next fires:")
			tb := newTable(w)
			for _, f := range rep.NextFires {
				tb.row("  "+f.At.Format(time.RFC3339), f.App+"/"+f.Timer)
			}
			return tb.flush()
		},
	}
	dataDirFlag(cmd, &dir)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	cmd.Flags().IntVarP(&n, "next", "n", 5, "how many next fires to show")
	addNodeClientFlags(cmd, &co)
	return cmd
}

func newCronListCmd() *cobra.Command {
	var (
		dir    string
		output string
		co     clientOptions
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the timers of the running node with their next fire",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return usageErrorf("--output must be table or json, not %q", output)
			}
			c, _, err := nodeClient(dir, co)
			if err != nil {
				return err
			}
			timers, err := allTimers(cmd.Context(), c)
			if err != nil {
				return err
			}
			sort.SliceStable(timers, func(i, j int) bool {
				a, b := nextFire(timers[i]), nextFire(timers[j])
				if a.IsZero() != b.IsZero() {
					return b.IsZero()
				}
				return a.Before(b)
			})
			w := cmd.OutOrStdout()
			if output == "json" {
				b, _ := json.MarshalIndent(api.TimerList{Timers: timers}, "", "  ")
				fmt.Fprintln(w, string(b))
				return nil
			}
			tb := newTable(w, "APP", "NAME", "SCHEDULE", "ENABLED", "NEXT FIRE", "ACTION", "ID")
			for _, t := range timers {
				next := nextFire(t)
				action := "-"
				if t.Action != nil {
					action = t.Action.Type
					if t.Action.Handler != nil {
						action += ":" + t.Action.Handler.Name
					}
				}
				enabled := "yes"
				if t.Enabled != nil && !*t.Enabled {
					enabled = "no"
				}
				tb.row(t.App, t.Name, truncate(t.Schedule, 40), enabled, fmtTime(&next), action, t.ID)
			}
			return tb.flush()
		},
	}
	dataDirFlag(cmd, &dir)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	addNodeClientFlags(cmd, &co)
	return cmd
}

package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/chimehq/chime/internal/timers"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/schedule"
)

// maxCronNext bounds -n, so that a typo cannot ask for a billion lines.
const maxCronNext = 100000

func init() { addCronCommand(newCronNextCmd) }

// newCronNextCmd builds "chime cron next", which prints the next fire
// instants of a schedule spec without a server.
func newCronNextCmd() *cobra.Command {
	var (
		n    int
		from string
		tz   string
		dst  string
	)
	cmd := &cobra.Command{
		Use:   "next [-n N] [--from RFC3339] [--tz ZONE] [--dst CHOICE] SPEC",
		Short: "Print the next fire instants of a schedule spec",
		Long: `Print the next N fire instants of SPEC, one per line, in RFC 3339 with the
offset of the schedule's zone. SPEC may be given as one quoted argument or as
several arguments, which are joined with spaces:

  chime cron next -n 3 '0 0 9 * * MON-FRI'
  chime cron next --tz Europe/London 0 30 2 * * *
  chime cron next --from 2026-01-01T00:00:00Z @every 90m

--from (default now) is also the anchor of an @every spec. --dst is the
daylight-saving choice of a fixed-time spec (a timer's policy.dst): default,
shift, skip_gap, both or wall.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return &ExitError{Code: 2, Err: fmt.Errorf("cron next: missing SPEC")}
			}
			if n < 1 || n > maxCronNext {
				return &ExitError{Code: 2, Err: fmt.Errorf("cron next: -n must be between 1 and %d, got %d", maxCronNext, n)}
			}
			loc, err := timers.LoadLocation(tz)
			if err != nil {
				return &ExitError{Code: 2, Err: fmt.Errorf("cron next: --tz: %w", err)}
			}
			choice, err := schedule.ParseDST(dst)
			if err != nil {
				return &ExitError{Code: 2, Err: fmt.Errorf("cron next: --dst: must be one of %s, got %q", strings.Join(schedule.DSTNames(), ", "), dst)}
			}
			start := time.Now()
			if from != "" {
				t, err := time.Parse(time.RFC3339Nano, from)
				if err != nil {
					return &ExitError{Code: 2, Err: fmt.Errorf("cron next: --from %q is not an RFC 3339 time", from)}
				}
				start = t
			}
			times, err := timers.Preview(strings.Join(args, " "), loc, choice, start, n)
			if err != nil {
				return &ExitError{Code: 2, Err: fmt.Errorf("cron next: %w", err)}
			}
			out := cmd.OutOrStdout()
			for _, t := range times {
				layout := time.RFC3339
				if t.Nanosecond() != 0 {
					layout = time.RFC3339Nano
				}
				if _, err := fmt.Fprintln(out, t.Format(layout)); err != nil {
					return fmt.Errorf("cron next: %w", err)
				}
			}
			return nil
		},
	}
	cmd.Flags().IntVarP(&n, "count", "n", 5, "number of fire instants to print")
	cmd.Flags().StringVar(&from, "from", "", "start instant in RFC 3339, and anchor of an @every (default now)")
	cmd.Flags().StringVar(&tz, "tz", "", "time zone of a spec without a CRON_TZ= prefix (default UTC)")
	cmd.Flags().StringVar(&dst, "dst", model.DSTDefault, "daylight-saving choice of a fixed-time spec: "+strings.Join(schedule.DSTNames(), ", "))
	return cmd
}

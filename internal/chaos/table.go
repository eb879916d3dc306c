package chaos

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable writes the report as a human table.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }
	verdict := "PASS"
	if !r.OK() {
		verdict = "FAIL"
	}
	p("chime chaos\t%s: backend %s, %d nodes, %d timers, faults %s → %s, settle %s",
		verdict, r.Backend, r.Nodes, r.Timers, r.Start.Format("15:04:05"), r.FaultEnd.Format("15:04:05"),
		time.Duration(r.SettledMS*float64(time.Millisecond)).Round(time.Second))
	kinds := make([]string, 0, len(r.FaultCounts))
	total := 0
	for k, n := range r.FaultCounts {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		total += n
	}
	slices.Sort(kinds)
	p("faults injected\t%d (%s), %d failed", total, strings.Join(kinds, ", "), r.FaultErrors)
	p("fires expected\t%d", r.Expected)
	p("missed\t%d", r.Missed)
	p("callbacks received\t%d (%d without chime headers)", r.Callbacks, r.BadCalls)
	p("duplicate deliveries\t%d redelivered (same run id, attempt>1); %d true duplicates (same run id, same attempt)",
		r.Redeliveries, r.SameAttemptDuplicates)
	p("duplicate executions\t%d (one fire under two run ids)", r.DuplicateExecutions)
	p("first callback attempt>1\t%d", r.FirstAttemptOver1)
	p("store: runs with attempt>1\t%d", r.StoreAttemptsOver1)
	sts := make([]string, 0, len(r.StoreStatus))
	for k, n := range r.StoreStatus {
		sts = append(sts, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(sts)
	p("store: status of expected runs\t%s; delivered but not succeeded %d", strings.Join(sts, ", "), r.DeliveredNotSucceeded)
	p("unexpected fires / wrong run ids\t%d / %d", r.UnexpectedFires, r.WrongRunIDs)
	p("fire delay (scheduled → received)\tn\tp50\tp90\tp99\tmax")
	d := func(name string, x Delays) {
		p("  %s\t%d\t%s\t%s\t%s\t%s", name, x.N, fmtMS(x.P50MS), fmtMS(x.P90MS), fmtMS(x.P99MS), fmtMS(x.MaxMS))
	}
	d("outside faults", r.DelayOutside)
	d("during faults (≤ "+r.FaultWindow+" after)", r.DelayDuring)
	after := func(kind string, v float64) string {
		if r.FaultCounts[kind] == 0 {
			return "- (no such fault)"
		}
		return fmtMS(v)
	}
	p("max delay after a kill\t%s", after(FaultKill, r.MaxDelayAfterKillMS))
	p("max delay after a stop\t%s", after(FaultPause, r.MaxDelayAfterPauseMS))
	for _, f := range r.Faults {
		e := ""
		if f.Err != "" {
			e = "  error: " + f.Err
		}
		p("  fault %s	%s %s → %s: %d fires, max delay %s, %d reclaimed (attempt>1)%s", f.Kind, f.Node,
			f.Start.Format("15:04:05.0"), f.End.Format("15:04:05.0"), f.Fires, fmtMS(f.MaxDelayMS), f.Reclaimed, e)
	}
	for i, f := range r.Slowest {
		if i == 5 {
			break
		}
		p("  slow fire\ttimer %s %q at %s: %s, first attempt %d, store: node %s attempt %d, fault %s", f.TimerID, f.Schedule,
			f.ScheduledAt.Format("15:04:05.000"), fmtMS(f.DelayMS), f.Attempt, f.StoreNode, f.StoreAttempt, f.Fault)
	}
	for i, m := range r.MissedFires {
		if i == 10 {
			p("  … %d more missed", r.Missed-10)
			break
		}
		p("  missed\ttimer %s %q at %s: store %s attempt %d node %s %s", m.TimerID, m.Schedule,
			m.ScheduledAt.Format("15:04:05.000"), m.StoreStatus, m.Attempt, m.Node, m.Error)
	}
	for i, dup := range r.Duplicates {
		if i == 10 {
			break
		}
		var parts []string
		for _, c := range dup.Callbacks {
			parts = append(parts, fmt.Sprintf("run %.8s attempt %d at %s", c.RunID, c.Attempt, c.Received.Format("15:04:05.000")))
		}
		p("  duplicate\ttimer %s at %s: %s", dup.TimerID, dup.ScheduledAt.Format("15:04:05.000"), strings.Join(parts, "; "))
	}
	if r.WorkDir != "" && !r.OK() {
		p("node logs\t%s", r.WorkDir)
	}
	return tw.Flush()
}

func fmtMS(v float64) string {
	return time.Duration(v * float64(time.Millisecond)).Round(time.Millisecond).String()
}

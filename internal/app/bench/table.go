package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/chimehq/chime/model"
)

// WriteTable writes the report for people: parameters, machine, results.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p, m := r.Params, r.Machine
	row := func(k string, format string, args ...any) {
		fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, args...))
	}
	row("scenario", "%s", p.Scenario)
	if p.Synchronous != "" {
		row("backend", "%s (synchronous=%s)", p.Backend, p.Synchronous)
	} else {
		row("backend", "%s", p.Backend)
	}
	if p.Receiver != "" {
		row("receiver", "%s", p.Receiver)
	}
	if p.Rate > 0 {
		row("target rate", "%d fires/s over %s (warm-up %s excluded)", p.Rate, p.Duration, p.Warmup)
	}
	if p.Action != "" {
		row("action", "%s", p.Action)
	}
	row("timers", "%d (%s)", p.Timers, p.Mix)
	row("buckets / pool / look-ahead / claim-ahead", "%d / %d / %s / %s", p.Buckets, p.PoolSize, p.Lookahead, p.ClaimAhead)
	row("machine", "%s, %d cores (GOMAXPROCS %d), %s %s/%s, race=%v", m.CPU, m.Cores, m.GOMAXPROCS, m.GoVersion, m.OS, m.Arch, m.Race)
	fmt.Fprintln(tw, "\t")
	delay := func(name string, d Delays) {
		row(name, "p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms  (n=%d)", d.P50, d.P90, d.P99, d.Max, d.Count)
	}
	res := func(x Resources) {
		row("cpu", "%.1f s (%.2f cores)", x.CPUSeconds, x.CPUCores)
		row("memory", "peak RSS %.0f MiB (anonymous %.0f MiB at +%.0f s), peak Go %.0f MiB, peak live heap %.0f MiB (at +%.0f s), live heap at end %.0f MiB",
			x.PeakRSSMiB, x.PeakAnonMiB, x.PeakAnonAt, x.PeakGoMiB, x.PeakLiveMiB, x.PeakLiveAt, x.HeapMiB)
	}
	if s := r.Steady; s != nil {
		row("setup", "%.1f s (create timers, first plan)", s.SetupSeconds)
		row("achieved", "%.0f fires/s (%d of %d due in the window)", s.AchievedRate, s.Received, s.Expected)
		delay("fire delay", s.Delay)
		delay("action start delay", s.StartDelay)
		row("missed / duplicated / late >1s", "%d / %d / %d", s.Missed, s.Duplicated, s.Late1s)
		if len(s.Slowest) > 0 {
			parts := make([]string, len(s.Slowest))
			for i, f := range s.Slowest {
				parts[i] = fmt.Sprintf("%.2f ms at +%.3f s", f.DelayMS, f.At)
			}
			row("slowest fires", "%s", strings.Join(parts, ", "))
		}
		row("runs", "%d succeeded in the store, %d distinct fires received; %v", s.RunsSucceeded, s.UniqueFired, statusText(s.RunsByStatus))
		if !s.CleanStop {
			row("shutdown", "did not finish in %s: the node was still recording its backlog", shutdownWait)
		}
		res(s.Resources)
	}
	if b := r.Burst; b != nil {
		row("create / plan", "%.1f s / %.1f s (lead to the instant %.1f s)", b.CreateSeconds, b.PlanSeconds, b.LeadSeconds)
		row("drained", "%.2f s after the instant (%.0f fires/s)", b.DrainSeconds, b.DrainFiresPerS)
		delay("fire delay", b.Delay)
		delay("action start delay", b.StartDelay)
		row("missed / duplicated", "%d / %d", b.Missed, b.Duplicated)
		row("runs", "%d succeeded in the store", b.RunsSucceeded)
		res(b.Resources)
	}
	if s := r.Scale; s != nil {
		row("insert", "%.1f s (%.0f timers/s, one SaveTimer each, 8 writers)", s.InsertSeconds, s.InsertPerS)
		row("plan", "%.1f s for %d runs (one PlanDue pass)", s.PlanSeconds, s.RunsPlanned)
		row("heap after plan", "%.0f MiB", s.HeapAfterPlan)
		if s.CaughtUp {
			row("catch-up", "%.1f s (engine start → no run overdue by more than 1 s)", s.CatchUpSeconds)
		} else {
			row("catch-up", "not caught up after %.0f s; the API phase ran while the node fired overdue runs", s.CatchUpSeconds)
		}
		ops := make([]string, 0, len(s.API))
		for op := range s.API {
			ops = append(ops, op)
		}
		slices.Sort(ops)
		for _, op := range ops {
			l := s.API[op]
			row("api "+op, "p50 %.2f ms  p99 %.2f ms  max %.2f ms  (n=%d, errors %d)", l.P50, l.P99, l.Max, l.Count, l.Errors)
		}
		delay("fire delay (api phase)", s.FireDelay)
		res(s.Resources)
	}
	if a := r.API; a != nil {
		a.rows(row, delay)
	}
	if h := r.Herd; h != nil {
		writeHerd(row, delay, h)
		res(h.Resources)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.API != nil {
		return r.API.writeTables(w)
	}
	if r.Scale != nil {
		if err := writeOps(w, "planning pass", r.Scale.PlanStore); err != nil {
			return err
		}
		return writeOps(w, "api phase", r.Scale.Store)
	}
	return writeOps(w, "", r.storeOps())
}

// storeOps returns the store calls of a steady or burst run's measured
// phase; a scale run's two phases are written apart.
func (r *Report) storeOps() map[string]OpStats {
	switch {
	case r.Steady != nil:
		return r.Steady.Store
	case r.Burst != nil:
		return r.Burst.Store
	case r.Herd != nil:
		return r.Herd.Store
	}
	return nil
}

// writeOps writes the store call table of a phase (the measured phase when
// title is empty).
func writeOps(w io.Writer, title string, ops map[string]OpStats) error {
	if len(ops) == 0 {
		return nil
	}
	names := make([]string, 0, len(ops))
	for k := range ops {
		names = append(names, k)
	}
	slices.Sort(names)
	fmt.Fprintln(w)
	if title != "" {
		fmt.Fprintf(w, "store calls, %s:\n", title)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store call\tcalls\trows\tp50 ms\tp99 ms\tmax ms\ttotal s\tper fire\t")
	for _, k := range names {
		o := ops[k]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.3f\t\n", k, o.Calls, o.Rows, o.P50, o.P99, o.Max, o.TotalSeconds, o.PerFire)
	}
	return tw.Flush()
}

func statusText(m StatusMap) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, string(k))
	}
	slices.Sort(keys)
	out := ""
	for i, k := range keys {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%s=%d", k, m[model.RunStatus(k)])
	}
	return out
}

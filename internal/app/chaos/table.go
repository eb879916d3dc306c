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
	p("chime chaos\t%s: backend %s, %d nodes, %d timers (%d long), faults %s → %s, settle %s, seed %d",
		verdict, r.Backend, r.Nodes, r.Timers, r.LongTimers, r.Start.Format("15:04:05"), r.FaultEnd.Format("15:04:05"),
		time.Duration(r.SettledMS*float64(time.Millisecond)).Round(time.Second), r.Seed)
	if fs := r.Failures(); len(fs) > 0 {
		p("broken\t%s", strings.Join(fs, "; "))
	}
	nodeFlags := "--lease " + r.Lease + " --lock-ttl " + r.LockTTL
	if r.NodeDefaults {
		nodeFlags = "nodes' defaults (windows assume lease " + r.Lease + ", lock TTL " + r.LockTTL + ")"
	}
	if r.Coordination != "" {
		ha := ""
		if r.RedisHA != "" {
			ha += ", Redis " + r.RedisHA + " (chaos's own)"
		}
		if r.DBHA {
			ha += ", PostgreSQL primary + synchronous standby (chaos's own)"
		}
		p("coordination\t%s%s", r.Coordination, ha)
	}
	p("node lease / lock TTL\t%s", nodeFlags)
	total := 0
	for _, n := range r.FaultCounts {
		total += n
	}
	p("faults injected\t%d (%s), %d failed", total, counts(r.FaultCounts), r.FaultErrors)
	p("fires expected\t%d", r.Expected)
	p("missed\t%d", r.Missed)
	p("callbacks received\t%d (%d without chime headers); outcomes %s; sender from %s",
		r.Callbacks, r.BadCalls, counts(r.Outcomes), counts(r.Senders))
	p("duplicate deliveries\t%d redelivered (same run id, attempt>1); %d true duplicates (same run id, same attempt)",
		r.Redeliveries, r.SameAttemptDuplicates)
	if r.Redeliveries > 0 {
		p("  redeliveries by cause\t%s", counts(r.RedeliveryCauses))
	}
	p("duplicate executions\t%d (one fire under two run ids)", r.DuplicateExecutions)
	p("concurrent executions\t%d (two deliveries of one fire overlapping); %d overlaps with a frozen sender (allowed), longest after its SIGCONT %s",
		r.ConcurrentExecutions, r.FrozenSenderOverlaps, fmtMS(r.MaxAfterResumeMS))
	p("early fires\t%d (received > 1ms before the instant)", r.EarlyFires)
	p("completed, not recorded succeeded\t%d of %d fires with a completed delivery; %d answered only to a frozen sender (allowed)",
		r.CompletedNotSucceeded, r.CompletedChecked, r.CompletedToFrozen)
	p("first callback attempt>1\t%d", r.FirstAttemptOver1)
	p("store: runs with attempt>1\t%d", r.StoreAttemptsOver1)
	p("store: status of expected runs\t%s; delivered but not succeeded %d", counts(r.StoreStatus), r.DeliveredNotSucceeded)
	p("unexpected fires / wrong run ids\t%d / %d", r.UnexpectedFires, r.WrongRunIDs)
	p("fire delay (scheduled → received)\tn\tp50\tp90\tp99\tmax")
	d := func(name string, x Delays) {
		p("  %s\t%d\t%s\t%s\t%s\t%s", name, x.N, fmtMS(x.P50MS), fmtMS(x.P90MS), fmtMS(x.P99MS), fmtMS(x.MaxMS))
	}
	d("outside faults", r.DelayOutside)
	d("during faults (≤ "+r.FaultWindow+" after)", r.DelayDuring)
	for _, k := range []string{FaultKill, FaultPause, FaultStall, FaultDB, FaultDBFailover, FaultRedis, FaultRedisFailover, FaultSkew,
		FaultPartition + ":" + PartitionDB, FaultPartition + ":" + PartitionRedis, FaultPartition + ":" + PartitionBoth} {
		if x, ok := r.DelayByFault[k]; ok {
			d("  during "+k+" faults", x)
		}
	}
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
		extra := ""
		switch f.Kind {
		case FaultStall:
			extra = fmt.Sprintf(", froze the store %s", fmtMS(f.StallMS))
		case FaultPartition:
			extra = ", cut off from " + f.Target
		case FaultRedisFailover, FaultDBFailover:
			extra = fmt.Sprintf(", killed %s, replacement promoted after %s", f.Server, fmtMS(f.PromotedMS))
		case FaultSkew:
			extra = fmt.Sprintf(", clock %s: %d callbacks sent while skewed (want 0)", f.Offset, f.SkewedDeliveries)
			if f.SkewedUnknownSender > 0 {
				extra += fmt.Sprintf(" + %d of unknown sender", f.SkewedUnknownSender)
			}
			extra += fmt.Sprintf(", readyz %q, gauge %q", f.SkewReadyz, f.SkewGauge)
		}
		p("  fault %s\t%s %s → %s: %d fires, max delay %s, %d reclaimed (attempt>1)%s%s", f.Kind, f.Node,
			f.Start.Format("15:04:05.0"), f.End.Format("15:04:05.0"), f.Fires, fmtMS(f.MaxDelayMS), f.Reclaimed, extra, e)
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
	for i, o := range r.Overlaps {
		if i == 10 {
			break
		}
		kind := "CONCURRENT"
		if o.FrozenSender {
			kind = "frozen sender (" + o.Fault + ")"
		}
		p("  overlap\t%s: timer %s at %s: %s overlaps %s by %s", kind, o.TimerID, o.ScheduledAt.Format("15:04:05.000"),
			fmtCall(o.First), fmtCall(o.Second), fmtMS(o.OverlapMS))
	}
	for i, c := range r.Early {
		if i == 10 {
			break
		}
		p("  early\ttimer %s at %s: %s", c.TimerID, c.ScheduledAt.Format("15:04:05.000"), fmtCall(c))
	}
	for i, n := range r.NotRecorded {
		if i == 10 {
			break
		}
		p("  not recorded\ttimer %s at %s: %s; store %s attempt %d node %s %s", n.TimerID, n.ScheduledAt.Format("15:04:05.000"),
			fmtCall(n.Completed), n.StoreStatus, n.Attempt, n.Node, n.Error)
	}
	for i, n := range r.NotSucceeded {
		if i == 5 {
			break
		}
		p("  delivered, not succeeded\ttimer %s at %s: last %s; store %s attempt %d node %s %s", n.TimerID,
			n.ScheduledAt.Format("15:04:05.000"), fmtCall(n.Completed), n.StoreStatus, n.Attempt, n.Node, n.Error)
	}
	for i, u := range r.Unexplained {
		if i == 5 {
			break
		}
		p("  unexplained redelivery\ttimer %s at %s: %s, then %s", u.Earlier.TimerID, u.Earlier.ScheduledAt.Format("15:04:05.000"),
			fmtCall(u.Earlier), fmtCall(u.Later))
	}
	if r.WorkDir != "" && !r.OK() {
		p("node logs\t%s", r.WorkDir)
	}
	return tw.Flush()
}

// counts formats a map of counts as "k1 n1, k2 n2" in key order.
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(m))
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// fmtCall formats a delivery: attempt, node, start, length, outcome.
func fmtCall(c Callback) string {
	node := c.Node
	if node == "" {
		node = "?"
	}
	return fmt.Sprintf("attempt %d from %s at %s for %s %s", c.Attempt, node, c.Received.Format("15:04:05.000"),
		fmtMS(ms(c.End.Sub(c.Received))), c.Outcome)
}

func fmtMS(v float64) string {
	return time.Duration(v * float64(time.Millisecond)).Round(time.Millisecond).String()
}

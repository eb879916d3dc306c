package chaos

import (
	"slices"
	"time"

	"github.com/chimehq/chime/model"
)

// The checks on deliveries beside missed and duplicated fires: overlapping
// deliveries of one fire, the cause of each redelivery, the callbacks a
// skewed node sent, and the store's record of completed deliveries. Each
// is a pure function of the callbacks, the faults and the runs.

// faultLabel names a fault in listings: "kind node hh:mm:ss.mmm" (a
// partition's kind with its target: "partition:db").
func faultLabel(f *Fault) string {
	s := f.Kind
	if f.Target != "" {
		s += ":" + f.Target
	}
	if f.Node != "" {
		s += " " + f.Node
	}
	return s + " " + f.Start.UTC().Format("15:04:05.000")
}

// hits reports whether fault f overlaps [from, to].
func hits(f *Fault, from, to time.Time) bool {
	return !f.Start.After(to) && !f.End.Before(from)
}

// redeliveryCause returns the kind of fault that explains why later, a
// delivery of earlier's run id with another attempt, happened, looking at
// the faults between earlier's start (less faultLead) and later's start:
// a kill, stop, skew restart or partition of earlier's sender first (a
// node cut off is, to the others, a crashed one: its leases run out and
// its attempts are taken over), then a stall, a database restart, a Redis
// restart, a skew of any node (a skewed clock misjudges the other nodes'
// leases), when earlier's sender is unknown a kill or stop of any node,
// and last a stop of another node or a partition of another node from the
// database: a process frozen in a write transaction, or cut off in one,
// holds the store's locks until it resumes or the partition heals (its
// server connection stays open; on SQLite the one write lock of the file
// every node shares), a store stall for the others, whose fenced attempts
// are cancelled as in a stall (a killed process's locks are released at
// once). CauseUnexplained if none.
func redeliveryCause(earlier, later Callback, faults []Fault) string {
	from, to := earlier.Received.Add(-faultLead), later.Received
	find := func(kind, node string) bool {
		for i := range faults {
			f := &faults[i]
			if f.Kind == kind && (node == "" || f.Node == node) && hits(f, from, to) {
				return true
			}
		}
		return false
	}
	if s := earlier.Node; s != "" {
		for _, k := range []string{FaultKill, FaultPause, FaultSkew, FaultPartition} {
			if find(k, s) {
				return k
			}
		}
	}
	for _, k := range []string{FaultStall, FaultDB, FaultDBFailover, FaultRedis, FaultRedisFailover, FaultSkew} {
		if find(k, "") {
			return k
		}
	}
	if earlier.Node == "" && find(FaultKill, "") {
		return FaultKill
	}
	if find(FaultPause, "") {
		return FaultPause
	}
	for i := range faults {
		f := &faults[i]
		if f.Kind == FaultPartition && f.Target != PartitionRedis && hits(f, from, to) {
			return FaultPartition
		}
	}
	return CauseUnexplained
}

// checkOverlaps finds pairs of deliveries of one fire (same run id, or
// same timer and instant) where the later one started before the earlier
// one ended (answered, or aborted by its client: while the earlier one's
// client was still waiting). calls are sorted by start and ended (in-flight
// ones end at the snapshot). An overlap whose earlier delivery's node was
// SIGSTOPped (a stop fault) at some time during the overlap counts as a
// frozen-sender overlap; every other one is a concurrent execution.
func checkOverlaps(calls []Callback, faults []Fault, r *Report) {
	groups := map[any][]int{}
	var order []any
	for i, c := range calls {
		for _, key := range []any{fireKey{c.TimerID, c.ScheduledAt.UnixNano()}, c.RunID} {
			if _, ok := groups[key]; !ok {
				order = append(order, key)
			}
			groups[key] = append(groups[key], i)
		}
	}
	type pair struct{ a, b int }
	seen := map[pair]bool{}
	listedFrozen, listedConcurrent := 0, 0
	for _, key := range order {
		idx := groups[key]
		for x := range idx {
			for _, b := range idx[x+1:] {
				a := idx[x]
				first, second := calls[a], calls[b]
				if !second.Received.Before(first.End) || seen[pair{a, b}] {
					continue
				}
				seen[pair{a, b}] = true
				from, to := second.Received, first.End
				if second.End.Before(to) {
					to = second.End
				}
				o := Overlap{TimerID: first.TimerID, ScheduledAt: first.ScheduledAt.UTC(), First: first, Second: second,
					OverlapMS: ms(to.Sub(from))}
				if first.Node != "" {
					for i := range faults {
						f := &faults[i]
						if f.Kind == FaultPause && f.Node == first.Node && hits(f, from, to) {
							o.FrozenSender, o.Fault = true, faultLabel(f)
							if to.After(f.End) {
								o.AfterResumeMS = ms(to.Sub(f.End))
							}
							break
						}
					}
				}
				if o.FrozenSender {
					r.FrozenSenderOverlaps++
					r.MaxAfterResumeMS = max(r.MaxAfterResumeMS, o.AfterResumeMS)
					if listedFrozen < maxListed {
						listedFrozen++
						r.Overlaps = append(r.Overlaps, o)
					}
					continue
				}
				r.ConcurrentExecutions++
				if listedConcurrent < maxListed {
					listedConcurrent++
					r.Overlaps = append(r.Overlaps, o)
				}
			}
		}
	}
}

// checkSkews counts, for each skew fault, the callbacks that the skewed
// node sent while skewed (started between SkewedFrom and SkewedTo), and
// those of that time whose sender is unknown.
func checkSkews(calls []Callback, faults []Fault) {
	for i := range faults {
		f := &faults[i]
		if f.Kind != FaultSkew || f.SkewedFrom.IsZero() {
			continue
		}
		to := f.SkewedTo
		if to.IsZero() {
			to = f.End
		}
		f.SkewedDeliveries, f.SkewedUnknownSender = 0, 0
		for _, c := range calls {
			if c.Received.Before(f.SkewedFrom) || c.Received.After(to) {
				continue
			}
			switch c.Node {
			case f.Node:
				f.SkewedDeliveries++
			case "":
				f.SkewedUnknownSender++
			}
		}
	}
}

// checkCompleted checks that every fire with a completed delivery (one
// that ended at least recordGrace before the runs were read) has its run
// succeeded in the store. A delivery answered while its sender was
// SIGSTOPped (a stop fault of that node) is not one: the answer went into
// a frozen process's socket, which never read it, and its lease ran out
// before it could; such fires, when they have no other completed
// delivery, are counted apart (CompletedToFrozen) and do not fail.
func checkCompleted(byFire map[fireKey][]Callback, stored map[fireKey]runResp, runsFetched time.Time, faults []Fault, r *Report) {
	frozen := func(c *Callback) bool {
		for i := range faults {
			f := &faults[i]
			if f.Kind == FaultPause && c.Node != "" && f.Node == c.Node && hits(f, c.End, c.End) {
				return true
			}
		}
		return false
	}
	keys := make([]fireKey, 0, len(byFire))
	for k := range byFire {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b fireKey) int {
		if a.at != b.at {
			return cmpInt(a.at, b.at)
		}
		switch {
		case a.timer < b.timer:
			return -1
		case a.timer > b.timer:
			return 1
		}
		return 0
	})
	cutoff := runsFetched.Add(-recordGrace)
	for _, k := range keys {
		var done *Callback
		toFrozen := false
		for i, c := range byFire[k] {
			if c.Outcome == OutcomeCompleted && (runsFetched.IsZero() || !c.End.After(cutoff)) {
				if frozen(&byFire[k][i]) {
					toFrozen = true
					continue
				}
				done = &byFire[k][i]
				break
			}
		}
		if done == nil {
			if toFrozen {
				r.CompletedToFrozen++
			}
			continue
		}
		r.CompletedChecked++
		run, ok := stored[k]
		if ok && run.Status == string(model.RunSucceeded) {
			continue
		}
		r.CompletedNotSucceeded++
		if len(r.NotRecorded) < maxListed {
			nr := NotRecorded{TimerID: k.timer, ScheduledAt: time.Unix(0, k.at).UTC(), RunID: done.RunID,
				Completed: *done, StoreStatus: "none"}
			if ok {
				nr.StoreStatus, nr.Attempt, nr.Node, nr.Error = run.Status, run.Attempt, run.Node, run.Error
			}
			r.NotRecorded = append(r.NotRecorded, nr)
		}
	}
}

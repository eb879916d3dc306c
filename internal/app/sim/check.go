package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/chimehq/chime/internal/engine/executor"
	"github.com/chimehq/chime/internal/engine/sweeper"
	"github.com/chimehq/chime/internal/engine/trigger"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/schedule"
)

// The invariants, by name. A Violation names one; knownHoles (sim_test.go)
// lists those that the engine breaks today, which the default test run
// reports without failing.
const (
	// FireAccounted: every fire due (a schedule's instant, outside the
	// timer's pauses and within its max_fires) has a run that ended:
	// executed, failed, or skipped with its reason recorded.
	FireAccounted = "fire-accounted"
	// SucceededExecuted: a run recorded succeeded was executed.
	SucceededExecuted = "succeeded-executed"
	// NoOverlap: never two attempts of one run executing at once, unless
	// the earlier one's sender was frozen (paused) meanwhile, or the later
	// one's sender was frozen until it sent it.
	NoOverlap = "no-overlap"
	// Once: a run executes again only after its previous execution failed
	// (a retry) or after a recorded kill, stop or pause of the earlier
	// sender, or a store outage or stall of it (overlapping windows
	// together) at least outageBound long.
	Once = "once"
	// OnceShortOutage: as Once, for a redelivery whose only excuse is a
	// store fault of the sender shorter than outageBound: an outage or a
	// stall, slow commits, or replies lost.
	OnceShortOutage = "once-short-outage"
	// AttemptUnique: no attempt number of a run is executed twice.
	AttemptUnique = "attempt-unique"
	// RetriesMax: a run's failed executions are at most max_attempts.
	RetriesMax = "retries-max"
	// RetriesFull: a run recorded failed had max_attempts executions that
	// failed (a lease recovery is not a failure).
	RetriesFull = "retries-full"
	// AfterOnce: each after edge makes at most one downstream run per
	// upstream fire (a broadcast or sharded fire is one fire).
	AfterOnce = "after-once"
	// AfterMade: an upstream fire that ended as an edge's on asks made its
	// downstream run.
	AfterMade = "after-made"
	// MaxFires: a timer makes at most max_fires scheduled fires that run
	// (skipped and cancelled ones do not count), and is disabled only once
	// it made them.
	MaxFires = "max-fires"
	// MisfireGrace: no fire is skipped as misfired while less than the
	// misfire grace late.
	MisfireGrace = "misfire-grace"
	// MisfireLate: a fire of a misfire: skip timer does not start later
	// than the grace (and its takeover) after its instant.
	MisfireLate = "misfire-late"
)

// Invariants lists every invariant's name.
var Invariants = []string{FireAccounted, SucceededExecuted, NoOverlap, Once, OnceShortOutage, AttemptUnique,
	RetriesMax, RetriesFull, AfterOnce, AfterMade, MaxFires, MisfireGrace, MisfireLate}

// Violation is one breach of one invariant.
type Violation struct {
	Invariant string
	Hour      int
	Detail    string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s (hour %d): %s", v.Invariant, v.Hour, v.Detail)
}

// settle is how long after its instant a fire must have ended to be
// checked: time for outages, takeovers, retries and catch-up.
const settle = 5 * time.Minute

// check reads the store and the executions and returns the invariants
// broken so far.
func (w *world) check(ctx context.Context, now time.Time) ([]Violation, error) {
	var out []Violation
	add := func(inv, format string, args ...any) {
		out = append(out, Violation{Invariant: inv, Detail: fmt.Sprintf(format, args...)})
	}
	execs := w.execs.snapshot()
	slices.SortStableFunc(execs, func(a, b exec) int {
		if c := strings.Compare(a.runID, b.runID); c != 0 {
			return c
		}
		return a.start.Compare(b.start)
	})
	byRun := map[string][]exec{}
	for _, e := range execs {
		byRun[e.runID] = append(byRun[e.runID], e)
	}
	events := w.eventsSnapshot()
	runs := map[string]*model.Run{}
	timerOf := map[string]*timerSpec{}
	var all []*model.Run
	for _, sp := range w.timers {
		rs, err := allRuns(ctx, w.store, sp.t.ID)
		if err != nil {
			return nil, err
		}
		timerOf[sp.t.ID] = sp
		for _, r := range rs {
			runs[r.ID] = r
		}
		all = append(all, rs...)
	}
	slices.SortFunc(all, func(a, b *model.Run) int { return strings.Compare(a.ID, b.ID) })
	cut := now.Add(-settle)
	at := func(t time.Time) string { return t.Sub(w.t0).String() }

	// Executions, run by run.
	for _, r := range all {
		es := byRun[r.ID]
		sp := timerOf[r.TimerID]
		failed, failures := 0, 0
		seen := map[int]exec{}
		for i, e := range es {
			if e.outcome == "fail" {
				failures++
			}
			// A failure counts unless the sender may have lost it (a
			// kill, stop, pause or store fault before the next attempt).
			if e.outcome == "fail" && (i == len(es)-1 || !w.excused(events, e, es[i+1].start, "kill", "stop", "pause", "outage", "stall", "slow", "lost")) {
				failed++
			}
			if p, ok := seen[e.attempt]; ok {
				add(AttemptUnique, "run %s of %s attempt %d executed on %s/%d at %s and on %s/%d at %s", r.ID, sp.t.Name, e.attempt,
					p.node, p.gen, at(p.start), e.node, e.gen, at(e.start))
			}
			seen[e.attempt] = e
			if i == 0 {
				continue
			}
			for _, p := range es[:i] {
				if p.end.IsZero() || p.end.After(e.start) {
					if !w.excused(events, p, e.start, "pause") && !w.frozenAtStart(events, e) {
						add(NoOverlap, "run %s of %s: attempt %d on %s/%d (%s–%s) overlaps attempt %d on %s/%d from %s",
							r.ID, sp.t.Name, p.attempt, p.node, p.gen, at(p.start), at(p.end), e.attempt, e.node, e.gen, at(e.start))
					}
				}
			}
			p := es[i-1]
			if p.outcome == "fail" {
				continue
			}
			switch {
			case w.excused(events, p, e.start, "kill", "stop", "pause"), w.longOutage(events, p, e.start), w.frozenAtStart(events, e):
			case w.excused(events, claimed(p), e.start, "outage", "stall", "slow", "lost"):
				add(OnceShortOutage, "run %s of %s executed again (attempt %d on %s/%d at %s after attempt %d on %s/%d %s at %s–%s) after a store fault of its sender shorter than the lease (outage, stall, slow commits or lost replies)",
					r.ID, sp.t.Name, e.attempt, e.node, e.gen, at(e.start), p.attempt, p.node, p.gen, p.outcome, at(p.start), at(p.end))
			default:
				add(Once, "run %s of %s executed again (attempt %d on %s/%d at %s after attempt %d on %s/%d %s at %s–%s) with no kill, stop, pause or store fault of its sender",
					r.ID, sp.t.Name, e.attempt, e.node, e.gen, at(e.start), p.attempt, p.node, p.gen, p.outcome, at(p.start), at(p.end))
			}
		}
		max := sp.t.Retry.MaxAttempts
		if failed > max {
			add(RetriesMax, "run %s of %s: %d failed executions, max_attempts %d: %s", r.ID, sp.t.Name, failed, max, w.describe(es))
		}
		// A run out of lease recoveries (sweeper.LeaseRecoveries attempts
		// lost, not failed) ends failed whatever its failures.
		if r.Status == model.RunFailed && failures < max && !r.IsFire() && r.Reason == "" && r.Attempt-r.Failures <= sweeper.LeaseRecoveries {
			add(RetriesFull, "run %s of %s recorded failed (%q) after %d failed executions of max_attempts %d (attempt %d): %s", r.ID, sp.t.Name, r.Error, failures, max, r.Attempt, w.describe(es))
		}
		if r.Status == model.RunSucceeded && !r.IsFire() && !slices.ContainsFunc(es, func(e exec) bool { return e.outcome == "ok" }) {
			add(SucceededExecuted, "run %s of %s recorded succeeded, never executed to its end", r.ID, sp.t.Name)
		}
		if r.Status == model.RunSkipped && r.Reason == model.SkipMisfire && r.FinishedAt != nil {
			// Lateness counts from the fire's jittered instant: a run given
			// back or requeued has a later DueAt, not a later instant.
			due := sp.t.Policy.DueAt(sp.t.ID, r.ScheduledAt)
			if late := r.FinishedAt.Sub(due); late < model.MisfireGrace {
				add(MisfireGrace, "run %s of %s (due %s) skipped as misfired %s late", r.ID, sp.t.Name, at(due), late)
			}
		}
		if sp.t.Policy.Misfire == model.MisfireSkip && !sp.t.Policy.Splits() && len(es) > 0 && r.UpstreamRunID == "" && !r.Manual {
			due := sp.t.Policy.DueAt(sp.t.ID, r.ScheduledAt)
			if late := es[0].start.Sub(due); late > model.MisfireGrace+executor.DefaultLease {
				add(MisfireLate, "run %s of %s (misfire: skip, due %s) first executed %s late (attempt %d)", r.ID, sp.t.Name, at(due), late, es[0].attempt)
			}
		}
	}

	// Fires due, timer by timer.
	for _, sp := range w.timers {
		t := sp.t
		if t.Schedule == "" {
			continue
		}
		s, err := schedule.Parse(t.Schedule)
		if err != nil {
			return nil, err
		}
		if schedule.KindOf(s) == schedule.KindEvery {
			s = schedule.WithAnchor(s, t.Policy.StartAt)
		}
		var due []time.Time
		for _, f := range schedule.NextN(s, t.Policy.StartAt, 100000) {
			if t.Policy.MaxFires > 0 && len(due) >= t.Policy.MaxFires {
				break
			}
			if f.After(cut) {
				break
			}
			due = append(due, f)
		}
		// The fires made, as max_fires counts them (store.Store.CountFires):
		// the schedule's runs that ran or will run (succeeded, failed,
		// pending, running); skipped and cancelled fires, manual runs,
		// after runs and shards do not count.
		fires := 0
		kinds := map[string]int{}
		for _, r := range all {
			if r.TimerID == t.ID && !r.Manual && r.Shard == nil && r.UpstreamRunID == "" && !r.ScheduledAt.After(now) {
				kinds[string(r.Status)+" "+r.Reason]++
				switch r.Status {
				case model.RunSucceeded, model.RunFailed, model.RunPending, model.RunRunning:
					fires++
				}
			}
		}
		if t.Policy.MaxFires > 0 {
			if fires > t.Policy.MaxFires {
				add(MaxFires, "timer %s made %d fires, max_fires %d: %v", t.Name, fires, t.Policy.MaxFires, kinds)
			}
			cur, err := w.store.GetTimer(ctx, t.ID)
			if err != nil {
				return nil, err
			}
			if !cur.Enabled && fires < t.Policy.MaxFires {
				add(MaxFires, "timer %s disabled after %d fires, max_fires %d: %v", t.Name, fires, t.Policy.MaxFires, kinds)
			}
		}
	due:
		for _, f := range due {
			if f.Before(t.Policy.StartAt.Add(2 * time.Second)) {
				continue
			}
			for _, p := range sp.pauses {
				if !f.Before(p.from.Add(-5*time.Second)) && f.Before(p.to.Add(5*time.Second)) {
					continue due
				}
			}
			r := runs[model.RunID(t.ID, f)]
			switch {
			case r == nil:
				add(FireAccounted, "timer %s: no run of the fire at %s", t.Name, at(f))
			case !r.Status.Terminal():
				var shards []string
				for _, x := range all {
					if x.FireID == r.ID && x.ID != r.ID {
						shards = append(shards, fmt.Sprintf("%s on %s (target %q)", x.Status, x.Node, x.TargetNode))
					}
				}
				add(FireAccounted, "timer %s: the fire at %s is still %s (attempt %d, node %s); shards: %v", t.Name, at(f), r.Status, r.Attempt, r.Node, shards)
			case r.Status == model.RunSkipped && r.Reason == "":
				add(FireAccounted, "timer %s: the fire at %s skipped with no reason", t.Name, at(f))
			}
		}
	}

	// After edges.
	type edgeKey struct{ down, upFire string }
	made := map[edgeKey]int{}
	for _, r := range all {
		if r.UpstreamRunID == "" {
			continue
		}
		up := runs[r.UpstreamRunID]
		fire := r.UpstreamRunID
		if up != nil && up.FireID != "" {
			fire = up.FireID
		}
		made[edgeKey{r.TimerID, fire}]++
	}
	for _, sp := range w.timers {
		t := sp.t
		if len(t.After) == 0 {
			continue
		}
		for _, r := range all {
			up, ok := upstreamOf(t, r.TimerID)
			if !ok || (r.FireID != "" && !r.IsFire()) || !r.Status.Terminal() {
				continue
			}
			n := made[edgeKey{t.ID, r.ID}]
			if n > 1 {
				add(AfterOnce, "timer %s: %d runs after the fire %s of %s", t.Name, n, r.ID, timerOf[r.TimerID].t.Name)
			}
			if n == 0 && len(t.After) == 1 && model.Ends(up.On, r.Status) && r.FinishedAt != nil && r.FinishedAt.Before(cut) {
				add(AfterMade, "timer %s: no run after the fire %s of %s, which ended %s at %s", t.Name, r.ID, timerOf[r.TimerID].t.Name, r.Status, at(*r.FinishedAt))
			}
		}
	}
	return out, nil
}

func upstreamOf(t *model.Timer, id string) (model.Dependency, bool) {
	for _, d := range t.After {
		if d.Timer == id {
			return d, true
		}
	}
	return model.Dependency{}, false
}

// excused reports whether p's sender had an event of one of kinds between
// p's start and until.
func (w *world) excused(events []event, p exec, until time.Time, kinds ...string) bool {
	for _, ev := range events {
		if ev.node == p.node && slices.Contains(kinds, ev.kind) && ev.from.Before(until) && ev.to.After(p.start) {
			return true
		}
	}
	return false
}

// frozenAtStart reports whether e's sender was paused until e started: it
// began the attempt before the pause (its claim still held) and sent the
// action when it ran again, as a frozen process does, after another node
// may have taken the run over.
func (w *world) frozenAtStart(events []event, e exec) bool {
	for _, ev := range events {
		if ev.node == e.node && ev.kind == "pause" && ev.from.Before(e.start) && !ev.to.Before(e.start) {
			return true
		}
	}
	return false
}

// outageBound is the shortest store outage or stall of its sender after
// which a second delivery is excused: the engine rides out shorter ones
// (docs/guarantees.md, section 2: the lease less one extension interval
// and the margin).
const outageBound = executor.DefaultLease - executor.DefaultLease/10 - 250*time.Millisecond

// longOutage reports whether p's sender had a store outage or stall at
// least outageBound long between p's start and until; overlapping windows
// count as one.
func (w *world) longOutage(events []event, p exec, until time.Time) bool {
	var spans []event
	for _, ev := range events {
		if ev.node == p.node && (ev.kind == "outage" || ev.kind == "stall") {
			spans = append(spans, ev)
		}
	}
	slices.SortFunc(spans, func(a, b event) int { return a.from.Compare(b.from) })
	for i := 0; i < len(spans); {
		from, to := spans[i].from, spans[i].to
		for i++; i < len(spans) && !spans[i].from.After(to); i++ {
			if spans[i].to.After(to) {
				to = spans[i].to
			}
		}
		if to.Sub(from) >= outageBound && from.Before(until) && to.After(p.start) {
			return true
		}
	}
	return false
}

// describe lists executions for a violation's detail.
func (w *world) describe(es []exec) string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "attempt %d on %s/%d %s–%s %s", e.attempt, e.node, e.gen, e.start.Sub(w.t0), e.end.Sub(w.t0), e.outcome)
	}
	return b.String()
}

// claimed returns p as from the claim of its attempt: a store fault
// between the claim and the start counts as one of p's sender.
func claimed(p exec) exec {
	p.start = p.start.Add(-trigger.DefaultClaimAhead - time.Second)
	return p
}

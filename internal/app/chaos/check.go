package chaos

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/schedule"
)

// Fault kinds.
const (
	FaultKill  = "kill"  // SIGKILL a node, restart it after a pause
	FaultPause = "stop"  // SIGSTOP a node longer than its lease, then SIGCONT
	FaultRedis = "redis" // run the Redis restart command
	FaultDB    = "db"    // run the database restart command
	FaultStall = "stall" // freeze the store StallMin…StallMax, then let it go
	FaultSkew  = "skew"  // restart a node with its clock ±SkewOffset off, then normally
	// FaultPartition cuts a node off from the database, Redis or both
	// (its proxies stop forwarding) PartitionMin…PartitionMax, then heals.
	FaultPartition = "partition"
	// FaultRedisFailover SIGKILLs the primary of chaos's highly available
	// Redis (Config.RedisHA) and restarts it once a replica is promoted.
	FaultRedisFailover = "redis-failover"
	// FaultDBFailover SIGKILLs chaos's PostgreSQL primary (Config.DBHA)
	// and promotes its synchronous standby.
	FaultDBFailover = "db-failover"
)

// Targets of a partition: what the node is cut off from.
const (
	PartitionDB    = "db"
	PartitionRedis = "redis"
	PartitionBoth  = "both"
)

// CauseUnexplained is the cause of a redelivery that no fault explains.
const CauseUnexplained = "unexplained"

// Fault is one injected fault.
type Fault struct {
	Kind  string    `json:"kind"`
	Node  string    `json:"node,omitempty"`
	Start time.Time `json:"start"`
	// End is when the fault was over: the killed node ready again, the
	// paused node continued, the restart command done.
	End time.Time `json:"end"`
	Err string    `json:"error,omitempty"`
	// Fires is the number of expected fires attributed to the fault:
	// scheduled in [Start-1s, End+window] and after the next fault's
	// start-1s. MaxDelayMS is the largest delay among them (scheduled →
	// first callback received).
	Fires      int     `json:"fires"`
	MaxDelayMS float64 `json:"max_delay_ms"`
	// Reclaimed counts the fires attributed to the fault whose first
	// callback had attempt > 1: claimed by a node that then lost them.
	Reclaimed int `json:"reclaimed"`

	// StallMS is how long a stall froze the store.
	StallMS float64 `json:"stall_ms,omitempty"`

	// Target is what a partition cut the node off from (db, redis, both);
	// the cut lasted from Start to End.
	Target string `json:"target,omitempty"`

	// Server is the server a redis-failover or db-failover killed
	// (host:port), and PromotedMS how long after the kill its replacement
	// was promoted and answering: Redis's replica or PostgreSQL's standby.
	Server     string  `json:"server,omitempty"`
	PromotedMS float64 `json:"promoted_ms,omitempty"`

	// A skew: the node ran with its clock Offset off from SkewedFrom (its
	// process started) to SkewedTo (it exited). SkewReadyz is its /readyz
	// answer at the end of the skew (want 503 … clock skew), SkewGauge its
	// chime_clock_skew_seconds sample. SkewedDeliveries counts the
	// callbacks it sent meanwhile (want 0); SkewedUnknownSender those of
	// the same time whose sender is unknown.
	Offset              string    `json:"offset,omitempty"`
	SkewedFrom          time.Time `json:"skewed_from,omitzero"`
	SkewedTo            time.Time `json:"skewed_to,omitzero"`
	SkewReadyz          string    `json:"skew_readyz,omitempty"`
	SkewGauge           string    `json:"skew_gauge,omitempty"`
	SkewedDeliveries    int       `json:"skewed_deliveries"`
	SkewedUnknownSender int       `json:"skewed_unknown_sender,omitempty"`
}

// Delays summarises fire delays (scheduled instant → first callback).
type Delays struct {
	N     int     `json:"n"`
	P50MS float64 `json:"p50_ms"`
	P90MS float64 `json:"p90_ms"`
	P99MS float64 `json:"p99_ms"`
	MaxMS float64 `json:"max_ms"`
}

// MissedFire is one expected fire that no callback delivered.
type MissedFire struct {
	TimerID     string    `json:"timer_id"`
	Schedule    string    `json:"schedule"`
	ScheduledAt time.Time `json:"scheduled_at"`
	RunID       string    `json:"run_id"`
	// StoreStatus is the run's status in the store ("" if it has no run),
	// with its attempt, node and error.
	StoreStatus string `json:"store_status"`
	Attempt     int    `json:"attempt,omitempty"`
	Node        string `json:"node,omitempty"`
	Error       string `json:"error,omitempty"`
	InFault     bool   `json:"in_fault"`
}

// SlowFire is one late fire, for diagnosis: its first callback and its run
// in the store.
type SlowFire struct {
	TimerID      string    `json:"timer_id"`
	Schedule     string    `json:"schedule"`
	ScheduledAt  time.Time `json:"scheduled_at"`
	RunID        string    `json:"run_id"`
	DelayMS      float64   `json:"delay_ms"`
	Attempt      int       `json:"attempt"`         // of the first callback
	StoreNode    string    `json:"store_node"`      // node of the recorded attempt
	StoreAttempt int       `json:"store_attempt"`   // attempts in the store
	Fault        string    `json:"fault,omitempty"` // "kind node start" of the fault it is attributed to
}

// maxSlowest bounds Report.Slowest.
const maxSlowest = 20

// Overlap is two deliveries of one fire, the second started while the
// first one's client was still waiting for it.
type Overlap struct {
	TimerID     string    `json:"timer_id"`
	ScheduledAt time.Time `json:"scheduled_at"`
	First       Callback  `json:"first"`
	Second      Callback  `json:"second"`
	OverlapMS   float64   `json:"overlap_ms"`
	// FrozenSender: the first delivery's node was SIGSTOPped during the
	// overlap (Fault says which stop); AfterResumeMS is how long the
	// overlap lasted after it was continued.
	FrozenSender  bool    `json:"frozen_sender"`
	Fault         string  `json:"fault,omitempty"`
	AfterResumeMS float64 `json:"after_resume_ms,omitempty"`
}

// NotRecorded is a fire with a completed delivery whose run is not
// succeeded in the store.
type NotRecorded struct {
	TimerID     string    `json:"timer_id"`
	ScheduledAt time.Time `json:"scheduled_at"`
	RunID       string    `json:"run_id"`
	Completed   Callback  `json:"completed"` // the first completed delivery
	StoreStatus string    `json:"store_status"`
	Attempt     int       `json:"attempt,omitempty"`
	Node        string    `json:"node,omitempty"`
	Error       string    `json:"error,omitempty"`
}

// Redelivery is a run id delivered again with another attempt, and the
// kind of fault it is attributed to.
type Redelivery struct {
	Earlier Callback `json:"earlier"`
	Later   Callback `json:"later"`
	Cause   string   `json:"cause"`
}

// Duplicate is one fire delivered more than once.
type Duplicate struct {
	TimerID     string     `json:"timer_id"`
	ScheduledAt time.Time  `json:"scheduled_at"`
	Callbacks   []Callback `json:"callbacks"`
}

// Report is the result of a chaos run.
type Report struct {
	Backend string `json:"backend"`
	// Coordination is where the nodes kept their slice locks: redis, db,
	// or "" (SQLite's file locks); RedisHA and DBHA name chaos's own
	// highly available servers, if any.
	Coordination string    `json:"coordination,omitempty"`
	RedisHA      string    `json:"redis_ha,omitempty"`
	DBHA         bool      `json:"db_ha,omitempty"`
	Nodes        int       `json:"nodes"`
	Timers       int       `json:"timers"`
	LongTimers   int       `json:"long_timers"`  // of them, with long actions
	Start        time.Time `json:"start"`        // fault phase start
	FaultEnd     time.Time `json:"fault_end"`    // fault phase end: expected fires end here
	SettledMS    float64   `json:"settled_ms"`   // settle phase length
	FaultWindow  string    `json:"fault_window"` // a fire scheduled within it after a fault counts as "during faults"
	// Lease and LockTTL are the nodes' values as chaos assumes them;
	// NodeDefaults: chaos passed neither, the nodes use their defaults.
	Lease        string `json:"lease"`
	LockTTL      string `json:"lock_ttl"`
	NodeDefaults bool   `json:"node_defaults"`
	Seed         uint64 `json:"seed"`

	Faults      []Fault        `json:"faults"`
	FaultCounts map[string]int `json:"fault_counts"`
	FaultErrors int            `json:"fault_errors"`

	Expected  int `json:"expected"`  // (timer, instant) pairs due in the checked range
	Delivered int `json:"delivered"` // of them, received at least once
	Missed    int `json:"missed"`

	Callbacks int `json:"callbacks"` // all callbacks received (deliveries)
	BadCalls  int `json:"bad_callbacks"`
	// Outcomes counts the deliveries by outcome (completed, aborted,
	// in_flight).
	Outcomes map[string]int `json:"outcomes"`
	// Senders counts the deliveries by how their node is known (header,
	// conn, unknown).
	Senders map[string]int `json:"senders"`
	// Redeliveries are callbacks of a run id already received, with
	// another attempt: attempts in flight at a crash, allowed.
	Redeliveries int `json:"redeliveries"`
	// RedeliveryCauses counts the redeliveries by the fault that explains
	// them (kill, stop, stall, db, redis, skew, unexplained).
	RedeliveryCauses map[string]int `json:"redelivery_causes"`
	// SameAttemptDuplicates are callbacks of a (run id, attempt) already
	// received: true duplicate deliveries.
	SameAttemptDuplicates int `json:"same_attempt_duplicates"`
	// DuplicateExecutions are fires delivered under two run ids.
	DuplicateExecutions int `json:"duplicate_executions"`
	// ConcurrentExecutions are overlaps of two deliveries of one fire (the
	// second started before the first ended) that no frozen sender
	// explains. FrozenSenderOverlaps are those whose first delivery's node
	// was SIGSTOPped during the overlap: a stopped process cannot abort
	// its request, so no software prevents them; they are counted, allowed.
	ConcurrentExecutions int `json:"concurrent_executions"`
	FrozenSenderOverlaps int `json:"frozen_sender_overlaps"`
	// MaxAfterResumeMS is the longest a frozen-sender overlap went on
	// after its sender was continued.
	MaxAfterResumeMS float64 `json:"max_after_resume_ms"`
	// EarlyFires are callbacks received more than 1 ms before their
	// X-Chime-Scheduled-At.
	EarlyFires int `json:"early_fires"`
	// CompletedChecked are fires with a completed delivery ended at least
	// recordGrace before the runs were read; CompletedNotSucceeded, those
	// of them whose run is not succeeded in the store.
	CompletedChecked      int `json:"completed_checked"`
	CompletedNotSucceeded int `json:"completed_not_succeeded"`
	// CompletedToFrozen are fires whose only completed deliveries were
	// answered while their sender was SIGSTOPped (allowed: see
	// checkCompleted).
	CompletedToFrozen int `json:"completed_to_frozen"`
	// UnexpectedFires are callbacks for instants that are not in their
	// timer's schedule, or before its creation.
	UnexpectedFires int `json:"unexpected_fires"`
	// WrongRunIDs are callbacks whose run id is not model.RunID(timer,
	// instant). Not a failure: in a cluster of two versions (Config.AltBin)
	// the fires that nodes of an older id form planned count here, and
	// one fire under two ids is a DuplicateExecutions.
	WrongRunIDs int `json:"wrong_run_ids"`
	// FirstAttemptOver1 counts fires whose first callback already had
	// attempt > 1 (attempt 1 was claimed but never delivered).
	FirstAttemptOver1 int `json:"first_attempt_over_1"`

	// StoreStatus counts the store status of the expected fires' runs
	// ("none": no run).
	StoreStatus map[string]int `json:"store_status"`
	// StoreAttemptsOver1 counts expected fires whose run shows attempt > 1:
	// claimed more than once (all but one claim lost its lease).
	StoreAttemptsOver1 int `json:"store_attempts_over_1"`
	// DeliveredNotSucceeded counts expected fires received whose run is
	// not succeeded in the store (whatever the outcome of the deliveries).
	DeliveredNotSucceeded int `json:"delivered_not_succeeded"`

	DelayOutside Delays `json:"delay_outside_faults"`
	DelayDuring  Delays `json:"delay_during_faults"`
	// DelayByFault is the delay of the fires attributed to faults of each
	// kind (a partition's by target: partition:db, partition:redis,
	// partition:both): for kill, how long a killed node's slices and claims waited
	// (the takeover).
	DelayByFault map[string]Delays `json:"delay_by_fault"`
	// MaxDelayAfterKillMS is the largest delay of a fire scheduled within
	// the window of a kill: how long a killed node's slices waited.
	MaxDelayAfterKillMS  float64 `json:"max_delay_after_kill_ms"`
	MaxDelayAfterPauseMS float64 `json:"max_delay_after_stop_ms"`

	// Slowest are the maxSlowest fires with the largest delays.
	Slowest []SlowFire `json:"slowest,omitempty"`

	MissedFires []MissedFire  `json:"missed_fires,omitempty"` // the first maxListed
	Duplicates  []Duplicate   `json:"duplicates,omitempty"`   // the first maxListed true duplicates
	Overlaps    []Overlap     `json:"overlaps,omitempty"`     // the first maxListed of each kind
	Early       []Callback    `json:"early,omitempty"`        // the first maxListed
	NotRecorded []NotRecorded `json:"not_recorded,omitempty"` // the first maxListed
	// NotSucceeded are the first maxListed expected fires delivered but
	// not succeeded in the store (Completed is their last delivery).
	NotSucceeded []NotRecorded `json:"not_succeeded,omitempty"`
	Unexplained  []Redelivery  `json:"unexplained,omitempty"` // the first maxListed unexplained redeliveries

	WorkDir string `json:"work_dir,omitempty"`
}

// Failures lists the broken guarantees, empty when the run kept them all:
// no fire missed, no true duplicate (same attempt delivered twice, or one
// fire under two run ids), no concurrent execution, no early fire, every
// completed delivery recorded succeeded.
func (r *Report) Failures() []string {
	var f []string
	add := func(n int, what string) {
		if n > 0 {
			f = append(f, fmt.Sprintf("%s: %d", what, n))
		}
	}
	add(r.Missed, "missed fires")
	add(r.SameAttemptDuplicates, "true duplicates")
	add(r.DuplicateExecutions, "duplicate executions")
	add(r.ConcurrentExecutions, "concurrent executions")
	add(r.EarlyFires, "early fires")
	add(r.CompletedNotSucceeded, "completed deliveries not recorded succeeded")
	return f
}

// OK reports whether the run kept the guarantees (Failures is empty).
func (r *Report) OK() bool { return len(r.Failures()) == 0 }

// maxListed bounds the missed fires and duplicates listed in a report.
const maxListed = 50

// timerSpec is a timer as created: the checker computes its fires.
type timerSpec struct {
	ID        string
	Spec      string
	CreatedAt time.Time
	Long      bool // a long action
}

// checkInput is what the checker compares.
type checkInput struct {
	Timers []timerSpec
	Calls  []Callback
	Bad    int
	Runs   map[string][]runResp // by timer id
	// Expected fires are those scheduled in (created_at+Grace, FaultEnd].
	FaultEnd    time.Time
	Grace       time.Duration
	Faults      []Fault
	FaultWindow time.Duration
	// RunsFetched is when the runs were read: completed deliveries ended
	// within recordGrace before it are not checked against the store.
	// Snapshot is when the callbacks were read: the end of those still in
	// flight.
	RunsFetched time.Time
	Snapshot    time.Time
}

// recordGrace is how long a node may take to record a completed delivery.
const recordGrace = 3 * time.Second

// earlyTolerance: a callback received more than this before its instant
// is an early fire (receiver and nodes share one clock).
const earlyTolerance = time.Millisecond

type fireKey struct {
	timer string
	at    int64 // UnixNano
}

// faultLead is how long before a fault's start a fire still counts as
// hit by it: it may have been claimed, not yet delivered.
const faultLead = time.Second

// maxFiresPerTimer bounds the expected fires computed for one timer.
const maxFiresPerTimer = 1 << 20

// check fills r's counts from in. r.Faults is set from in.Faults with
// their fire counts and delays.
func check(in checkInput, r *Report) error {
	// Expected fires.
	expected := map[fireKey]*timerSpec{}
	order := []fireKey{}
	specs := map[string]*timerSpec{}
	scheds := map[string]schedule.Schedule{}
	for i := range in.Timers {
		t := &in.Timers[i]
		s, err := schedule.Parse(t.Spec)
		if err != nil {
			return fmt.Errorf("timer %s: schedule %q: %w", t.ID, t.Spec, err)
		}
		s = schedule.WithAnchor(s, t.CreatedAt)
		specs[t.ID], scheds[t.ID] = t, s
		from := t.CreatedAt.Add(in.Grace)
		f := s.Next(from)
		for n := 0; n < maxFiresPerTimer && !f.IsZero() && !f.After(in.FaultEnd); n++ {
			k := fireKey{t.ID, f.UnixNano()}
			expected[k] = t
			order = append(order, k)
			f = s.Next(f)
		}
	}
	slices.SortFunc(order, func(a, b fireKey) int {
		if a.at != b.at {
			return cmpInt(a.at, b.at)
		}
		if a.timer < b.timer {
			return -1
		}
		if a.timer > b.timer {
			return 1
		}
		return 0
	})
	r.Expected = len(order)

	// Faults by start.
	faults := slices.Clone(in.Faults)
	slices.SortFunc(faults, func(a, b Fault) int { return a.Start.Compare(b.Start) })

	// Callbacks by fire. One still in flight ends at the snapshot.
	calls := slices.Clone(in.Calls)
	snapshot := in.Snapshot
	for _, c := range calls {
		if c.End.After(snapshot) || c.Received.After(snapshot) {
			snapshot = maxTime(c.End, c.Received)
		}
	}
	for i := range calls {
		if calls[i].End.IsZero() {
			calls[i].End = snapshot
			if calls[i].Outcome == "" {
				calls[i].Outcome = OutcomeInFlight
			}
		}
	}
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].Received.Before(calls[j].Received) })
	r.Callbacks, r.BadCalls = len(calls), in.Bad
	r.Outcomes, r.Senders = map[string]int{}, map[string]int{}
	r.RedeliveryCauses = map[string]int{}
	byFire := map[fireKey][]Callback{}
	type runAttempt struct {
		run     string
		attempt int
	}
	seenAttempt := map[runAttempt]bool{}
	seenRun := map[string]bool{}
	lastOfRun := map[string]Callback{}
	var dupFires []fireKey
	dupListed := map[fireKey]bool{}
	for _, c := range calls {
		k := fireKey{c.TimerID, c.ScheduledAt.UnixNano()}
		byFire[k] = append(byFire[k], c)
		if c.RunID != model.RunID(c.TimerID, c.ScheduledAt) {
			r.WrongRunIDs++
		}
		if _, ok := expected[k]; !ok {
			// Beyond the fault phase or within the grace after creation is
			// fine; anything else is not a fire of the schedule.
			if s, ok := scheds[c.TimerID]; !ok || !isFire(s, c.ScheduledAt) || !c.ScheduledAt.After(specs[c.TimerID].CreatedAt) {
				r.UnexpectedFires++
			}
		}
		r.Outcomes[c.Outcome]++
		switch c.NodeFrom {
		case NodeFromHeader:
			r.Senders[c.NodeFrom]++
		default:
			r.Senders["unknown"]++
		}
		if c.Received.Before(c.ScheduledAt.Add(-earlyTolerance)) {
			r.EarlyFires++
			if len(r.Early) < maxListed {
				r.Early = append(r.Early, c)
			}
		}
		ra := runAttempt{c.RunID, c.Attempt}
		switch {
		case seenAttempt[ra]:
			r.SameAttemptDuplicates++
			if !dupListed[k] {
				dupListed[k] = true
				dupFires = append(dupFires, k)
			}
		case seenRun[c.RunID]:
			r.Redeliveries++
			earlier := lastOfRun[c.RunID]
			cause := redeliveryCause(earlier, c, faults)
			r.RedeliveryCauses[cause]++
			if cause == CauseUnexplained && len(r.Unexplained) < maxListed {
				r.Unexplained = append(r.Unexplained, Redelivery{Earlier: earlier, Later: c, Cause: cause})
			}
		}
		seenAttempt[ra], seenRun[c.RunID] = true, true
		lastOfRun[c.RunID] = c
	}
	checkOverlaps(calls, faults, r)
	checkSkews(calls, faults)
	for k, cs := range byFire {
		ids := map[string]bool{}
		for _, c := range cs {
			ids[c.RunID] = true
		}
		if len(ids) > 1 {
			r.DuplicateExecutions++
			if !dupListed[k] {
				dupListed[k] = true
				dupFires = append(dupFires, k)
			}
		}
	}
	for _, k := range dupFires {
		if len(r.Duplicates) >= maxListed {
			break
		}
		r.Duplicates = append(r.Duplicates, Duplicate{TimerID: k.timer, ScheduledAt: time.Unix(0, k.at).UTC(), Callbacks: byFire[k]})
	}

	// Store runs by fire.
	stored := map[fireKey]runResp{}
	for id, runs := range in.Runs {
		for _, run := range runs {
			stored[fireKey{id, run.ScheduledAt.UnixNano()}] = run
		}
	}

	checkCompleted(byFire, stored, in.RunsFetched, in.Faults, r)

	// Fault windows: a fire belongs to the latest fault that started at
	// most faultLead after it, if it is scheduled before that fault's end
	// plus the window. faultLead covers fires claimed just before a fault.
	faultOf := func(at time.Time) *Fault {
		var f *Fault
		for i := range faults {
			if faults[i].Start.Add(-faultLead).After(at) {
				break
			}
			f = &faults[i]
		}
		if f == nil || at.After(f.End.Add(in.FaultWindow)) {
			return nil
		}
		return f
	}
	r.StoreStatus = map[string]int{}
	var outside, during []time.Duration
	byKind := map[string][]time.Duration{}
	for _, k := range order {
		at := time.Unix(0, k.at)
		run, hasRun := stored[k]
		status := "none"
		if hasRun {
			status = run.Status
			if run.Attempt > 1 {
				r.StoreAttemptsOver1++
			}
		}
		r.StoreStatus[status]++
		fault := faultOf(at)
		inFault := fault != nil
		cs := byFire[k]
		if len(cs) == 0 {
			r.Missed++
			if len(r.MissedFires) < maxListed {
				m := MissedFire{TimerID: k.timer, Schedule: expected[k].Spec, ScheduledAt: at.UTC(),
					RunID: model.RunID(k.timer, at), StoreStatus: status, InFault: inFault}
				if hasRun {
					m.Attempt, m.Node, m.Error = run.Attempt, run.Node, run.Error
				}
				r.MissedFires = append(r.MissedFires, m)
			}
			continue
		}
		r.Delivered++
		if status != string(model.RunSucceeded) {
			r.DeliveredNotSucceeded++
			if len(r.NotSucceeded) < maxListed {
				nr := NotRecorded{TimerID: k.timer, ScheduledAt: at.UTC(), RunID: model.RunID(k.timer, at),
					Completed: cs[len(cs)-1], StoreStatus: status}
				if hasRun {
					nr.Attempt, nr.Node, nr.Error = run.Attempt, run.Node, run.Error
				}
				r.NotSucceeded = append(r.NotSucceeded, nr)
			}
		}
		if cs[0].Attempt > 1 {
			r.FirstAttemptOver1++
		}
		d := cs[0].Received.Sub(at)
		sf := SlowFire{TimerID: k.timer, Schedule: expected[k].Spec, ScheduledAt: at.UTC(), RunID: cs[0].RunID,
			DelayMS: ms(d), Attempt: cs[0].Attempt, StoreNode: run.Node, StoreAttempt: run.Attempt}
		if fault != nil {
			sf.Fault = fault.Kind + " " + fault.Node + " " + fault.Start.UTC().Format("15:04:05.000")
		}
		r.Slowest = addSlow(r.Slowest, sf)
		if inFault {
			during = append(during, d)
		} else {
			outside = append(outside, d)
		}
		if f := fault; f != nil {
			kind := f.Kind
			if f.Target != "" {
				kind += ":" + f.Target // partition:db, partition:redis, partition:both
			}
			byKind[kind] = append(byKind[kind], d)
			f.Fires++
			f.MaxDelayMS = max(f.MaxDelayMS, ms(d))
			if cs[0].Attempt > 1 {
				f.Reclaimed++
			}
			switch f.Kind {
			case FaultKill:
				r.MaxDelayAfterKillMS = max(r.MaxDelayAfterKillMS, ms(d))
			case FaultPause:
				r.MaxDelayAfterPauseMS = max(r.MaxDelayAfterPauseMS, ms(d))
			}
		}
	}
	r.DelayOutside, r.DelayDuring = summarise(outside), summarise(during)
	r.DelayByFault = map[string]Delays{}
	for k, ds := range byKind {
		r.DelayByFault[k] = summarise(ds)
	}
	r.Faults = faults
	r.FaultCounts = map[string]int{}
	r.FaultErrors = 0
	for _, f := range faults {
		r.FaultCounts[f.Kind]++
		if f.Err != "" {
			r.FaultErrors++
		}
	}
	return nil
}

// addSlow inserts f into slow, sorted by decreasing delay, keeping the
// maxSlowest slowest.
func addSlow(slow []SlowFire, f SlowFire) []SlowFire {
	if len(slow) == maxSlowest && f.DelayMS <= slow[len(slow)-1].DelayMS {
		return slow
	}
	i, _ := slices.BinarySearchFunc(slow, f.DelayMS, func(e SlowFire, v float64) int {
		switch {
		case e.DelayMS > v:
			return -1
		case e.DelayMS < v:
			return 1
		}
		return 0
	})
	slow = slices.Insert(slow, i, f)
	if len(slow) > maxSlowest {
		slow = slow[:maxSlowest]
	}
	return slow
}

// isFire reports whether at is an instant of s.
func isFire(s schedule.Schedule, at time.Time) bool {
	return s.Next(at.Add(-time.Nanosecond)).Equal(at)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func summarise(ds []time.Duration) Delays {
	if len(ds) == 0 {
		return Delays{}
	}
	slices.Sort(ds)
	p := func(q float64) float64 { return ms(ds[int(float64(len(ds)-1)*q)]) }
	return Delays{N: len(ds), P50MS: p(0.50), P90MS: p(0.90), P99MS: p(0.99), MaxMS: ms(ds[len(ds)-1])}
}

// parseAnchored compiles t's schedule as the planner does: UTC, an @every
// anchored at the timer's creation.
func parseAnchored(t timerSpec) (schedule.Schedule, error) {
	s, err := schedule.Parse(t.Spec)
	if err != nil {
		return nil, fmt.Errorf("timer %s: schedule %q: %w", t.ID, t.Spec, err)
	}
	return schedule.WithAnchor(s, t.CreatedAt), nil
}

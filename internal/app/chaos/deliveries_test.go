package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/model"
)

// t0 is the origin of the synthetic timelines below.
var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// delivery is a synthetic callback of fire "t" at t0: attempt, sender,
// start and end in seconds after t0, outcome.
func delivery(attempt int, node string, start, end float64, outcome string) Callback {
	return Callback{TimerID: "t", RunID: model.RunID("t", t0), ScheduledAt: t0, Attempt: attempt,
		Node: node, Received: at(start), End: at(end), Outcome: outcome}
}

func fault(kind, node string, start, end float64) Fault {
	return Fault{Kind: kind, Node: node, Start: at(start), End: at(end)}
}

func partition(node, target string, start, end float64) Fault {
	f := fault(FaultPartition, node, start, end)
	f.Target = target
	return f
}

func TestRedeliveryCause(t *testing.T) {
	earlier := delivery(1, "n1", 1, 15, OutcomeCompleted)
	later := delivery(2, "n2", 14, 14.1, OutcomeCompleted)
	unknown := earlier
	unknown.Node = ""
	tests := []struct {
		name    string
		earlier Callback
		faults  []Fault
		want    string
	}{
		{"no fault", earlier, nil, CauseUnexplained},
		{"kill of the sender", earlier, []Fault{fault(FaultKill, "n1", 2, 4)}, FaultKill},
		{"stop of the sender", earlier, []Fault{fault(FaultPause, "n1", 2, 13)}, FaultPause},
		{"skew restart of the sender", earlier, []Fault{fault(FaultSkew, "n1", 2, 25)}, FaultSkew},
		{"kill of another node", earlier, []Fault{fault(FaultKill, "n3", 2, 4)}, CauseUnexplained},
		{"stall", earlier, []Fault{fault(FaultStall, "", 3, 12)}, FaultStall},
		{"db restart", earlier, []Fault{fault(FaultDB, "", 3, 6)}, FaultDB},
		{"redis restart", earlier, []Fault{fault(FaultRedis, "", 3, 4)}, FaultRedis},
		{"skew of another node", earlier, []Fault{fault(FaultSkew, "n3", 3, 20)}, FaultSkew},
		{"sender's kill wins over a stall", earlier, []Fault{fault(FaultStall, "", 2, 9), fault(FaultKill, "n1", 10, 12)}, FaultKill},
		{"stall wins over a db restart", earlier, []Fault{fault(FaultDB, "", 2, 5), fault(FaultStall, "", 6, 12)}, FaultStall},
		{"fault over before the earlier attempt", earlier, []Fault{fault(FaultKill, "n1", -10, -1)}, CauseUnexplained},
		{"fault just before the earlier attempt (claimed ahead)", earlier, []Fault{fault(FaultKill, "n1", -1, 0.5)}, FaultKill},
		{"fault after the redelivery", earlier, []Fault{fault(FaultDB, "", 14.5, 16)}, CauseUnexplained},
		{"unknown sender, kill of any node", unknown, []Fault{fault(FaultKill, "n3", 2, 4)}, FaultKill},
		{"unknown sender, stop of any node", unknown, []Fault{fault(FaultPause, "n2", 2, 13)}, FaultPause},
		// A frozen node may hold the store's write lock (SQLite's, shared by
		// every node): a store stall for the sender.
		{"stop of another node", earlier, []Fault{fault(FaultPause, "n3", 2, 13)}, FaultPause},
		{"partition of the sender from the database", earlier, []Fault{partition("n1", PartitionDB, 2, 12)}, FaultPartition},
		{"partition of the sender from Redis", earlier, []Fault{partition("n1", PartitionRedis, 2, 12)}, FaultPartition},
		{"partition of the sender from both", earlier, []Fault{partition("n1", PartitionBoth, 2, 12)}, FaultPartition},
		{"partition of the sender over before the earlier attempt", earlier, []Fault{partition("n1", PartitionBoth, -10, -1)}, CauseUnexplained},
		// A node cut off from the database in a write transaction holds
		// its locks there until the partition heals, as a frozen one does.
		{"partition of another node from the database", earlier, []Fault{partition("n3", PartitionDB, 2, 12)}, FaultPartition},
		{"partition of another node from both", earlier, []Fault{partition("n3", PartitionBoth, 2, 12)}, FaultPartition},
		{"partition of another node from Redis only", earlier, []Fault{partition("n3", PartitionRedis, 2, 12)}, CauseUnexplained},
		{"sender's partition wins over a stall", earlier, []Fault{fault(FaultStall, "", 2, 9), partition("n1", PartitionDB, 10, 12)}, FaultPartition},
		{"stall wins over another node's stop", earlier, []Fault{fault(FaultPause, "n3", 2, 13), fault(FaultStall, "", 3, 5)}, FaultStall},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := redeliveryCause(tc.earlier, later, tc.faults); got != tc.want {
				t.Errorf("cause %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCheckOverlaps(t *testing.T) {
	tests := []struct {
		name       string
		calls      []Callback
		faults     []Fault
		concurrent int
		frozen     int
		afterMS    float64 // MaxAfterResumeMS
	}{
		{name: "one delivery", calls: []Callback{delivery(1, "n1", 0, 15, OutcomeCompleted)}},
		{name: "second after the first ended",
			calls: []Callback{delivery(1, "n1", 0, 15, OutcomeCompleted), delivery(2, "n2", 16, 30, OutcomeCompleted)}},
		{name: "first aborted before the second started (lease lost, action cancelled)",
			calls: []Callback{delivery(1, "n1", 0, 9, OutcomeAborted), delivery(2, "n2", 12, 25, OutcomeCompleted)}},
		{name: "second started while the first was held",
			calls:      []Callback{delivery(1, "n1", 0, 15, OutcomeCompleted), delivery(2, "n2", 12, 25, OutcomeCompleted)},
			concurrent: 1},
		{name: "second started before the first was aborted",
			calls:      []Callback{delivery(1, "n1", 0, 13, OutcomeAborted), delivery(2, "n2", 12, 25, OutcomeCompleted)},
			concurrent: 1},
		{name: "first still in flight",
			calls:      []Callback{delivery(1, "n1", 0, 40, OutcomeInFlight), delivery(2, "n2", 12, 12.01, OutcomeCompleted)},
			concurrent: 1},
		{name: "first's sender stopped during the overlap",
			calls:  []Callback{delivery(1, "n1", 0, 15, OutcomeCompleted), delivery(2, "n2", 12, 25, OutcomeCompleted)},
			faults: []Fault{fault(FaultPause, "n1", 1, 13)},
			frozen: 1, afterMS: 2000},
		{name: "first's sender stopped for the whole overlap",
			calls:  []Callback{delivery(1, "n1", 0, 15, OutcomeCompleted), delivery(2, "n2", 12, 25, OutcomeCompleted)},
			faults: []Fault{fault(FaultPause, "n1", 1, 16)},
			frozen: 1},
		{name: "first's sender stopped, but resumed before the overlap",
			calls:      []Callback{delivery(1, "n1", 0, 15, OutcomeCompleted), delivery(2, "n2", 12, 25, OutcomeCompleted)},
			faults:     []Fault{fault(FaultPause, "n1", 1, 11)},
			concurrent: 1},
		{name: "another node stopped",
			calls:      []Callback{delivery(1, "n1", 0, 15, OutcomeCompleted), delivery(2, "n2", 12, 25, OutcomeCompleted)},
			faults:     []Fault{fault(FaultPause, "n2", 1, 13)},
			concurrent: 1},
		{name: "first's sender killed, not stopped",
			calls:      []Callback{delivery(1, "n1", 0, 15, OutcomeCompleted), delivery(2, "n2", 12, 25, OutcomeCompleted)},
			faults:     []Fault{fault(FaultKill, "n1", 1, 13)},
			concurrent: 1},
		// A node cut off is running: it must stop its actions before its
		// lease ends, so an overlap is no frozen sender's.
		{name: "first's sender partitioned, not stopped",
			calls:      []Callback{delivery(1, "n1", 0, 15, OutcomeCompleted), delivery(2, "n2", 12, 25, OutcomeCompleted)},
			faults:     []Fault{partition("n1", PartitionBoth, 1, 13)},
			concurrent: 1},
		{name: "unknown sender is no frozen sender",
			calls:      []Callback{delivery(1, "", 0, 15, OutcomeCompleted), delivery(2, "n2", 12, 25, OutcomeCompleted)},
			faults:     []Fault{fault(FaultPause, "n1", 1, 13)},
			concurrent: 1},
		{name: "three deliveries, each overlapping the next",
			calls: []Callback{delivery(1, "n1", 0, 15, OutcomeCompleted), delivery(2, "n2", 12, 27, OutcomeCompleted),
				delivery(3, "n3", 26, 40, OutcomeCompleted)},
			concurrent: 2},
		{name: "same run id under another instant header",
			calls: func() []Callback {
				b := delivery(2, "n2", 12, 25, OutcomeCompleted)
				b.ScheduledAt = t0.Add(time.Second)
				return []Callback{delivery(1, "n1", 0, 15, OutcomeCompleted), b}
			}(),
			concurrent: 1},
		{name: "same instant under another run id",
			calls: func() []Callback {
				b := delivery(1, "n2", 12, 25, OutcomeCompleted)
				b.RunID = "other"
				return []Callback{delivery(1, "n1", 0, 15, OutcomeCompleted), b}
			}(),
			concurrent: 1},
		{name: "other fires do not overlap",
			calls: func() []Callback {
				b := delivery(1, "n2", 12, 25, OutcomeCompleted)
				b.TimerID, b.RunID = "u", model.RunID("u", t0)
				return []Callback{delivery(1, "n1", 0, 15, OutcomeCompleted), b}
			}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r Report
			checkOverlaps(tc.calls, tc.faults, &r)
			if r.ConcurrentExecutions != tc.concurrent || r.FrozenSenderOverlaps != tc.frozen {
				t.Errorf("concurrent %d frozen %d, want %d and %d (overlaps %+v)",
					r.ConcurrentExecutions, r.FrozenSenderOverlaps, tc.concurrent, tc.frozen, r.Overlaps)
			}
			if r.MaxAfterResumeMS != tc.afterMS {
				t.Errorf("max after resume %vms, want %vms", r.MaxAfterResumeMS, tc.afterMS)
			}
			if len(r.Overlaps) != tc.concurrent+tc.frozen {
				t.Errorf("%d overlaps listed, want %d", len(r.Overlaps), tc.concurrent+tc.frozen)
			}
		})
	}
}

func TestCheckSkews(t *testing.T) {
	skew := fault(FaultSkew, "n1", 0, 30)
	skew.SkewedFrom, skew.SkewedTo = at(2), at(20)
	tests := []struct {
		name           string
		calls          []Callback
		sent, unknowns int
	}{
		{"none", nil, 0, 0},
		{"skewed node before and after its skew", []Callback{delivery(1, "n1", 1, 1, OutcomeCompleted),
			delivery(1, "n1", 21, 21, OutcomeCompleted)}, 0, 0},
		{"skewed node while skewed", []Callback{delivery(1, "n1", 3, 3, OutcomeCompleted),
			delivery(1, "n1", 19, 19, OutcomeAborted)}, 2, 0},
		{"other nodes while skewed", []Callback{delivery(1, "n2", 3, 3, OutcomeCompleted)}, 0, 0},
		{"unknown sender while skewed", []Callback{delivery(1, "", 3, 3, OutcomeCompleted)}, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			faults := []Fault{skew, fault(FaultKill, "n1", 5, 7)}
			checkSkews(tc.calls, faults)
			if faults[0].SkewedDeliveries != tc.sent || faults[0].SkewedUnknownSender != tc.unknowns {
				t.Errorf("sent %d unknown %d, want %d and %d", faults[0].SkewedDeliveries, faults[0].SkewedUnknownSender, tc.sent, tc.unknowns)
			}
			if faults[1].SkewedDeliveries != 0 {
				t.Errorf("a kill counted %d skewed deliveries", faults[1].SkewedDeliveries)
			}
		})
	}
}

func TestCheckCompleted(t *testing.T) {
	fetched := at(60)
	k := fireKey{"t", t0.UnixNano()}
	run := func(status string) map[fireKey]runResp {
		return map[fireKey]runResp{k: {ID: model.RunID("t", t0), ScheduledAt: t0, Status: status, Attempt: 2, Node: "n2"}}
	}
	tests := []struct {
		name         string
		calls        []Callback
		stored       map[fireKey]runResp
		faults       []Fault
		checked, bad int
		toFrozen     int
	}{
		{"completed and succeeded", []Callback{delivery(1, "n1", 0, 0.01, OutcomeCompleted)}, run("succeeded"), nil, 1, 0, 0},
		{"completed, then redelivered, succeeded", []Callback{delivery(1, "n1", 0, 15, OutcomeCompleted),
			delivery(2, "n2", 20, 35, OutcomeCompleted)}, run("succeeded"), nil, 1, 0, 0},
		{"completed but failed", []Callback{delivery(1, "n1", 0, 15, OutcomeCompleted)}, run("failed"), nil, 1, 1, 0},
		{"completed but still pending", []Callback{delivery(1, "n1", 0, 15, OutcomeCompleted)}, run("pending"), nil, 1, 1, 0},
		{"completed, no run", []Callback{delivery(1, "n1", 0, 15, OutcomeCompleted)}, nil, nil, 1, 1, 0},
		{"only aborted", []Callback{delivery(1, "n1", 0, 9, OutcomeAborted)}, run("failed"), nil, 0, 0, 0},
		{"in flight", []Callback{delivery(1, "n1", 50, 60, OutcomeInFlight)}, run("running"), nil, 0, 0, 0},
		{"completed just before the runs were read", []Callback{delivery(1, "n1", 40, 58, OutcomeCompleted)}, run("running"), nil, 0, 0, 0},
		{"answered to a frozen sender", []Callback{delivery(1, "n1", 0, 15, OutcomeCompleted)}, run("failed"),
			[]Fault{fault(FaultPause, "n1", 10, 21)}, 0, 0, 1},
		{"answered to a frozen sender, then to a live one, failed", []Callback{delivery(1, "n1", 0, 15, OutcomeCompleted),
			delivery(2, "n2", 22, 35, OutcomeCompleted)}, run("failed"), []Fault{fault(FaultPause, "n1", 10, 21)}, 1, 1, 0},
		{"frozen after its delivery was answered", []Callback{delivery(1, "n1", 0, 15, OutcomeCompleted)}, run("failed"),
			[]Fault{fault(FaultPause, "n1", 16, 27)}, 1, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			byFire := map[fireKey][]Callback{k: tc.calls}
			var r Report
			checkCompleted(byFire, tc.stored, fetched, tc.faults, &r)
			if r.CompletedChecked != tc.checked || r.CompletedNotSucceeded != tc.bad || r.CompletedToFrozen != tc.toFrozen {
				t.Errorf("checked %d not succeeded %d to frozen %d, want %d, %d and %d", r.CompletedChecked, r.CompletedNotSucceeded,
					r.CompletedToFrozen, tc.checked, tc.bad, tc.toFrozen)
			}
			if len(r.NotRecorded) != tc.bad {
				t.Errorf("%d listed, want %d", len(r.NotRecorded), tc.bad)
			}
		})
	}
}

// TestCheckDeliveries runs the whole checker over one timer with long
// actions and faults: early fires, overlaps, redelivery causes, completed
// deliveries and the per-kind delays.
func TestCheckDeliveries(t *testing.T) {
	created := t0.Add(-30 * time.Second)
	timers := []timerSpec{{ID: "t", Spec: "*/30 * * * * *", CreatedAt: created, Long: true}}
	cb := func(sched time.Time, attempt int, node string, start, end time.Duration, outcome string) Callback {
		return Callback{TimerID: "t", RunID: model.RunID("t", sched), ScheduledAt: sched, Attempt: attempt, Node: node,
			NodeFrom: NodeFromHeader, Received: sched.Add(start), End: sched.Add(end), Outcome: outcome, Long: true}
	}
	f0, f1, f2, f3 := t0, t0.Add(30*time.Second), t0.Add(60*time.Second), t0.Add(90*time.Second)
	calls := []Callback{
		// f0: on time, completed.
		cb(f0, 1, "n1", 5*time.Millisecond, 15*time.Second, OutcomeCompleted),
		// f1: n1 killed mid-way (aborted), redelivered after the lease.
		cb(f1, 1, "n1", 10*time.Millisecond, 500*time.Millisecond, OutcomeAborted),
		cb(f1, 2, "n2", 12*time.Second, 28*time.Second, OutcomeCompleted),
		// f2: 5 ms early; during a stall redelivered while attempt 1 still held.
		cb(f2, 1, "n2", -5*time.Millisecond, 16*time.Second, OutcomeCompleted),
		cb(f2, 2, "n3", 13*time.Second, 29*time.Second, OutcomeCompleted),
		// f3: 0.5 ms early is within the tolerance.
		cb(f3, 1, "n3", -500*time.Microsecond, 14*time.Second, OutcomeCompleted),
	}
	runs := map[string][]runResp{"t": {
		{ID: model.RunID("t", f0), ScheduledAt: f0, Status: "succeeded", Attempt: 1},
		{ID: model.RunID("t", f1), ScheduledAt: f1, Status: "succeeded", Attempt: 2},
		{ID: model.RunID("t", f2), ScheduledAt: f2, Status: "failed", Attempt: 2},
		{ID: model.RunID("t", f3), ScheduledAt: f3, Status: "succeeded", Attempt: 1},
	}}
	faults := []Fault{
		{Kind: FaultKill, Node: "n1", Start: f1.Add(500 * time.Millisecond), End: f1.Add(3 * time.Second)},
		{Kind: FaultStall, Start: f2.Add(time.Second), End: f2.Add(10 * time.Second)},
	}
	end := f3
	var r Report
	err := check(checkInput{Timers: timers, Calls: calls, Runs: runs, FaultEnd: end, Grace: time.Second,
		Faults: faults, FaultWindow: 13 * time.Second, RunsFetched: f3.Add(time.Minute), Snapshot: f3.Add(time.Minute)}, &r)
	if err != nil {
		t.Fatal(err)
	}
	if r.Expected != 4 || r.Missed != 0 {
		t.Errorf("expected %d missed %d, want 4 and 0", r.Expected, r.Missed)
	}
	if r.EarlyFires != 1 || len(r.Early) != 1 || !r.Early[0].ScheduledAt.Equal(f2) {
		t.Errorf("early fires %d %+v, want the one of %v", r.EarlyFires, r.Early, f2)
	}
	if r.ConcurrentExecutions != 1 || r.FrozenSenderOverlaps != 0 {
		t.Errorf("concurrent %d frozen %d, want 1 and 0", r.ConcurrentExecutions, r.FrozenSenderOverlaps)
	}
	if r.Redeliveries != 2 || r.RedeliveryCauses[FaultKill] != 1 || r.RedeliveryCauses[FaultStall] != 1 {
		t.Errorf("redeliveries %d by cause %v, want kill 1 and stall 1", r.Redeliveries, r.RedeliveryCauses)
	}
	if r.CompletedChecked != 4 || r.CompletedNotSucceeded != 1 || r.NotRecorded[0].StoreStatus != "failed" {
		t.Errorf("completed checked %d not succeeded %d (%+v), want 4 and the failed one", r.CompletedChecked, r.CompletedNotSucceeded, r.NotRecorded)
	}
	if r.Outcomes[OutcomeCompleted] != 5 || r.Outcomes[OutcomeAborted] != 1 || r.Senders[NodeFromHeader] != 6 {
		t.Errorf("outcomes %v senders %v", r.Outcomes, r.Senders)
	}
	if k := r.DelayByFault[FaultKill]; k.N != 1 || k.MaxMS != 10 {
		t.Errorf("kill delays %+v, want the f1 fire at 10ms", k)
	}
	if s := r.DelayByFault[FaultStall]; s.N != 1 || s.MaxMS != -5 {
		// f2 arrived early: a negative delay. f3 is past the window.
		t.Errorf("stall delays %+v, want f2's -5ms", s)
	}
	fs := strings.Join(r.Failures(), "; ")
	for _, want := range []string{"concurrent executions: 1", "early fires: 1", "completed deliveries not recorded succeeded: 1"} {
		if !strings.Contains(fs, want) {
			t.Errorf("failures %q lack %q", fs, want)
		}
	}
	var sb strings.Builder
	if err := r.WriteTable(&sb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FAIL", "CONCURRENT", "early", "not recorded", "redeliveries by cause"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, sb.String())
		}
	}
}

func TestIsLong(t *testing.T) {
	tests := []struct {
		share  float64
		timers int
		want   int
	}{
		{0.05, 300, 15},
		{0.05, 120, 6},
		{0.05, 10, 0},
		{0.5, 10, 5},
		{1, 7, 7},
		{0, 100, 0},
		{-1, 100, 0},
	}
	for _, tc := range tests {
		n := 0
		for i := range tc.timers {
			if isLong(i, tc.share) {
				n++
			}
		}
		if n != tc.want {
			t.Errorf("share %v of %d timers: %d long, want %d", tc.share, tc.timers, n, tc.want)
		}
	}
}

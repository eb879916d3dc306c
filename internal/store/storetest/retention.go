package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// retentionTests are the tests of retention: a timer's history settings,
// and the deletes of old finished runs and audit entries.
var retentionTests = []test{
	{"History", testTimerHistory},
	{"PruneRuns", testPruneRuns},
	{"PruneRunsBatch", testPruneRunsBatch},
	{"FireCount", testFireCount},
	{"WaitingFire", testPruneWaitingFire},
	{"PruneAudit", testPruneAudit},
}

// testTimerHistory: a timer's history settings are stored, updated and
// listed by TimerHistories, in id order and by pages; none set reads back
// as none (the server's defaults), a zero limit as zero (no limit).
func testTimerHistory(t *testing.T, s store.Store) {
	keep, zero, age := 5, 0, time.Hour
	a := NewTimer("app", "h1")
	a.History = model.History{Keep: &keep, MaxAge: &age}
	must(t, createTimer(ctx(t), s, a))
	b := mustTimer(t, s, "app", "h2")
	c := NewTimer("app", "h3")
	c.History = model.History{Keep: &zero}
	must(t, createTimer(ctx(t), s, c))

	got, err := s.GetTimer(ctx(t), a.ID)
	must(t, err)
	if h := got.History; h.Keep == nil || *h.Keep != 5 || h.MaxAge == nil || *h.MaxAge != time.Hour {
		t.Errorf("history of %s = %+v, want keep 5, max age 1h", a.ID, h)
	}
	got.History = model.History{}
	must(t, s.UpdateTimer(ctx(t), got))
	got, err = s.GetTimer(ctx(t), a.ID)
	must(t, err)
	if !got.History.IsZero() {
		t.Errorf("history after update to none = %+v", got.History)
	}

	page, err := s.TimerHistories(ctx(t), "", 2)
	must(t, err)
	rest, err := s.TimerHistories(ctx(t), page[len(page)-1].ID, 2)
	must(t, err)
	all := append(page, rest...)
	if len(page) != 2 || len(all) != 3 || all[0].ID != a.ID || all[1].ID != b.ID || all[2].ID != c.ID {
		t.Fatalf("TimerHistories pages = %+v, %+v", page, rest)
	}
	if !all[0].History.IsZero() || !all[1].History.IsZero() || all[2].History.Keep == nil || *all[2].History.Keep != 0 {
		t.Errorf("histories = %+v", all)
	}
}

// finishedRuns makes a timer with 12 runs one a second from base: 0
// pending (overdue), 1 running, 2 to 9 finished (succeeded, failed,
// skipped, cancelled, then succeeded), 10 and 11 pending.
func finishedRuns(t *testing.T, s store.Store, name string) (*model.Timer, []*model.Run) {
	t.Helper()
	tm, runs := pendingRuns(t, s, name, 12)
	_, err := s.ClaimRuns(ctx(t), claimsFor(runs[1:10], "n1", base))
	must(t, err)
	var rs []model.Result
	for i, r := range runs[2:10] {
		st := model.RunSucceeded
		if i == 1 {
			st = model.RunFailed
		}
		rs = append(rs, model.Result{RunID: r.ID, Node: "n1", Attempt: 1, Status: st, StartedAt: base, FinishedAt: base})
	}
	_, _, err = s.FinishRuns(ctx(t), rs)
	must(t, err)
	// Runs 4 and 5 end skipped and cancelled: claim undone by hand.
	for i, st := range map[int]model.RunStatus{4: model.RunSkipped, 5: model.RunCancelled} {
		mustMade(t)(s.SetRunStatus(ctx(t), runs[i].ID, model.RunSucceeded, st, "test"))
	}
	return tm, runs
}

// left returns the indexes of runs that are still in the store.
func left(t *testing.T, s store.Store, runs []*model.Run) []int {
	t.Helper()
	var out []int
	for i, r := range runs {
		if _, err := s.GetRun(ctx(t), r.ID); err == nil {
			out = append(out, i)
		}
	}
	return out
}

// testPruneRuns: PruneRuns deletes a timer's finished runs beyond Keep and
// before Before, none at or after Recent, never a pending or running run
// (however old), and no run of another timer.
func testPruneRuns(t *testing.T, s store.Store) {
	tm, runs := finishedRuns(t, s, "pr")
	other, others := finishedRuns(t, s, "po")
	steps := []struct {
		name string
		p    store.RunPrune
		want int   // deleted
		left []int // runs left after the step
	}{
		{"no limit", store.RunPrune{}, 0, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
		{"keep more than there are", store.RunPrune{Keep: 8}, 0, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
		{"keep 3", store.RunPrune{Keep: 3}, 5, []int{0, 1, 7, 8, 9, 10, 11}},
		{"before", store.RunPrune{Before: base.Add(8 * time.Second)}, 1, []int{0, 1, 8, 9, 10, 11}},
		{"recent protects", store.RunPrune{Keep: 1, Recent: base.Add(8 * time.Second)}, 0, []int{0, 1, 8, 9, 10, 11}},
		{"keep 1", store.RunPrune{Keep: 1}, 1, []int{0, 1, 9, 10, 11}},
		{"everything before the end", store.RunPrune{Before: base.Add(time.Hour)}, 1, []int{0, 1, 10, 11}},
	}
	for _, st := range steps {
		st.p.TimerID = tm.ID
		n, err := s.PruneRuns(ctx(t), st.p)
		must(t, err)
		if got := left(t, s, runs); n != st.want || !slices.Equal(got, st.left) {
			t.Errorf("%s: deleted %d, want %d; runs left %v, want %v", st.name, n, st.want, got, st.left)
		}
	}
	if got := left(t, s, others); len(got) != len(others) {
		t.Errorf("runs of timer %s left %v, want all", other.ID, got)
	}
	for _, i := range []int{0, 1} {
		if r := getRun(t, s, runs[i].ID); r.Status.Terminal() {
			t.Errorf("run %d: status %s", i, r.Status)
		}
	}
}

// testPruneRunsBatch: PruneRuns deletes at most its limit, oldest first,
// and at most store.MaxPruneBatch.
func testPruneRunsBatch(t *testing.T, s store.Store) {
	tm, runs := finishedRuns(t, s, "pb")
	p := store.RunPrune{TimerID: tm.ID, Before: base.Add(time.Hour), Limit: 3}
	var (
		got []int
		n   int
		err error
	)
	for range 4 {
		n, err = s.PruneRuns(ctx(t), p)
		must(t, err)
		got = append(got, n)
	}
	if want := []int{3, 3, 2, 0}; !slices.Equal(got, want) {
		t.Errorf("batches deleted %v, want %v", got, want)
	}
	if l := left(t, s, runs); !slices.Equal(l, []int{0, 1, 10, 11}) {
		t.Errorf("runs left %v", l)
	}

	big := mustTimer(t, s, "app", "pbig")
	many := NewRuns(big.ID, base, time.Millisecond, store.MaxPruneBatch+5)
	mustInsert(t, s, many)
	// ReplaceFrom past every run: all cancelled, none deleted as to come.
	_, err = s.SaveTimer(ctx(t), store.TimerWrite{Timer: big, CancelPending: true, ReplaceFrom: base.AddDate(100, 0, 0)})
	must(t, err)
	n, err = s.PruneRuns(ctx(t), store.RunPrune{TimerID: big.ID, Before: base.Add(time.Hour), Limit: 5000})
	must(t, err)
	if n != store.MaxPruneBatch {
		t.Errorf("PruneRuns with a limit of 5000 deleted %d, want at most %d", n, store.MaxPruneBatch)
	}
}

// testPruneAudit: PruneAudit deletes the entries recorded before the
// instant, oldest first, at most its limit at a time.
func testPruneAudit(t *testing.T, s store.Store) {
	for i := range 5 {
		e := &model.AuditEntry{ID: fmt.Sprintf("01PRUNE%03d", i), At: base.Add(time.Duration(i) * time.Second),
			TokenID: "tok1", TokenName: "ci", App: "app", Target: "t", Action: "timer.update", Detail: "d"}
		must(t, s.AppendAudit(ctx(t), e))
	}
	if n, err := s.PruneAudit(ctx(t), time.Time{}, 0); err != nil || n != 0 {
		t.Errorf("PruneAudit(zero time) = %d, %v", n, err)
	}
	var got []int
	for range 3 {
		n, err := s.PruneAudit(ctx(t), base.Add(3*time.Second), 2)
		must(t, err)
		got = append(got, n)
	}
	if want := []int{2, 1, 0}; !slices.Equal(got, want) {
		t.Errorf("batches deleted %v, want %v", got, want)
	}
	all, _, err := s.ListAudit(ctx(t), store.AuditFilter{})
	must(t, err)
	if len(all) != 2 || all[0].ID != "01PRUNE004" || all[1].ID != "01PRUNE003" {
		t.Errorf("audit left %+v", all)
	}
}

// testFireCount: CountFires counts a timer's scheduled fires, a split
// fire once (not its shards), no manual run, and the ended ones that
// retention deleted still.
func testFireCount(t *testing.T, s store.Store) {
	fire, _ := splitFire(t, s, "fc", 3, "a")
	for i := range 3 {
		finishShard(t, s, fire, i, "a", model.RunSucceeded)
	}
	if _, _, err := s.FinishFires(ctx(t), base.Add(time.Second), 0); err != nil {
		t.Fatal(err)
	}
	more := NewRuns(fire.TimerID, base.Add(time.Hour), time.Minute, 3)
	more[2].Manual = true
	mustInsert(t, s, more)
	for _, r := range []*model.Run{more[0], more[2]} {
		_, err := s.ClaimRuns(ctx(t), claimsFor([]*model.Run{r}, "n1", base))
		must(t, err)
		must(t, Finish(ctx(t), s, model.Result{RunID: r.ID, Node: "n1", Attempt: 1, Status: model.RunFailed,
			StartedAt: base, FinishedAt: base}))
	}
	check := func(when string) {
		t.Helper()
		c, err := s.CountFires(ctx(t), fire.TimerID)
		must(t, err)
		if c != (store.FireCount{Ended: 2, Open: 1}) {
			t.Errorf("%s: CountFires = %+v, want 2 ended (the split fire, one run) and 1 open", when, c)
		}
	}
	check("before retention")
	n, err := s.PruneRuns(ctx(t), store.RunPrune{TimerID: fire.TimerID, Before: base.Add(24 * time.Hour)})
	must(t, err)
	if n != 6 {
		t.Errorf("PruneRuns deleted %d, want the 6 finished runs (a fire, 3 shards, one run, one manual)", n)
	}
	check("after retention")
}

// testPruneWaitingFire: retention keeps the ended shards of a fire that
// still waits for others: a failed shard then fails its fire.
func testPruneWaitingFire(t *testing.T, s store.Store) {
	fire, _ := splitFire(t, s, "pwf", 2, "a")
	finishShard(t, s, fire, 0, "a", model.RunFailed)
	if _, err := s.PruneRuns(ctx(t), store.RunPrune{TimerID: fire.TimerID, Before: base.Add(24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetRun(ctx(t), model.ShardRunID(fire.TimerID, fire.ScheduledAt, 0)); err != nil {
		t.Errorf("failed shard of a waiting fire after retention: %v, want it kept", err)
	}
	finishShard(t, s, fire, 1, "a", model.RunSucceeded)
	if _, _, err := s.FinishFires(ctx(t), base.Add(time.Second), 0); err != nil {
		t.Fatal(err)
	}
	if f := getRun(t, s, fire.ID); f.Status != model.RunFailed {
		t.Errorf("fire with a failed shard, after retention = %s, want failed", f.Status)
	}
	// Once the fire ended, its shards go with it.
	n, err := s.PruneRuns(ctx(t), store.RunPrune{TimerID: fire.TimerID, Before: base.Add(24 * time.Hour)})
	must(t, err)
	if n != 3 {
		t.Errorf("PruneRuns after the fire ended = %d, want 3 (the fire and its shards)", n)
	}
}

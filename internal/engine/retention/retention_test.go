package retention

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/startstop/startstoptest"
	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/coord/lock/memlock"
	"github.com/chimehq/chime/internal/metrics"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/sqlstore"
	"github.com/chimehq/chime/model"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// fixture is a store with four timers and audit entries, at the fake
// clock's now:
//
//	a: the defaults (keep 5, max age 1h); 10 cancelled runs one a minute
//	   from now-10m, and one pending run at now-3h;
//	b: keep 0 (no count limit), the default max age; 10 runs every 10
//	   minutes from now-2h;
//	c: keep 2, max age 0 (no age limit); 4 runs at now-100h and after;
//	d: keep 0 and max age 0: nothing is deleted; 5 runs at now-1000h;
//
// and three audit entries, at now-2h, now-90m and now-10m.
type fixture struct {
	st         *sqlstore.Store
	clk        *clock.Fake
	now        time.Time
	a, b, c, d string
	pendingA   string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, "sqlite::memory:", sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{st: st, clk: clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))}
	f.now = f.clk.Now()
	n := func(v int) *int { return &v }
	d := func(v time.Duration) *time.Duration { return &v }
	timer := func(name string, h model.History, first time.Time, every time.Duration, count int) string {
		tm := &model.Timer{ID: "t-" + name, App: "a", Name: name, Schedule: "@every 1m", Timezone: "UTC", Enabled: true,
			Action: model.Action{Type: model.ActionHTTP, HTTP: &model.HTTPAction{Method: "POST", URL: "http://x"}},
			Retry:  model.RetryPolicy{MaxAttempts: 1}, History: h, CreatedAt: f.now, UpdatedAt: f.now}
		if _, err := st.SaveTimer(ctx, store.TimerWrite{Timer: tm, Create: true}); err != nil {
			t.Fatal(err)
		}
		var runs []*model.Run
		for i := range count {
			at := first.Add(time.Duration(i) * every)
			runs = append(runs, &model.Run{ID: model.RunID(tm.ID, at), TimerID: tm.ID, ScheduledAt: at, DueAt: at,
				Status: model.RunPending, CreatedAt: at})
		}
		if _, err := st.InsertRuns(ctx, runs); err != nil {
			t.Fatal(err)
		}
		if _, err := st.SaveTimer(ctx, store.TimerWrite{Timer: tm, CancelPending: true}); err != nil {
			t.Fatal(err)
		}
		return tm.ID
	}
	f.a = timer("a", model.History{}, f.now.Add(-10*time.Minute), time.Minute, 10)
	f.b = timer("b", model.History{Keep: n(0)}, f.now.Add(-2*time.Hour), 10*time.Minute, 10)
	f.c = timer("c", model.History{Keep: n(2), MaxAge: d(0)}, f.now.Add(-100*time.Hour), time.Minute, 4)
	f.d = timer("d", model.History{Keep: n(0), MaxAge: d(0)}, f.now.Add(-1000*time.Hour), time.Minute, 5)
	old := f.now.Add(-3 * time.Hour)
	pending := &model.Run{ID: model.RunID(f.a, old), TimerID: f.a, ScheduledAt: old, DueAt: old, Status: model.RunPending, CreatedAt: old}
	if _, err := st.InsertRuns(ctx, []*model.Run{pending}); err != nil {
		t.Fatal(err)
	}
	f.pendingA = pending.ID
	for i, ago := range []time.Duration{2 * time.Hour, 90 * time.Minute, 10 * time.Minute} {
		e := &model.AuditEntry{ID: fmt.Sprintf("01AUDIT%d", i), At: f.now.Add(-ago), App: "a", Target: "t", Action: "timer.update"}
		if err := st.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// count returns how many runs timer id has, and how many of them are
// finished.
func (f *fixture) count(t *testing.T, id string) (all, finished int) {
	t.Helper()
	all, err := f.st.CountRuns(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	finished, err = f.st.CountRuns(context.Background(), id, model.RunSucceeded, model.RunFailed, model.RunSkipped, model.RunCancelled)
	if err != nil {
		t.Fatal(err)
	}
	return all, finished
}

// check fails the test unless the fixture's timers hold what one pass
// leaves.
func (f *fixture) check(t *testing.T) {
	t.Helper()
	for _, tc := range []struct {
		id            string
		all, finished int
	}{
		{f.a, 6, 5}, // the 5 newest, and the old pending run
		{f.b, 4, 4}, // those of the last hour (now-60m is not before now-1h)
		{f.c, 2, 2}, // the 2 newest, however old
		{f.d, 5, 5}, // no limit
	} {
		if all, finished := f.count(t, tc.id); all != tc.all || finished != tc.finished {
			t.Errorf("timer %s: %d runs, %d finished; want %d, %d", tc.id, all, finished, tc.all, tc.finished)
		}
	}
	if _, err := f.st.GetRun(context.Background(), f.pendingA); err != nil {
		t.Errorf("the old pending run: %v", err)
	}
	audit, _, err := f.st.ListAudit(context.Background(), store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != 1 || audit[0].ID != "01AUDIT2" {
		t.Errorf("audit left: %+v", audit)
	}
}

// TestPass: one pass applies each timer's limits, its own or the
// defaults, never deletes a pending run, deletes the old audit entries,
// and counts the runs in chime_runs_deleted_total; in batches of Batch
// rows, with the same result.
func TestPass(t *testing.T) {
	t.Parallel()
	for _, batch := range []int{0, 2} {
		t.Run(fmt.Sprint("batch ", batch), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			reg := prometheus.NewRegistry()
			m := metrics.New(reg)
			r := New(Config{Store: f.st, Keep: 5, MaxAge: time.Hour, Batch: batch, Pause: time.Millisecond,
				Clock: f.clk, Metrics: m, Logger: discard})
			res, err := r.Pass(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.Runs != 13 || res.Audit != 2 || res.Timers != 4 {
				t.Errorf("pass = %+v, want 13 runs, 2 audit entries, 4 timers", res)
			}
			if got := counter(t, reg, "chime_runs_deleted_total"); got != 13 {
				t.Errorf("chime_runs_deleted_total = %v, want 13", got)
			}
			f.check(t)
			res, err = r.Pass(context.Background())
			if err != nil || res.Runs != 0 || res.Audit != 0 {
				t.Errorf("second pass = %+v, %v; want nothing deleted", res, err)
			}
		})
	}
}

// counter returns the value of the counter name of reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// cutStore cancels a pass when it comes to timer at.
type cutStore struct {
	Store
	at     string
	cancel func()
}

func (c *cutStore) PruneRuns(ctx context.Context, p store.RunPrune) (int, error) {
	if p.TimerID == c.at && c.cancel != nil {
		c.cancel()
	}
	return c.Store.PruneRuns(ctx, p)
}

// TestPassResumes: a pass cut short resumes at the next pass after the
// last timer it finished, and goes on from the start after the end.
func TestPassResumes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cs := &cutStore{Store: f.st, at: f.b, cancel: cancel}
	r := New(Config{Store: cs, Keep: 5, MaxAge: time.Hour, Clock: f.clk, Logger: discard})
	res, err := r.Pass(ctx)
	if !errors.Is(err, context.Canceled) || res.Timers != 1 || res.Runs != 5 {
		t.Fatalf("cut pass = %+v, %v; want timer a done, then canceled", res, err)
	}
	cs.cancel = nil
	res, err = r.Pass(context.Background())
	if err != nil || res.Timers != 3 || res.Runs != 8 {
		t.Errorf("resumed pass = %+v, %v; want timers b, c, d and 8 runs", res, err)
	}
	f.check(t)
	if res, err = r.Pass(context.Background()); err != nil || res.Timers != 4 {
		t.Errorf("next pass = %+v, %v; want all 4 timers from the start", res, err)
	}
}

// TestPassDefaults: a zero Config keeps 1000 runs for 720h; negative
// defaults are no limit.
func TestPassDefaults(t *testing.T) {
	t.Parallel()
	r := New(Config{})
	if r.cfg.Keep != DefaultKeep || r.cfg.MaxAge != DefaultMaxAge || r.cfg.Batch != store.MaxPruneBatch {
		t.Errorf("defaults: %+v", r.cfg)
	}
	f := newFixture(t)
	r = New(Config{Store: f.st, Keep: -1, MaxAge: -1, Clock: f.clk, Logger: discard})
	res, err := r.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Only c's own keep applies.
	if res.Runs != 2 || res.Audit != 0 {
		t.Errorf("pass with no default limits = %+v, want 2 runs of c only", res)
	}
}

// TestPassRecent: nothing scheduled within the last Recent is deleted,
// whatever the limits.
func TestPassRecent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	keep := 1
	tm, err := f.st.GetTimer(context.Background(), f.a)
	if err != nil {
		t.Fatal(err)
	}
	tm.History.Keep = &keep
	if err := f.st.UpdateTimer(context.Background(), tm); err != nil {
		t.Fatal(err)
	}
	f.clk.Set(f.now.Add(-2 * time.Minute)) // a's runs at now-2m and now-1m are in the future, or recent
	r := New(Config{Store: f.st, Keep: 5, MaxAge: time.Hour, Clock: f.clk, Logger: discard})
	if _, err := r.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The cut: the newest finished run (now-1m) bounds keep 1, but runs
	// at or after now-3m (Recent) stay: now-3m, now-2m, now-1m.
	if all, finished := f.count(t, f.a); finished != 3 || all != 4 {
		t.Errorf("timer a: %d runs, %d finished; want 4, 3", all, finished)
	}
}

// TestLoopOnTheLeaderOnly: the leader of LeaderService makes a pass every
// interval; a follower's loop deletes nothing, nor does a node on
// standby.
func TestLoopOnTheLeaderOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	elector := memlock.NewElector(f.clk)
	r := New(Config{Store: f.st, Keep: 5, MaxAge: time.Hour, Clock: f.clk, Logger: discard})
	if _, err := elector.Select(ctx, LeaderService, "other", 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	total := func() int {
		n := 0
		for _, id := range []string{f.a, f.b, f.c, f.d} {
			all, _ := f.count(t, id)
			n += all
		}
		return n
	}
	before := total()
	standby := true
	for _, cfg := range []LoopConfig{
		{Elector: elector, NodeID: "me", Interval: time.Minute, Clock: f.clk, Logger: discard},
		{Elector: elector, NodeID: "other", Interval: time.Minute, Clock: f.clk, Logger: discard, Standby: func() bool { return standby }},
	} {
		l := NewLoop(r, cfg)
		l.loop.Passed.Init(t)
		if err := l.Start(ctx); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 10*time.Second, "the loop's ticker", func() (bool, string) { return f.clk.Waiters() == 1, "" })
		f.clk.Advance(time.Minute)
		l.loop.Passed.Wait()
		if err := l.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if n := total(); n != before {
			t.Fatalf("%s's loop (standby %v) deleted %d runs", cfg.NodeID, cfg.Standby != nil, before-n)
		}
	}
	standby = false
	l := NewLoop(r, LoopConfig{Elector: elector, NodeID: "other", Interval: time.Minute, Clock: f.clk, Logger: discard})
	l.loop.Passed.Init(t)
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Stop(ctx) })
	if n := total(); n != before {
		t.Fatalf("the loop deleted %d runs at Start", before-n)
	}
	testenv.Eventually(t, 10*time.Second, "the loop's ticker", func() (bool, string) { return f.clk.Waiters() == 1, "" })
	f.clk.Advance(time.Minute)
	l.loop.Passed.Wait()
	// At now+3m: a loses its 5 oldest, b those before now-57m (7), c 2.
	if n := total(); before-n != 14 {
		t.Errorf("the leader's loop deleted %d runs, want 14", before-n)
	}
}

// TestLoopLifecycle: Start and Stop are safe twice, Stop without Start, and
// a stopped loop does not start again.
func TestLoopLifecycle(t *testing.T) {
	t.Parallel()
	startstoptest.Lifecycle(t, func() *Loop {
		return NewLoop(New(Config{}), LoopConfig{Elector: memlock.NewElector(nil), NodeID: "me"})
	})
}

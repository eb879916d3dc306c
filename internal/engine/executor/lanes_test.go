package executor

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/coord/index/memindex"
	"github.com/chimehq/chime/internal/engine/action"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/sqlstore"
	"github.com/chimehq/chime/model"
)

// laneEnv is an executor with the real HTTP runner over an in-memory
// store, on a fake clock that does not move (claims never run out).
type laneEnv struct {
	st    store.Store
	exec  *Executor
	timer *model.Timer
	now   time.Time
}

func newLaneEnv(t *testing.T, url string) *laneEnv {
	t.Helper()
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, "sqlite::memory:", sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().Truncate(time.Second)
	clk := clock.NewFake(now)
	tm := &model.Timer{ID: "tmr_lane", App: "a", Name: "lane", Schedule: "@every 1h", Timezone: "UTC", Enabled: true,
		Action:  model.Action{Type: model.ActionHTTP, HTTP: &model.HTTPAction{Method: "POST", URL: url}},
		Timeout: time.Minute, Retry: model.RetryPolicy{MaxAttempts: 1}, CreatedAt: now, UpdatedAt: now}
	if _, err := st.SaveTimer(ctx, store.TimerWrite{Timer: tm, Create: true}); err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{Store: st, Index: memindex.New(1), NodeID: "n1",
		Runners: map[string]action.Runner{model.ActionHTTP: action.NewHTTPRunner()},
		Clock:   clk, Local: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.Stop(ctx)
	})
	return &laneEnv{st: st, exec: e, timer: tm, now: now}
}

// claim inserts and claims n runs of the timer, all due within the last
// n milliseconds (a herd, on time).
func (env *laneEnv) claim(t *testing.T, n int) []store.ClaimedRun {
	t.Helper()
	ctx := context.Background()
	runs := make([]*model.Run, n)
	entries := make([]index.Entry, n)
	for i := range runs {
		at := env.now.Add(-time.Duration(i+1) * time.Millisecond)
		runs[i] = &model.Run{ID: model.RunID(env.timer.ID, at), TimerID: env.timer.ID, ScheduledAt: at, DueAt: at}
		entries[i] = index.Entry{RunID: runs[i].ID, TimerID: env.timer.ID, DueAt: at}
	}
	if _, err := env.st.InsertRuns(ctx, runs); err != nil {
		t.Fatal(err)
	}
	won, err := env.exec.Claim(ctx, entries)
	if err != nil || len(won) != n {
		t.Fatalf("claim: %d of %d, %v", len(won), n, err)
	}
	return won
}

// TestLaneSlowReceiverGetsAllConns: a herd to a receiver that does not
// answer (slower than any LaneStall) still gets MaxConnsPerHost callbacks
// in flight at once, and never more; once it answers, every run ends.
func TestLaneSlowReceiverGetsAllConns(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var mu sync.Mutex
	inflight, peak, served := 0, 0, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inflight++
		peak = max(peak, inflight)
		mu.Unlock()
		<-release
		mu.Lock()
		inflight--
		served++
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	env := newLaneEnv(t, srv.URL+"/hook")
	const n = action.MaxConnsPerHost + 50
	env.exec.SubmitAll(env.claim(t, n))
	waitFor(t, "MaxConnsPerHost callbacks in flight at the receiver", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return inflight == action.MaxConnsPerHost
	})
	close(release)
	waitFor(t, "every callback served", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return served == n
	})
	mu.Lock()
	defer mu.Unlock()
	if peak > action.MaxConnsPerHost {
		t.Errorf("peak %d callbacks in flight, want at most %d", peak, action.MaxConnsPerHost)
	}
}

// TestLaneFastReceiver: a herd to a receiver that answers at once is
// sent in full, and the lane is gone once it is: its workers end.
func TestLaneFastReceiver(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	served := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		served++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	env := newLaneEnv(t, srv.URL)
	const n = 300
	env.exec.SubmitAll(env.claim(t, n))
	waitFor(t, "every callback served and the lane dropped", func() bool {
		mu.Lock()
		s := served
		mu.Unlock()
		env.exec.queue.mu.Lock()
		defer env.exec.queue.mu.Unlock()
		return s == n && len(env.exec.queue.lanes) == 0 && env.exec.queue.workers == 0 && env.exec.queue.laneQueued.Load() == 0
	})
}

// TestLaneAdmit: a lane admits up to its limit of workers not stalled;
// stalled ones let as many more start (so a lane of stalled callbacks
// doubles), never past conns.
func TestLaneAdmit(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	for _, tc := range []struct {
		name         string
		conns, limit int
		srtt         time.Duration
		since        []time.Duration // of each worker's run, after t0
		at           time.Duration   // when admit is asked, after t0
		want         bool
	}{
		{"empty", 256, 4, 0, nil, 0, true},
		{"below limit", 256, 4, 0, []time.Duration{0, 0, 0}, 0, true},
		{"at limit", 256, 4, 0, []time.Duration{0, 0, 0, 0}, LaneStall / 2, false},
		{"one stalled", 256, 4, 0, []time.Duration{0, LaneStall, LaneStall, LaneStall}, LaneStall, true},
		{"one stalled, replaced", 256, 4, 0, []time.Duration{0, LaneStall, LaneStall, LaneStall, LaneStall}, LaneStall, false},
		{"all stalled", 256, 4, 0, []time.Duration{0, 0, 0, 0, LaneStall, LaneStall, LaneStall}, LaneStall, true},
		{"all stalled, doubled", 256, 4, 0, []time.Duration{0, 0, 0, 0, LaneStall, LaneStall, LaneStall, LaneStall}, LaneStall, false},
		{"eight stalled", 256, 4, 0, []time.Duration{0, 0, 0, 0, 0, 0, 0, 0}, LaneStall, true},
		{"at conns", 2, 4, 0, []time.Duration{0, 0}, LaneStall, false},
		{"slow answers: not stalled yet", 256, 4, 5 * time.Millisecond, []time.Duration{0, 0, 0, 0}, 19 * time.Millisecond, false},
		{"slow answers: stalled", 256, 4, 5 * time.Millisecond, []time.Duration{0, 0, 0, 0}, 20 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := &lane{conns: tc.conns, limit: tc.limit, srtt: tc.srtt}
			for _, d := range tc.since {
				l.add(t0.Add(d))
			}
			if got := l.admit(t0.Add(tc.at)); got != tc.want {
				t.Errorf("admit = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestLaneAnswered: while runs wait, answers within twice the quickest
// raise the limit, up to conns and to twice the limit of the last check;
// slower ones, or any with none waiting, leave it.
func TestLaneAnswered(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	for _, tc := range []struct {
		name    string
		limit   int
		waiting bool
		rtts    []time.Duration
		want    int
	}{
		{"quick", 4, true, []time.Duration{ms, ms, 2 * ms}, 7},
		{"nothing waits", 4, false, []time.Duration{ms, ms, ms}, 4},
		{"slow", 4, true, []time.Duration{ms, 5 * ms, 5 * ms}, 5},
		{"between", 8, true, []time.Duration{ms, 3 * ms}, 9},
		{"capped", 9, true, []time.Duration{ms, ms, ms}, 10},
		{"doubled since the last check", 8, true, []time.Duration{ms, ms, ms}, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := &lane{conns: 10, limit: tc.limit, checkLimit: tc.limit}
			if tc.name == "doubled since the last check" {
				l.checkLimit = 4
			}
			if tc.waiting {
				l.queue = runQueue{{}}
			}
			for _, d := range tc.rtts {
				l.answered(d, time.Now())
			}
			if l.limit != tc.want {
				t.Errorf("limit = %d, want %d", l.limit, tc.want)
			}
		})
	}
}

// TestLaneBacklogged: runs that wait in a lane for LaneStall without a
// break raise its limit by a quarter (one at least), once per LaneStall.
func TestLaneBacklogged(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	l := &lane{conns: 10, limit: LaneMinWorkers}
	l.backlogged(t0.Add(time.Hour))
	if l.limit != LaneMinWorkers {
		t.Fatalf("limit %d with nothing waiting, want %d", l.limit, LaneMinWorkers)
	}
	l.push(queued{cr: store.ClaimedRun{Run: &model.Run{}}}, t0)
	for _, step := range []struct {
		at   time.Duration
		want int
	}{
		{LaneStall / 2, 4}, {LaneStall, 5}, {LaneStall + LaneStall/2, 5}, {2 * LaneStall, 6}, {3 * LaneStall, 7},
		{4 * LaneStall, 8}, {5 * LaneStall, 10}, {6 * LaneStall, 10},
	} {
		l.backlogged(t0.Add(step.at))
		if l.limit != step.want {
			t.Fatalf("after %s: limit %d, want %d", step.at, l.limit, step.want)
		}
	}
	l.pop()
	if !l.waitSince.IsZero() {
		t.Error("the lane's wait did not end with its queue")
	}
}

// TestLaneCheck: a widening after which the lane does not answer a tenth
// faster than before holds its growth on backlog and on quick answers for
// LaneHold (stalled callbacks still let others start); one that pays does
// not; a lane without answers is not held.
func TestLaneCheck(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	l := &lane{conns: 256, limit: LaneMinWorkers}
	l.push(queued{cr: store.ClaimedRun{Run: &model.Run{}}}, t0)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * LaneStall) }
	l.check(at(0))
	l.answers += 40 // 4 workers: 40 answers in a LaneStall
	l.check(at(1))
	l.limit = 8 // widened
	l.answers += 40
	l.check(at(2)) // measures the 4 of before the widening again
	l.answers += 80
	l.check(at(3)) // 8 workers, twice the answers: paid
	if !l.holdUntil.IsZero() {
		t.Fatalf("held until %v after a widening that paid", l.holdUntil)
	}
	l.limit = 16
	l.answers += 80
	l.check(at(4))
	l.answers += 84 // 16 workers, 5% more answers: not paid
	l.check(at(5))
	if !l.holdUntil.Equal(at(5).Add(LaneHold)) {
		t.Fatalf("held until %v after a widening that did not pay, want %v", l.holdUntil, at(5).Add(LaneHold))
	}
	l.backlogged(at(6))
	l.checkLimit = 16
	l.answered(time.Nanosecond, at(6))
	if l.limit != 16 {
		t.Fatalf("limit %d grew during the hold, want 16", l.limit)
	}
	for range 16 {
		l.add(at(6))
	}
	if !l.admit(at(8)) {
		t.Fatal("stalled workers let none start during the hold")
	}
	l.backlogged(at(6).Add(LaneHold))
	if l.limit != 20 {
		t.Fatalf("limit %d after the hold, want 20", l.limit)
	}
	// No answers at all (a receiver that does not answer): no hold.
	l = &lane{conns: 256, limit: 16, lastLimit: 4, lastRate: 4000, checkLimit: 16}
	l.push(queued{cr: store.ClaimedRun{Run: &model.Run{}}}, t0)
	l.checkAt = at(0)
	l.check(at(1))
	if !l.holdUntil.IsZero() {
		t.Fatalf("a lane without answers held until %v", l.holdUntil)
	}
}

package storetest

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// uiTests are the tests of what the web UI reads: the timers in next-fire
// order, the request each run sent, and the dashboard's minutes.
var uiTests = []test{
	{"NextFireSort", testNextFireSort},
	{"NextFireWrites", testNextFireWrites},
	{"RunRequest", testRunRequest},
	{"StatsMinutes", testStatsMinutes},
}

// listAll pages through ListTimers with f, limit at a time, and returns
// the names in order.
func listAll(t *testing.T, s store.Store, f store.TimerFilter, limit int) []string {
	t.Helper()
	var names []string
	f.Limit = limit
	for page := 0; ; page++ {
		ts, next, err := s.ListTimers(ctx(t), f)
		must(t, err)
		for _, tm := range ts {
			names = append(names, tm.Name)
		}
		if next == "" {
			return names
		}
		if page > 100 {
			t.Fatal("ListTimers: no last page")
		}
		f.After = next
	}
}

// testNextFireSort: SortNextFire orders timers by their stored next fire,
// those without one (disabled, or none left) last, ties by id, over pages
// whose cursors resume exactly; with an app filter and a name search too.
func testNextFireSort(t *testing.T, s store.Store) {
	mk := func(app, name string, next time.Duration, enabled bool) *model.Timer {
		tm := NewTimer(app, name)
		tm.Enabled = enabled
		if next >= 0 {
			tm.NextFireAt = base.Add(next)
		}
		must(t, createTimer(ctx(t), s, tm))
		return tm
	}
	mk("a", "t-5s", 5*time.Second, true)
	mk("b", "t-1s", time.Second, true)
	mk("a", "t-none", -1, true)
	mk("a", "t-3s-disabled", 3*time.Second, false)
	mk("b", "t-3s", 3*time.Second, true)
	mk("a", "t-3s-too", 3*time.Second, true) // a tie: by id, after t-3s
	mk("a", "t-2s", 2*time.Second, true)
	want := []string{"t-1s", "t-2s", "t-3s", "t-3s-too", "t-5s", "t-none", "t-3s-disabled"}
	for _, limit := range []int{1, 2, 3, 100} {
		if got := listAll(t, s, store.TimerFilter{Sort: store.SortNextFire}, limit); !slices.Equal(got, want) {
			t.Errorf("by next fire, %d a page = %v, want %v", limit, got, want)
		}
	}
	if got, want := listAll(t, s, store.TimerFilter{Sort: store.SortNextFire, App: "a"}, 2), []string{"t-2s", "t-3s-too", "t-5s", "t-none", "t-3s-disabled"}; !slices.Equal(got, want) {
		t.Errorf("app a by next fire = %v, want %v", got, want)
	}
	on := true
	if got, want := listAll(t, s, store.TimerFilter{Sort: store.SortNextFire, Enabled: &on, NameContains: "3S"}, 1), []string{"t-3s", "t-3s-too"}; !slices.Equal(got, want) {
		t.Errorf("enabled, name contains 3S, by next fire = %v, want %v", got, want)
	}
	ts, _, err := s.ListTimers(ctx(t), store.TimerFilter{Sort: store.SortNextFire, Limit: 1})
	must(t, err)
	if len(ts) != 1 || !ts[0].NextFireAt.Equal(base.Add(time.Second)) {
		t.Errorf("first by next fire = %+v, want NextFireAt %v", ts, base.Add(time.Second))
	}
	// A cursor of the id order is not one of this order.
	_, next, err := s.ListTimers(ctx(t), store.TimerFilter{Limit: 1})
	must(t, err)
	if _, _, err := s.ListTimers(ctx(t), store.TimerFilter{Sort: store.SortNextFire, After: next}); err == nil {
		t.Error("ListTimers by next fire after an id cursor: no error")
	}
	if _, _, err := s.ListTimers(ctx(t), store.TimerFilter{Sort: "name"}); err == nil {
		t.Error("ListTimers with an unknown sort: no error")
	}
}

// testNextFireWrites: the next fire is written by SaveTimer and
// UpdateTimer with the timer, and by SetPlannedUntil with a plan that
// moves PlannedUntil forward (not by one that would move it back); a
// disabled timer has none.
func testNextFireWrites(t *testing.T, s store.Store) {
	tm := NewTimer("app", "nf")
	tm.NextFireAt, tm.PlannedUntil = base.Add(time.Second), base.Add(10*time.Second)
	_, err := s.SaveTimer(ctx(t), store.TimerWrite{Timer: tm, Create: true})
	must(t, err)
	check := func(what string, want time.Time) {
		t.Helper()
		got, err := s.GetTimer(ctx(t), tm.ID)
		must(t, err)
		if !got.NextFireAt.Equal(want) {
			t.Errorf("%s: NextFireAt = %v, want %v", what, got.NextFireAt, want)
		}
	}
	check("created", base.Add(time.Second))
	must(t, s.SetPlannedUntil(ctx(t), map[string]store.Plan{tm.ID: {Until: base.Add(20 * time.Second), NextFire: base.Add(11 * time.Second)}}))
	check("planned further", base.Add(11*time.Second))
	must(t, s.SetPlannedUntil(ctx(t), map[string]store.Plan{tm.ID: {Until: base.Add(15 * time.Second), NextFire: base.Add(12 * time.Second)}}))
	check("a plan that moves PlannedUntil back", base.Add(11*time.Second))
	// Many timers in one pass, sharing their PlannedUntil, each with its
	// own next fire.
	plans := map[string]store.Plan{}
	var made []*model.Timer
	for i := range 7 {
		o := mustTimer(t, s, "app", fmt.Sprintf("nf-%d", i))
		made = append(made, o)
		plans[o.ID] = store.Plan{Until: base.Add(time.Minute), NextFire: base.Add(time.Duration(7-i) * time.Second)}
	}
	plans[made[6].ID] = store.Plan{Until: base.Add(time.Minute)} // none
	must(t, s.SetPlannedUntil(ctx(t), plans))
	for i, o := range made {
		got, err := s.GetTimer(ctx(t), o.ID)
		must(t, err)
		if want := plans[o.ID].NextFire; !got.NextFireAt.Equal(want) || !got.PlannedUntil.Equal(base.Add(time.Minute)) {
			t.Errorf("timer %d after the pass: NextFireAt %v, PlannedUntil %v; want %v, %v", i, got.NextFireAt, got.PlannedUntil, want, base.Add(time.Minute))
		}
	}
	tm.NextFireAt = base.Add(30 * time.Second)
	must(t, s.UpdateTimer(ctx(t), tm))
	check("updated", base.Add(30*time.Second))
	tm.Enabled = false
	must(t, s.UpdateTimer(ctx(t), tm))
	check("disabled", time.Time{})
	// A plan made before the disable, recorded after it: the timer keeps
	// no next fire, and sorts last.
	must(t, s.SetPlannedUntil(ctx(t), map[string]store.Plan{tm.ID: {Until: base.Add(time.Hour), NextFire: base.Add(time.Second)}}))
	check("disabled, then a plan recorded", time.Time{})
	ts, _, err := s.ListTimers(ctx(t), store.TimerFilter{Sort: store.SortNextFire, Limit: 1000})
	must(t, err)
	i := slices.IndexFunc(ts, func(o *model.Timer) bool { return o.ID == tm.ID })
	if i < 0 || slices.ContainsFunc(ts[i:], func(o *model.Timer) bool { return !o.NextFireAt.IsZero() }) {
		t.Errorf("by next fire, the disabled timer (at %d of %d) is not among the last, without a next fire", i, len(ts))
	}
}

// testRunRequest: a result's request is stored with it (FinishRun and
// FinishRuns), read back by GetRun and ListRuns, and replaced by the next
// attempt's; a result without one clears it.
func testRunRequest(t *testing.T, s store.Store) {
	tm, runs := pendingRuns(t, s, "rq", 4)
	now := base.Add(time.Second)
	_, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n1", now))
	must(t, err)
	sent := &model.SentRequest{Type: model.ActionHTTP, Method: "POST", URL: "http://h/x",
		Header: map[string]string{"Authorization": model.Redacted, "X-Chime-Attempt": "1"}, Body: `{"a":1}`}
	handler := &model.SentRequest{Type: model.ActionHandler, Handler: "h", Args: json.RawMessage(`{"n":1}`)}
	res := func(r *model.Run, req *model.SentRequest) model.Result {
		return model.Result{RunID: r.ID, Node: "n1", Attempt: 1, Status: model.RunFailed, StartedAt: now,
			FinishedAt: now.Add(time.Millisecond), Error: "boom", Request: req, RetryAt: now.Add(time.Minute)}
	}
	must(t, Finish(ctx(t), s, res(runs[0], sent)))
	ok, _, err := s.FinishRuns(ctx(t), []model.Result{res(runs[1], handler), res(runs[2], nil), res(runs[3], sent)})
	must(t, err)
	if !slices.Equal(ok, []bool{true, true, true}) {
		t.Fatalf("FinishRuns = %v", ok)
	}
	same := func(a, b *model.SentRequest) bool {
		if a == nil || b == nil {
			return a == b
		}
		return a.Type == b.Type && a.Method == b.Method && a.URL == b.URL && maps.Equal(a.Header, b.Header) &&
			a.Body == b.Body && a.Handler == b.Handler && string(a.Args) == string(b.Args)
	}
	for i, want := range []*model.SentRequest{sent, handler, nil, sent} {
		r, err := s.GetRun(ctx(t), runs[i].ID)
		must(t, err)
		if !same(r.Request, want) {
			t.Errorf("run %d: Request = %+v, want %+v", i, r.Request, want)
		}
	}
	listed, _, err := s.ListRuns(ctx(t), store.RunFilter{TimerID: tm.ID})
	must(t, err)
	for _, r := range listed {
		if r.ID == runs[1].ID && !same(r.Request, handler) {
			t.Errorf("listed run: Request = %+v, want %+v", r.Request, handler)
		}
	}
	// The retry's attempt replaces it.
	later := now.Add(time.Minute)
	if _, err := s.ClaimRuns(ctx(t), claimsFor(runs[:1], "n1", later)); err != nil {
		t.Fatal(err)
	}
	second := *sent
	second.Header = map[string]string{"X-Chime-Attempt": "2"}
	must(t, Finish(ctx(t), s, model.Result{RunID: runs[0].ID, Node: "n1", Attempt: 2, Status: model.RunSucceeded,
		StartedAt: later, FinishedAt: later, Request: &second}))
	r, err := s.GetRun(ctx(t), runs[0].ID)
	must(t, err)
	if !same(r.Request, &second) {
		t.Errorf("after the second attempt: Request = %+v, want %+v", r.Request, &second)
	}
	// A request with every header chime sends, which repeat the run's
	// columns as claimed (the store may keep them out of the row), reads
	// back whole.
	claimed, err := s.ClaimRuns(ctx(t), claimsFor(runs[3:], "n1", later))
	must(t, err)
	if len(claimed) != 1 {
		t.Fatalf("claimed %d runs, want 1", len(claimed))
	}
	c := claimed[0].Run
	hdr := map[string]string{"X-Chime-Run-Id": c.ID, "Webhook-Id": c.ID, "X-Chime-Timer-Id": tm.ID,
		"X-Chime-Scheduled-At": c.ScheduledAt.UTC().Format(time.RFC3339Nano),
		"X-Chime-Due-At":       c.DueAt.UTC().Format(time.RFC3339Nano), "X-Chime-Attempt": fmt.Sprint(c.Attempt),
		"X-Chime-Node": "n1", "User-Agent": "chime", "Webhook-Timestamp": fmt.Sprint(later.Unix()),
		"Webhook-Signature": "v1,c2ln", "X-Plain": "visible"}
	full := &model.SentRequest{Type: model.ActionHTTP, Method: "POST", URL: "http://h/x", Header: hdr}
	ok, _, err = s.FinishRuns(ctx(t), []model.Result{{RunID: c.ID, TimerID: tm.ID, Node: "n1", Attempt: c.Attempt,
		Status: model.RunSucceeded, StartedAt: later, FinishedAt: later, Request: full,
		ScheduledAt: c.ScheduledAt, DueAt: c.DueAt}})
	must(t, err)
	if !ok[0] {
		t.Fatal("FinishRuns of the full request: fence did not hold")
	}
	r, err = s.GetRun(ctx(t), runs[3].ID)
	must(t, err)
	if !same(r.Request, full) {
		t.Errorf("full request: Request = %+v, want %+v", r.Request, full)
	}
}

// testStatsMinutes: PutStatsMinutes inserts and replaces rows by (minute,
// node); StatsMinutes returns those from an instant on, by minute then
// node; PruneStatsMinutes deletes the older ones.
func testStatsMinutes(t *testing.T, s store.Store) {
	m0 := base.Truncate(time.Minute)
	m1, m2 := m0.Add(time.Minute), m0.Add(2*time.Minute)
	delays := make([]int64, 64)
	delays[3], delays[63] = 5, 1
	note := store.StatsTimer{TimerID: "t1", Failures: 2, LastFailure: m1.Add(time.Second), Late: 1, MaxDelay: 1500 * time.Millisecond, LastLate: m1}
	must(t, s.PutStatsMinutes(ctx(t), nil))
	must(t, s.PutStatsMinutes(ctx(t), []store.StatsMinute{
		{Minute: m0, Node: "n2", Fires: map[string]int64{"succeeded": 1}},
		{Minute: m1, Node: "n2", Fires: map[string]int64{"succeeded": 3, "failed": 1}, Delays: delays},
	}))
	must(t, s.PutStatsMinutes(ctx(t), []store.StatsMinute{
		{Minute: m1, Node: "n1", Fires: map[string]int64{"succeeded": 7}},
		{Minute: m2, Node: "n1", Fires: map[string]int64{}, Timers: []store.StatsTimer{note}},
	}))
	// The minute under way is written again, replaced.
	must(t, s.PutStatsMinutes(ctx(t), []store.StatsMinute{
		{Minute: m1, Node: "n2", Fires: map[string]int64{"succeeded": 4, "failed": 1}, Delays: delays},
	}))
	rows, err := s.StatsMinutes(ctx(t), m1)
	must(t, err)
	key := func(r store.StatsMinute) string { return fmt.Sprintf("%d/%s", r.Minute.Sub(m0)/time.Minute, r.Node) }
	var got []string
	for _, r := range rows {
		got = append(got, key(r))
	}
	if want := []string{"1/n1", "1/n2", "2/n1"}; !slices.Equal(got, want) {
		t.Fatalf("StatsMinutes(m1) = %v, want %v", got, want)
	}
	if r := rows[1]; r.Fires["succeeded"] != 4 || r.Fires["failed"] != 1 || len(r.Delays) != 64 || r.Delays[3] != 5 || r.Delays[63] != 1 {
		t.Errorf("replaced row = %+v", r)
	}
	if r := rows[0]; r.Fires["succeeded"] != 7 || len(r.Delays) != 0 || len(r.Timers) != 0 || !r.Minute.Equal(m1) {
		t.Errorf("row 1/n1 = %+v", r)
	}
	if r := rows[2]; len(r.Timers) != 1 || r.Timers[0].TimerID != "t1" || r.Timers[0].Failures != 2 || r.Timers[0].Late != 1 ||
		r.Timers[0].MaxDelay != note.MaxDelay || !r.Timers[0].LastFailure.Equal(note.LastFailure) || !r.Timers[0].LastLate.Equal(note.LastLate) {
		t.Errorf("row 2/n1 notes = %+v, want [%+v]", r.Timers, note)
	}
	n, err := s.PruneStatsMinutes(ctx(t), m1)
	must(t, err)
	if n != 1 {
		t.Errorf("PruneStatsMinutes(m1) = %d, want 1", n)
	}
	rows, err = s.StatsMinutes(ctx(t), time.Time{})
	must(t, err)
	if len(rows) != 3 {
		t.Errorf("after the prune: %d rows, want 3", len(rows))
	}
}

package api_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/internal/metrics"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/storetest"
	"github.com/chimehq/chime/model"
)

// TestListTimersByNextFire: sort=next_fire orders by the stored next fire,
// timers without one last, over pages of cursors that the id order
// refuses (and the other way round); another sort is a 400 naming sort.
func TestListTimersByNextFire(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	plans := map[string]store.Plan{}
	names := map[string]string{}
	for i, next := range []time.Duration{5, 1, 0, 3, 2} { // seconds; 0: none
		tm := e.createTimer(t, validTimer(fmt.Sprintf("nf%d", i)))
		names[tm.ID] = tm.Name
		p := store.Plan{Until: testNow.Add(time.Minute)}
		if next > 0 {
			p.NextFire = testNow.Add(next * time.Second)
		}
		plans[tm.ID] = p
	}
	if err := e.store.SetPlannedUntil(ctx, plans); err != nil {
		t.Fatal(err)
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		var page api.TimerList
		e.doJSON(t, "GET", "/api/v1/timers?sort=next_fire&limit=2&cursor="+url.QueryEscape(cursor), nil, 200, &page)
		for _, tm := range page.Timers {
			got = append(got, tm.Name)
		}
		if page.NextCursor == "" {
			break
		}
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		if pages == 0 {
			// A cursor of this order is refused by the id order.
			if code, b := e.do(t, "GET", "/api/v1/timers?cursor="+url.QueryEscape(page.NextCursor), nil); code != 400 || !strings.Contains(string(b), `"cursor"`) {
				t.Errorf("next_fire cursor in the id order: %d %s", code, b)
			}
		}
		cursor = page.NextCursor
	}
	if want := []string{"nf1", "nf4", "nf3", "nf0", "nf2"}; !slices.Equal(got, want) {
		t.Errorf("by next fire = %v, want %v", got, want)
	}
	var idPage api.TimerList
	e.doJSON(t, "GET", "/api/v1/timers?limit=1", nil, 200, &idPage)
	if code, b := e.do(t, "GET", "/api/v1/timers?sort=next_fire&cursor="+url.QueryEscape(idPage.NextCursor), nil); code != 400 || !strings.Contains(string(b), `"cursor"`) {
		t.Errorf("id cursor in the next_fire order: %d %s", code, b)
	}
	if code, b := e.do(t, "GET", "/api/v1/timers?sort=name", nil); code != 400 || !strings.Contains(string(b), `"field":"sort"`) {
		t.Errorf("sort=name: %d %s", code, b)
	}
	var byID api.TimerList
	e.doJSON(t, "GET", "/api/v1/timers?sort=id", nil, 200, &byID)
	if len(byID.Timers) != 5 {
		t.Errorf("sort=id: %d timers, want 5", len(byID.Timers))
	}
}

// TestRunRequest: GET /api/v1/runs/{id} and the run lists show the
// request the attempt sent, as recorded with its result (not the timer's
// action), and null before one was.
func TestRunRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	tm := e.createTimer(t, validTimer("rq"))
	var run api.Run
	e.doJSON(t, "POST", "/api/v1/timers/"+tm.ID+"/trigger", nil, 201, &run)
	code, b := e.do(t, "GET", "/api/v1/runs/"+run.ID, nil)
	if code != 200 || !strings.Contains(string(b), `"request":null`) {
		t.Errorf("pending run: %d %s, want request null", code, b)
	}
	claimed, err := e.store.ClaimRuns(ctx, []store.Claim{{RunID: run.ID, Node: "n1", LeaseUntil: testNow.Add(time.Minute), Now: testNow}})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	sent := &model.SentRequest{Type: "http", Method: "POST", URL: "http://receiver.test/sent-then",
		Header: map[string]string{"Authorization": model.Redacted, "X-Chime-Attempt": "1"}, Body: `{"then":true}`}
	if err := storetest.Finish(ctx, e.store, model.Result{RunID: run.ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded,
		StartedAt: testNow, FinishedAt: testNow, Request: sent}); err != nil {
		t.Fatal(err)
	}
	var got api.Run
	e.doJSON(t, "GET", "/api/v1/runs/"+run.ID, nil, 200, &got)
	if r := got.Request; r == nil || r.URL != sent.URL || r.Method != "POST" || r.Body != sent.Body ||
		r.Header["Authorization"] != model.Redacted || r.Header["X-Chime-Attempt"] != "1" {
		t.Errorf("run request = %+v, want %+v", got.Request, sent)
	}
	var list api.RunList
	e.doJSON(t, "GET", "/api/v1/timers/"+tm.ID+"/runs", nil, 200, &list)
	if len(list.Runs) != 1 || list.Runs[0].Request == nil || list.Runs[0].Request.URL != sent.URL {
		t.Errorf("listed runs = %+v", list.Runs)
	}
}

// TestStatsSeriesCluster: the series add the other nodes' stored minutes
// to the answering node's own (its stored rows left out: it has them
// fresher), delay percentiles from the summed histograms, and the failing
// timers of every node merged.
func TestStatsSeriesCluster(t *testing.T) {
	t.Parallel()
	own := metrics.NewSeries()
	m2 := testNow.Add(-2 * time.Minute)
	for range 3 {
		own.Fire(m2, "T1", "succeeded")
		own.Delay(m2, "T1", time.Millisecond) // bucket 0
	}
	own.Fire(m2, "T2", "failed")
	e := newEnv(t, func(c *api.Config) { c.Series = own; c.NodeID = "me" })
	ctx := context.Background()
	delays := make([]int64, metrics.DelayBuckets)
	delays[30] = 97 // 1.25^30 ms: about 808 ms
	minute := m2.Truncate(time.Minute)
	rows := []store.StatsMinute{
		{Minute: minute, Node: "other", Fires: map[string]int64{"succeeded": 97, "failed": 2}, Delays: delays,
			Timers: []store.StatsTimer{{TimerID: "T2", Failures: 2, LastFailure: m2}, {TimerID: "T9", Late: 1, MaxDelay: 3 * time.Second, LastLate: m2}}},
		// The answering node's own row: left out (its memory has it).
		{Minute: minute, Node: "me", Fires: map[string]int64{"succeeded": 1000}},
		// Out of the hour.
		{Minute: testNow.Add(-3 * time.Hour).Truncate(time.Minute), Node: "other", Fires: map[string]int64{"succeeded": 5}},
	}
	if err := e.store.PutStatsMinutes(ctx, rows); err != nil {
		t.Fatal(err)
	}
	var out api.StatsSeries
	e.doJSON(t, "GET", "/api/v1/stats/series", nil, 200, &out)
	p := out.Points[len(out.Points)-3]
	if !p.Start.Equal(minute) || p.Fires["succeeded"] != 100 || p.Fires["failed"] != 3 || p.Delays != 100 {
		t.Errorf("two minutes ago = %+v, want 100 succeeded, 3 failed, 100 delays", p)
	}
	if p.DelayP50MS < 800 || p.DelayP50MS > 820 || p.DelayP99MS != p.DelayP50MS {
		t.Errorf("delay p50 %v ms, p99 %v ms: want both about 808 (the other node's 97 of 100)", p.DelayP50MS, p.DelayP99MS)
	}
	var total int64
	for _, p := range out.Points {
		total += p.Fires["succeeded"]
	}
	if total != 100 {
		t.Errorf("succeeded in the hour = %d, want 100", total)
	}
	if len(out.Timers) != 2 || out.Timers[0].TimerID != "T2" || out.Timers[0].Failures != 3 ||
		out.Timers[1].TimerID != "T9" || out.Timers[1].Late != 1 || out.Timers[1].MaxDelayMS != 3000 {
		t.Errorf("timers = %+v, want T2 (3 failures) then T9 (late)", out.Timers)
	}
}

// TestTimerStates: GET /api/v1/timers:counts counts the timers by state
// (with the list's app and search filters) and state= lists one state;
// failing is a failed attempt in the last hour, as the dashboard says.
func TestTimerStates(t *testing.T) {
	t.Parallel()
	s := metrics.NewSeries()
	e := newEnv(t, func(c *api.Config) { c.Series = s })
	ids := map[string]string{}
	for _, name := range []string{"on-1", "on-2", "paused-1", "off-1", "off-paused"} {
		tm := e.createTimer(t, validTimer(name))
		ids[name] = tm.ID
	}
	for _, name := range []string{"paused-1", "off-paused"} {
		e.doJSON(t, "POST", "/api/v1/timers/"+ids[name]+"/pause", nil, 200, nil)
	}
	for _, name := range []string{"off-1", "off-paused"} {
		e.doJSON(t, "POST", "/api/v1/timers/"+ids[name]+"/disable", nil, 200, nil)
	}
	s.Fire(testNow.Add(-2*time.Minute), ids["on-2"], "failed")
	s.Fire(testNow.Add(-time.Minute), ids["off-1"], "retried")
	s.Fire(testNow.Add(-time.Minute), ids["on-1"], "succeeded")
	s.Fire(testNow.Add(-time.Minute), "GONE", "failed") // a deleted timer

	for _, tc := range []struct {
		query string
		want  api.TimerCounts
	}{
		{"", api.TimerCounts{All: 5, Enabled: 2, Paused: 1, Disabled: 2, Failing: 2}},
		{"?search=PAUSED", api.TimerCounts{All: 2, Paused: 1, Disabled: 1}},
		{"?search=on-", api.TimerCounts{All: 2, Enabled: 2, Failing: 1}},
		{"?app=other", api.TimerCounts{}},
	} {
		var got api.TimerCounts
		e.doJSON(t, "GET", "/api/v1/timers:counts"+tc.query, nil, 200, &got)
		if got != tc.want {
			t.Errorf("counts%s = %+v, want %+v", tc.query, got, tc.want)
		}
	}
	for _, tc := range []struct {
		state string
		want  []string
	}{
		{"enabled", []string{"on-1", "on-2"}},
		{"paused", []string{"paused-1"}},
		{"disabled", []string{"off-1", "off-paused"}},
		{"failing", []string{"on-2", "off-1"}},
	} {
		var page api.TimerList
		e.doJSON(t, "GET", "/api/v1/timers?state="+tc.state, nil, 200, &page)
		var got []string
		for _, tm := range page.Timers {
			got = append(got, tm.Name)
		}
		if tc.state != "failing" {
			slices.Sort(got)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("state=%s: %v, want %v", tc.state, got, tc.want)
		}
	}
	for _, q := range []string{"state=asleep", "state=paused&enabled=true"} {
		if code, b := e.do(t, "GET", "/api/v1/timers?"+q, nil); code != 400 || !strings.Contains(string(b), `"field":"state"`) {
			t.Errorf("%s: %d %s", q, code, b)
		}
	}
}

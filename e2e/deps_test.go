package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/testenv"
)

// depRun is a run as GET /api/v1/timers/{id}/runs answers it, with the
// upstream run that made it.
type depRun struct {
	ID            string `json:"id"`
	TimerID       string `json:"timer_id"`
	Status        string `json:"status"`
	Attempt       int    `json:"attempt"`
	Node          string `json:"node"`
	UpstreamRunID string `json:"upstream_run_id"`
}

// depRuns lists a timer's runs (newest first, up to 1000).
func depRuns(t testing.TB, base, timerID string) []depRun {
	t.Helper()
	var page struct {
		Runs []depRun `json:"runs"`
	}
	callJSON(t, "GET", base+"/api/v1/timers/"+timerID+"/runs?limit=1000", nil, http.StatusOK, &page)
	return page.Runs
}

// afterTimer is a timer request with no schedule that runs after ups
// (alternating timer, on).
func afterTimer(app, name, url string, ups ...string) map[string]any {
	req := httpTimer(app, name, "", "POST", url, "", nil)
	delete(req, "schedule")
	var after []map[string]any
	for i := 0; i+1 < len(ups); i += 2 {
		after = append(after, map[string]any{"timer": ups[i], "on": ups[i+1]})
	}
	req["after"] = after
	return req
}

// errorAnswer decodes an error answer.
func errorAnswer(t testing.TB, body []byte) (field, message string) {
	t.Helper()
	var e struct {
		Error struct {
			Field   string `json:"field"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error answer %s: %v", body, err)
	}
	return e.Error.Field, e.Error.Message
}

// wantError sends a request that must fail with code on field, its
// message containing each of contains.
func wantError(t testing.TB, method, url string, body any, code int, field string, contains ...string) {
	t.Helper()
	got, data := call(t, method, url, body)
	f, msg := errorAnswer(t, data)
	if got != code || f != field {
		t.Errorf("%s %s: %d %s %q, want %d on %s", method, url, got, f, msg, code, field)
		return
	}
	for _, c := range contains {
		if !strings.Contains(msg, c) {
			t.Errorf("%s %s: message %q does not contain %q", method, url, msg, c)
		}
	}
}

// TestDependencies drives dependencies through the REST API of one node
// (SQLite) and a real receiver: a chain A → B → C fired once, each run
// naming its upstream run in X-Chime-Upstream-Run-ID and upstream_run_id;
// a join of two upstreams that runs only once both have ended their way;
// the graph route; the refusals (no schedule and no after, a bad after, a
// cycle) and the delete rules.
func TestDependencies(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, func(c callback, _ int) int {
		if c.Path == "/fail" {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	n := startNode(t, "n1", nodeConfig{})
	base := n.url("")
	const app = "e2e-deps"

	a := createTimer(t, base, httpTimer(app, "a", "@every 1h", "POST", rcv.url("/a"), "", nil))
	b := createTimer(t, base, afterTimer(app, "b", rcv.url("/b"), a.ID, "success"))
	c := createTimer(t, base, afterTimer(app, "c", rcv.url("/c"), app+"/b", "success")) // by app/name
	e := createTimer(t, base, httpTimer(app, "e", "@every 1h", "POST", rcv.url("/fail"), "", nil))
	j := createTimer(t, base, afterTimer(app, "j", rcv.url("/j"), a.ID, "success", e.ID, "failure"))
	if b.Schedule != "" || len(b.NextFireTimes) != 0 {
		t.Errorf("b: schedule %q, next fires %v; want none", b.Schedule, b.NextFireTimes)
	}
	var got struct {
		After []struct{ Timer, On string } `json:"after"`
	}
	callJSON(t, "GET", base+"/api/v1/timers/"+c.ID, nil, http.StatusOK, &got)
	if len(got.After) != 1 || got.After[0].Timer != b.ID || got.After[0].On != "success" {
		t.Errorf("c's after = %+v, want b's id on success", got.After)
	}

	// The graph of b: a upstream, c downstream.
	var g struct {
		Upstreams []struct {
			Timer struct{ ID, Name string } `json:"timer"`
			On    string                    `json:"on"`
		} `json:"upstreams"`
		Downstreams []struct {
			Timer struct{ ID, Name string } `json:"timer"`
			On    string                    `json:"on"`
		} `json:"downstreams"`
	}
	callJSON(t, "GET", base+"/api/v1/timers/"+b.ID+"/graph", nil, http.StatusOK, &g)
	if len(g.Upstreams) != 1 || g.Upstreams[0].Timer.ID != a.ID || len(g.Downstreams) != 1 || g.Downstreams[0].Timer.Name != "c" {
		t.Errorf("graph of b = %+v", g)
	}

	// The chain, from one trigger of a.
	var ra depRun
	callJSON(t, "POST", base+"/api/v1/timers/"+a.ID+"/trigger", nil, http.StatusCreated, &ra)
	waitUntil(t, 15*time.Second, "c's callback", func() (bool, string) {
		return len(forTimer(rcv.snapshot(), c.ID)) > 0, fmt.Sprintf("%d callbacks", len(rcv.snapshot()))
	})
	calls := rcv.snapshot()
	cb, cc := forTimer(calls, b.ID), forTimer(calls, c.ID)
	if len(forTimer(calls, a.ID)) != 1 || len(cb) != 1 || len(cc) != 1 {
		t.Fatalf("callbacks a %d, b %d, c %d; want one each", len(forTimer(calls, a.ID)), len(cb), len(cc))
	}
	if up := cb[0].Header.Get("X-Chime-Upstream-Run-ID"); up != ra.ID {
		t.Errorf("b's X-Chime-Upstream-Run-ID %q, want a's run %s", up, ra.ID)
	}
	if up := cc[0].Header.Get("X-Chime-Upstream-Run-ID"); up != cb[0].RunID {
		t.Errorf("c's X-Chime-Upstream-Run-ID %q, want b's run %s", up, cb[0].RunID)
	}
	if h := forTimer(calls, a.ID)[0].Header.Get("X-Chime-Upstream-Run-ID"); h != "" {
		t.Errorf("a's callback has X-Chime-Upstream-Run-ID %q", h)
	}
	var rb depRun
	callJSON(t, "GET", base+"/api/v1/runs/"+cb[0].RunID, nil, http.StatusOK, &rb)
	if rb.UpstreamRunID != ra.ID || rb.TimerID != b.ID {
		t.Errorf("b's run = %+v, want upstream_run_id %s", rb, ra.ID)
	}
	// The join: a's success alone made no run of j (in the transaction
	// that made b's).
	if runs := depRuns(t, base, j.ID); len(runs) != 0 {
		t.Errorf("j ran after a alone: %+v", runs)
	}
	var re depRun
	callJSON(t, "POST", base+"/api/v1/timers/"+e.ID+"/trigger", nil, http.StatusCreated, &re)
	waitUntil(t, 15*time.Second, "j's callback", func() (bool, string) {
		return len(forTimer(rcv.snapshot(), j.ID)) > 0, fmt.Sprintf("runs of j %+v", depRuns(t, base, j.ID))
	})
	if runs := depRuns(t, base, j.ID); len(runs) != 1 || runs[0].UpstreamRunID != re.ID {
		t.Errorf("j's runs = %+v, want one after e's failed run %s", runs, re.ID)
	}

	// Refusals.
	noSchedule := httpTimer(app, "x", "", "POST", rcv.url("/x"), "", nil)
	wantError(t, "POST", base+"/api/v1/timers", noSchedule, 400, "schedule", "after")
	wantError(t, "POST", base+"/api/v1/timers", afterTimer(app, "x", rcv.url("/x"), a.ID, "sometimes"), 400, "after[0].on", "success, failure or finish")
	wantError(t, "POST", base+"/api/v1/timers", afterTimer(app, "x", rcv.url("/x"), app+"/nope", "success"), 400, "after[0].timer", "nope")
	wantError(t, "POST", base+"/api/v1/timers", afterTimer(app, "x", rcv.url("/x"), a.ID, "success", app+"/a", "failure"), 400, "after[1].timer", "after[0]")
	cycle := httpTimer(app, "a", "@every 1h", "POST", rcv.url("/a"), "", nil)
	cycle["after"] = []map[string]any{{"timer": c.ID, "on": "finish"}}
	wantError(t, "PUT", base+"/api/v1/timers/"+a.ID, cycle, 400, "after", app+"/a → "+app+"/b → "+app+"/c → "+app+"/a")

	// Delete rules: refused while b and j run after a; cascade=false
	// detaches them.
	wantError(t, "DELETE", base+"/api/v1/timers/"+a.ID, nil, 409, "cascade", app+"/b", app+"/j", "cascade=false")
	wantError(t, "DELETE", base+"/api/v1/timers/"+a.ID+"?cascade=true", nil, 400, "cascade")
	callJSON(t, "GET", base+"/api/v1/timers/"+a.ID, nil, http.StatusOK, nil)
	callJSON(t, "DELETE", base+"/api/v1/timers/"+a.ID+"?cascade=false", nil, http.StatusNoContent, nil)
	got.After = nil
	callJSON(t, "GET", base+"/api/v1/timers/"+b.ID, nil, http.StatusOK, &got)
	if len(got.After) != 0 {
		t.Errorf("b after the detach: after %+v, want none", got.After)
	}
	got.After = nil
	callJSON(t, "GET", base+"/api/v1/timers/"+j.ID, nil, http.StatusOK, &got)
	if len(got.After) != 1 || got.After[0].Timer != e.ID {
		t.Errorf("j after the detach: after %+v, want e alone", got.After)
	}
	// A downstream deleted first leaves its upstream free.
	callJSON(t, "DELETE", base+"/api/v1/timers/"+c.ID, nil, http.StatusNoContent, nil)
	callJSON(t, "DELETE", base+"/api/v1/timers/"+b.ID, nil, http.StatusNoContent, nil)
}

// TestClusterDependencyChainKill runs a chain A → B → C on three nodes
// (MariaDB and Redis), A every second, and SIGKILLs one node mid-way:
// the node that runs A's fires. Every run of A that succeeded makes
// exactly one run of B, each of those one of C, every one of them
// delivered (a redelivery only as a later attempt of the same run),
// whichever node recorded the upstream's end.
func TestClusterDependencyChainKill(t *testing.T) {
	t.Parallel()
	dsn := testenv.MySQLDatabase(t)
	redisURL := testenv.RedisDB(t)
	const (
		runFor    = 12 * time.Second
		killAfter = 5 * time.Second
		app       = "e2e-chain"
	)
	rcv := newReceiver(t, nil)
	extra := []string{"--lock-ttl", "1.5s", "--lease", "5s"}
	var nodes []*node
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("n%d", i)
		nodes = append(nodes, startNode(t, id, nodeConfig{DB: dsn, Redis: redisURL, NodeID: id, Extra: extra}))
	}
	base := nodes[0].url("")
	a := createTimer(t, base, httpTimer(app, "a", "* * * * * *", "POST", rcv.url("/a"), "", nil))
	b := createTimer(t, nodes[1].url(""), afterTimer(app, "b", rcv.url("/b"), a.ID, "success"))
	c := createTimer(t, base, afterTimer(app, "c", rcv.url("/c"), b.ID, "success"))
	t0 := time.Now()

	time.Sleep(time.Until(t0.Add(killAfter))) // behaviour under test: the kill comes mid-chain
	// Kill the node that runs A (it holds A's slice, claims A's next runs
	// ahead and records their ends): the chain must go on from another.
	victim := 2
	for _, r := range depRuns(t, base, a.ID) {
		var i int
		if _, err := fmt.Sscanf(r.Node, "n%d", &i); r.Status == "succeeded" && err == nil && i >= 1 && i <= 3 {
			victim = i - 1
			break
		}
	}
	nodes[victim].stop(syscall.SIGKILL)
	t.Logf("SIGKILL %s (A's last run was its) at +%v", nodes[victim].name, time.Since(t0).Round(time.Millisecond))
	base = nodes[(victim+1)%3].url("")
	time.Sleep(time.Until(t0.Add(runFor))) // behaviour under test: the chain runs on two nodes
	callJSON(t, "POST", base+"/api/v1/timers/"+a.ID+"/disable", nil, http.StatusOK, nil)

	// Every run settles: A's, then B's and C's after them (a run the
	// killed node held is taken over after its lease).
	settled := func(runs []depRun) bool {
		for _, r := range runs {
			if r.Status == "pending" || r.Status == "running" {
				return false
			}
		}
		return true
	}
	waitUntil(t, 40*time.Second, "the chain to settle", func() (bool, string) {
		ra, rb, rc := depRuns(t, base, a.ID), depRuns(t, base, b.ID), depRuns(t, base, c.ID)
		okA, okB := 0, 0
		for _, r := range ra {
			if r.Status == "succeeded" {
				okA++
			}
		}
		for _, r := range rb {
			if r.Status == "succeeded" {
				okB++
			}
		}
		return settled(ra) && settled(rb) && settled(rc) && len(rb) == okA && len(rc) == okB,
			fmt.Sprintf("a %d runs (%d succeeded), b %d (%d succeeded), c %d", len(ra), okA, len(rb), okB, len(rc))
	})

	ra, rb, rc := depRuns(t, base, a.ID), depRuns(t, base, b.ID), depRuns(t, base, c.ID)
	// One downstream run per upstream success, naming it.
	check := func(what string, ups, downs []depRun) {
		t.Helper()
		succeeded := map[string]bool{}
		for _, r := range ups {
			if r.Status == "succeeded" {
				succeeded[r.ID] = true
			}
		}
		made := map[string]int{}
		retried := 0
		for _, r := range ups {
			if r.Attempt > 1 {
				retried++
			}
		}
		for _, r := range downs {
			made[r.UpstreamRunID]++
			if !succeeded[r.UpstreamRunID] {
				t.Errorf("%s: run %s after %q, not a succeeded upstream run", what, r.ID, r.UpstreamRunID)
			}
			if r.Status != "succeeded" {
				t.Errorf("%s: run %s %s (attempt %d)", what, r.ID, r.Status, r.Attempt)
			}
		}
		for id := range succeeded {
			if made[id] != 1 {
				t.Errorf("%s: upstream run %s made %d runs, want 1", what, id, made[id])
			}
		}
		t.Logf("%s: %d upstream successes (%d at attempt > 1, taken over from the killed node), %d runs", what, len(succeeded), retried, len(downs))
	}
	if len(ra) < 8 {
		t.Errorf("a ran %d times in %v", len(ra), runFor)
	}
	check("a → b", ra, rb)
	check("b → c", rb, rc)

	// Deliveries: each run of B and C arrived, with its upstream run in
	// X-Chime-Upstream-Run-ID; a run id twice only as a later attempt.
	calls := rcv.snapshot()
	for _, tm := range []struct {
		name string
		id   string
		runs []depRun
	}{{"b", b.ID, rb}, {"c", c.ID, rc}} {
		upOf := map[string]string{}
		for _, r := range tm.runs {
			upOf[r.ID] = r.UpstreamRunID
		}
		attempts := map[string]map[int]bool{}
		for _, cl := range forTimer(calls, tm.id) {
			if cl.Header.Get("X-Chime-Upstream-Run-ID") != upOf[cl.RunID] {
				t.Errorf("%s: callback %v: X-Chime-Upstream-Run-ID %q, want %q", tm.name, cl, cl.Header.Get("X-Chime-Upstream-Run-ID"), upOf[cl.RunID])
			}
			if attempts[cl.RunID] == nil {
				attempts[cl.RunID] = map[int]bool{}
			}
			if attempts[cl.RunID][cl.Attempt] {
				t.Errorf("%s: run %s attempt %d delivered twice", tm.name, cl.RunID, cl.Attempt)
			}
			attempts[cl.RunID][cl.Attempt] = true
		}
		for id := range upOf {
			if len(attempts[id]) == 0 {
				t.Errorf("%s: run %s never delivered", tm.name, id)
			}
		}
	}
}

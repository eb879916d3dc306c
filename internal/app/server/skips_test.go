package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/model"
)

// apiRun is what these tests read of a run.
type apiRun struct {
	ID          string    `json:"id"`
	Status      string    `json:"status"`
	Reason      string    `json:"reason"`
	Error       string    `json:"error"`
	ScheduledAt time.Time `json:"scheduled_at"`
}

// runsOf lists a timer's runs (newest first) with the query q.
func runsOf(t *testing.T, base, id, q string) []apiRun {
	t.Helper()
	code, b := call(t, "GET", base+"/api/v1/timers/"+id+"/runs?limit=1000&"+q, nil)
	if code != 200 {
		t.Fatalf("runs of %s: %d %s", id, code, b)
	}
	var out struct{ Runs []apiRun }
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out.Runs
}

// skippedFor waits for a skipped run of timer id with reason, and checks
// that every run GET ...?status=skipped lists is skipped with a reason.
func skippedFor(t *testing.T, base, id, reason string) []apiRun {
	t.Helper()
	var found []apiRun
	testenv.Eventually(t, 20*time.Second, "a run skipped for "+reason, func() (bool, string) {
		found = found[:0]
		runs := runsOf(t, base, id, "status=skipped")
		for _, r := range runs {
			if r.Status != "skipped" || r.Reason == "" || r.Error == "" {
				t.Fatalf("?status=skipped lists %+v", r)
			}
			if r.Reason == reason {
				found = append(found, r)
			}
		}
		return len(found) > 0, ""
	})
	return found
}

// skippedMetric returns the chime_fires_skipped_total line of reason on
// /metrics, or "".
func skippedMetric(t *testing.T, base, reason string) string {
	t.Helper()
	_, b := call(t, "GET", base+"/metrics", nil)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, `chime_fires_skipped_total{reason="`+reason+`"}`) {
			return l
		}
	}
	return ""
}

// TestSkipReasonsThroughAPI: every fire that does not run has a skipped
// run with its reason, listed by GET /api/v1/timers/{id}/runs?status=skipped
// and counted by chime_fires_skipped_total: the overlap policy, max_fires,
// a pause, and, across an outage of the node, the misfire policy and the
// catchup window.
func TestSkipReasonsThroughAPI(t *testing.T) {
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer recv.Close()
	dir := t.TempDir()
	cfg := Config{DataDir: dir, DB: "sqlite://" + filepath.Join(dir, "chime.db"), AllowShell: true,
		PlanAhead: 2 * time.Second, PlanFires: 1}
	base, stop := runServer(t, cfg)
	create := func(name string, extra map[string]any) string {
		t.Helper()
		body := map[string]any{"app": "skips", "name": name, "schedule": "* * * * * *",
			"action": map[string]any{"type": "http", "http": map[string]any{"url": recv.URL + "/" + name}}}
		for k, v := range extra {
			body[k] = v
		}
		code, b := call(t, "POST", base+"/api/v1/timers", body)
		return createdID(t, code, b)
	}
	overlap := create("overlap", map[string]any{"policy": map[string]any{"overlap": "skip"},
		"action": map[string]any{"type": "shell", "shell": map[string]any{"command": "sleep", "args": []string{"1.6"}}}})
	maxed := create("max", map[string]any{"policy": map[string]any{"max_fires": 1}})
	misfire := create("misfire", map[string]any{"policy": map[string]any{"misfire": "skip"}})
	window := create("window", map[string]any{"policy": map[string]any{"catchup_window": "1s"}})

	skippedFor(t, base, overlap, "overlap")
	for _, r := range skippedFor(t, base, maxed, "max_fires") {
		if !strings.Contains(r.Error, "max_fires 1") {
			t.Errorf("max_fires skip error %q", r.Error)
		}
	}
	testenv.Eventually(t, 20*time.Second, "the max_fires timer disabled", func() (bool, string) {
		_, b := call(t, "GET", base+"/api/v1/timers/"+maxed, nil)
		return strings.Contains(string(b), `"enabled":false`), string(b)
	})
	if l := skippedMetric(t, base, "overlap"); l == "" {
		t.Error("no chime_fires_skipped_total for overlap")
	}

	// The outage: fires missed while no node ran, found by the planner.
	// A fire found at most model.MisfireGrace late runs whatever the
	// policy, so the outage lasts longer than the grace.
	stop()
	down := time.Now()
	time.Sleep(model.MisfireGrace + 2*time.Second) // the outage is the behaviour under test
	base, _ = runServer(t, cfg)
	for _, r := range skippedFor(t, base, misfire, "misfire") {
		if !r.ScheduledAt.After(down) && r.ScheduledAt.Before(down.Add(-3*time.Second)) {
			t.Errorf("misfire skip at %v, before the outage at %v", r.ScheduledAt, down)
		}
	}
	skippedFor(t, base, window, "catchup_window")
	testenv.Eventually(t, 20*time.Second, "the misfire skips counted", func() (bool, string) {
		return skippedMetric(t, base, "misfire") != "" && skippedMetric(t, base, "catchup_window") != "", ""
	})
}

// TestPauseResumeThroughAPI: a paused timer stays enabled with its
// schedule, its fires are recorded skipped (reason paused) instead of
// running, and a resume runs the next fire without catching the paused
// ones up; an app's pause and resume do the same for each of its timers.
func TestPauseResumeThroughAPI(t *testing.T) {
	calls := make(chan time.Time, 1000)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at, _ := time.Parse(time.RFC3339Nano, r.Header.Get("X-Chime-Scheduled-At"))
		calls <- at
	}))
	defer recv.Close()
	base := startServer(t, Config{})
	code, b := call(t, "POST", base+"/api/v1/timers", map[string]any{"app": "p", "name": "tick", "schedule": "* * * * * *",
		"action": map[string]any{"type": "http", "http": map[string]any{"url": recv.URL}}})
	id := createdID(t, code, b)
	select {
	case <-calls:
	case <-time.After(10 * time.Second):
		t.Fatal("no first fire")
	}

	code, b = call(t, "POST", base+"/api/v1/timers/"+id+"/pause", nil)
	var tm map[string]any
	json.Unmarshal(b, &tm)
	if code != 200 || tm["paused"] != true || tm["enabled"] != true || tm["schedule"] != "* * * * * *" {
		t.Fatalf("pause: %d %s", code, b)
	}
	pausedAt := time.Now()
	// Fires due while paused are recorded, counted, and not run.
	testenv.Eventually(t, 20*time.Second, "past fires recorded paused and counted", func() (bool, string) {
		n := 0
		for _, r := range runsOf(t, base, id, "status=skipped") {
			if r.Reason == "paused" && r.ScheduledAt.Before(time.Now()) && r.ScheduledAt.After(pausedAt.Add(time.Second)) {
				n++
			}
		}
		return n >= 3 && skippedMetric(t, base, "paused") != "", ""
	})
	// A fire is recorded skipped when it comes, never ahead; the plan
	// ahead stays pending, the upcoming fires.
	now := time.Now()
	for _, r := range runsOf(t, base, id, "status=skipped") {
		if r.ScheduledAt.After(now) {
			t.Errorf("a fire to come recorded skipped while paused: %+v", r)
		}
	}
	if up := runsOf(t, base, id, "view=upcoming"); len(up) == 0 {
		t.Error("no upcoming fires while paused, want its plan")
	}
	code, b = call(t, "POST", base+"/api/v1/timers/"+id+"/resume", nil)
	if code != 200 || !strings.Contains(string(b), `"paused":false`) {
		t.Fatalf("resume: %d %s", code, b)
	}
	resumedAt := time.Now()
	// The next fire after the resume runs; none of the paused ones does.
	testenv.Eventually(t, 10*time.Second, "a fire after the resume", func() (bool, string) {
		for {
			select {
			case at := <-calls:
				if at.After(pausedAt.Add(time.Second)) && at.Before(resumedAt.Add(-time.Second)) {
					t.Errorf("a fire at %v, while paused (%v to %v), ran", at, pausedAt, resumedAt)
				}
				if at.After(resumedAt) {
					return true, ""
				}
			default:
				return false, ""
			}
		}
	})
	for _, r := range runsOf(t, base, id, "status=skipped") {
		if r.ScheduledAt.After(resumedAt.Add(time.Second)) {
			t.Errorf("run at %v, after the resume, is still skipped: %+v", r.ScheduledAt, r)
		}
	}

	// An app's pause and resume: each of its timers, answering what changed.
	code, b = call(t, "POST", base+"/api/v1/apps/p/pause", nil)
	if code != 200 || !strings.Contains(string(b), `"changed":["`+id+`"]`) {
		t.Fatalf("app pause: %d %s", code, b)
	}
	code, b = call(t, "POST", base+"/api/v1/apps/p/pause", nil)
	if code != 200 || !strings.Contains(string(b), `"changed":[]`) || !strings.Contains(string(b), "already paused") {
		t.Fatalf("app pause again: %d %s", code, b)
	}
	code, b = call(t, "POST", base+"/api/v1/apps/p/resume", nil)
	if code != 200 || !strings.Contains(string(b), `"changed":["`+id+`"]`) {
		t.Fatalf("app resume: %d %s", code, b)
	}
}

// TestDisableDropsPlannedFires: disabling a timer deletes its planned
// fires (none is left pending or cancelled ahead, none upcoming); the runs
// that came stay in its history.
func TestDisableDropsPlannedFires(t *testing.T) {
	t.Parallel()
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer recv.Close()
	base := startServer(t, Config{})
	code, b := call(t, "POST", base+"/api/v1/timers", map[string]any{"app": "d", "name": "tick", "schedule": "* * * * * *",
		"action": map[string]any{"type": "http", "http": map[string]any{"url": recv.URL}}})
	id := createdID(t, code, b)
	testenv.Eventually(t, 10*time.Second, "a fire that came and planned ones ahead", func() (bool, string) {
		return len(runsOf(t, base, id, "view=history&status=succeeded")) > 0 && len(runsOf(t, base, id, "view=upcoming")) > 0, ""
	})
	if code, b := call(t, "POST", base+"/api/v1/timers/"+id+"/disable", nil); code != 200 {
		t.Fatalf("disable: %d %s", code, b)
	}
	now := time.Now()
	if up := runsOf(t, base, id, "view=upcoming"); len(up) != 0 {
		t.Errorf("upcoming fires of a disabled timer: %+v", up)
	}
	for _, r := range runsOf(t, base, id, "") {
		// A run a node claimed ahead of its instant before the disable
		// runs: it is not a planned fire any more.
		if r.ScheduledAt.After(now) && (r.Status == "pending" || r.Status == "cancelled") {
			t.Errorf("a run ahead of a disabled timer: %+v", r)
		}
	}
	if h := runsOf(t, base, id, "view=history&status=succeeded"); len(h) == 0 {
		t.Error("the disable lost the timer's history")
	}
}

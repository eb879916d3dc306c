package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/testenv"
)

// maxDelay is the loose bound on how late a callback may arrive after its
// scheduled instant on a healthy node (precision itself is the bench's job).
const maxDelay = 500 * time.Millisecond

// earlySlack is how much earlier than its instant a callback may arrive
// (same host, same clock: none, but leave room for rounding).
const earlySlack = 5 * time.Millisecond

// TestCallbackFiresOnceWithHeaders registers a cron, an @every and an @at
// timer on one SQLite node and checks every callback: once per run id, the
// right headers, method, body and custom header, close to its instant, and
// visible as succeeded in the runs API.
func TestCallbackFiresOnceWithHeaders(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, nil)
	n := startNode(t, "single", nodeConfig{})
	base := n.url("")

	at := time.Now().Add(3 * time.Second).Truncate(time.Second).UTC()
	cron := createTimer(t, base, httpTimer("e2e", "cron", "* * * * * *", "POST", rcv.url("/cron"), "cron-body", nil))
	every := createTimer(t, base, httpTimer("e2e", "every", "@every 2s", "GET", rcv.url("/every"), "", nil))
	oneShot := createTimer(t, base, httpTimer("e2e", "at", "@at "+at.Format(time.RFC3339), "POST", rcv.url("/at"),
		`{"k": 1, "s": "as written"}`, map[string]string{"X-E2e-Custom": "custom value"}))
	created := time.Now()

	type want struct {
		tm     timerResp
		path   string
		method string
		body   string
		header map[string]string
		min    int // callbacks to wait for
	}
	wants := []want{
		{cron, "/cron", "POST", "cron-body", nil, 6},
		{every, "/every", "GET", "", nil, 3},
		{oneShot, "/at", "POST", `{"k": 1, "s": "as written"}`, map[string]string{"X-E2e-Custom": "custom value"}, 1},
	}
	waitUntil(t, 20*time.Second, "callbacks of every timer", func() (bool, string) {
		calls := rcv.snapshot()
		var missing []string
		for _, w := range wants {
			if got := len(forTimer(calls, w.tm.ID)); got < w.min {
				missing = append(missing, fmt.Sprintf("%s: %d of %d", w.tm.Name, got, w.min))
			}
		}
		return len(missing) == 0, strings.Join(missing, ", ")
	})
	t.Logf("observed %v after creating the timers", time.Since(created).Round(time.Millisecond))

	calls := rcv.snapshot()
	ids := map[string]bool{cron.ID: true, every.ID: true, oneShot.ID: true}
	seen := map[string]callback{}
	for _, c := range calls {
		if !ids[c.TimerID] {
			t.Errorf("callback with unknown X-Chime-Timer-ID %q: %v", c.TimerID, c)
		}
		if prev, dup := seen[c.RunID]; dup {
			t.Errorf("run id %s delivered twice:\n  %v\n  %v", c.RunID, prev, c)
		}
		seen[c.RunID] = c
		if c.RunID == "" {
			t.Errorf("callback without X-Chime-Run-ID: %v", c)
		}
		if c.ScheduledAt.IsZero() {
			t.Errorf("X-Chime-Scheduled-At %q is not RFC 3339: %v", c.ScheduledRaw, c)
			continue
		}
		if c.Attempt != 1 {
			t.Errorf("X-Chime-Attempt = %q, want 1: %v", c.Header.Get("X-Chime-Attempt"), c)
		}
		if d := c.Delay(); d < -earlySlack || d > maxDelay {
			t.Errorf("callback arrived %v after its instant, want within [0, %v]: %v", d, maxDelay, c)
		}
	}

	for _, w := range wants {
		got := forTimer(calls, w.tm.ID)
		for _, c := range got {
			if c.Path != w.path {
				t.Errorf("%s: callback to %s, want %s", w.tm.Name, c.Path, w.path)
			}
			if c.Method != w.method {
				t.Errorf("%s: method %s, want %s", w.tm.Name, c.Method, w.method)
			}
			if c.Body != w.body {
				t.Errorf("%s: body %q, want %q", w.tm.Name, c.Body, w.body)
			}
			for k, v := range w.header {
				if g := c.Header.Get(k); g != v {
					t.Errorf("%s: header %s = %q, want %q", w.tm.Name, k, g, v)
				}
			}
		}
		// The instants: each timer's fires, in order, are exactly its
		// expected fire times from creation on, with none missing.
		var instants []time.Time
		for _, c := range got {
			instants = append(instants, c.ScheduledAt)
		}
		slices.SortFunc(instants, time.Time.Compare)
		if len(instants) == 0 {
			continue
		}
		var expected []time.Time
		switch w.tm.ID {
		case cron.ID:
			for ts := instants[0]; !ts.After(instants[len(instants)-1]); ts = ts.Add(time.Second) {
				expected = append(expected, ts)
			}
			// An instant that passed between the create and the answer may
			// fire but is not in next_fire_times; from that list on, all must.
			if !instants[0].After(w.tm.CreatedAt) || instants[0].After(w.tm.NextFireTimes[0]) {
				t.Errorf("cron: first fire %v, want after created_at %v and at most the first of next_fire_times %v",
					instants[0], w.tm.CreatedAt, w.tm.NextFireTimes[0])
			}
			for _, ts := range instants {
				if ts.Nanosecond() != 0 {
					t.Errorf("cron: scheduled-at %v is not a whole second", ts)
				}
			}
		case every.ID:
			for ts := w.tm.NextFireTimes[0]; !ts.After(instants[len(instants)-1]); ts = ts.Add(2 * time.Second) {
				expected = append(expected, ts)
			}
		case oneShot.ID:
			expected = []time.Time{at}
		}
		if !slices.EqualFunc(instants, expected, time.Time.Equal) {
			t.Errorf("%s: fired at %v, want %v", w.tm.Name, fmtTimes(instants), fmtTimes(expected))
		}
	}

	// The runs API shows every delivered run as succeeded, attempt 1.
	for _, w := range wants {
		var last string
		waitUntil(t, 10*time.Second, w.tm.Name+" runs succeeded in the API", func() (bool, string) {
			runs := map[string]runResp{}
			for _, r := range timerRuns(t, base, w.tm.ID) {
				runs[r.ID] = r
			}
			var bad []string
			for _, c := range forTimer(calls, w.tm.ID) {
				r, ok := runs[c.RunID]
				switch {
				case !ok:
					bad = append(bad, c.RunID+" missing")
				case r.Status != "succeeded" || r.Attempt != 1 || r.TimerID != w.tm.ID || !r.ScheduledAt.Equal(c.ScheduledAt):
					bad = append(bad, fmt.Sprintf("%s: status %s attempt %d timer %s scheduled %v (callback said %v)",
						r.ID, r.Status, r.Attempt, r.TimerID, r.ScheduledAt, c.ScheduledAt))
				}
			}
			last = strings.Join(bad, "; ")
			return len(bad) == 0, last
		})
	}

	// Late duplicates: nothing more for the one-shot, and still no run id twice.
	final := rcv.snapshot()
	if got := len(forTimer(final, oneShot.ID)); got != 1 {
		t.Errorf("one-shot timer fired %d times, want 1", got)
	}
	counts := map[string]int{}
	for _, c := range final {
		counts[c.RunID]++
	}
	for id, k := range counts {
		if k > 1 {
			t.Errorf("run id %s delivered %d times", id, k)
		}
	}
}

func fmtTimes(ts []time.Time) string {
	var s []string
	for _, x := range ts {
		s = append(s, x.UTC().Format("15:04:05.000"))
	}
	return "[" + strings.Join(s, " ") + "]"
}

// TestKillAndRestart stops a node with an every-second timer mid-schedule,
// keeps it down ~3 s, starts it again on the same data dir and database, and
// checks the fires: every instant received, the outage's ones late and once,
// no run id twice.
func TestKillAndRestart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
	}{
		{"SIGKILL", syscall.SIGKILL},
		{"SIGTERM", syscall.SIGTERM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testKillAndRestart(t, tc.sig)
		})
	}
}

func testKillAndRestart(t *testing.T, sig syscall.Signal) {
	const outage = 3 * time.Second
	rcv := newReceiver(t, nil)
	dir := filepath.Join(t.TempDir(), "data")
	// A short lease, so that a run in flight at the kill is recovered
	// within the test.
	n := startNode(t, "node", nodeConfig{DataDir: dir, Extra: []string{"--lease", "4s"}})
	tm := createTimer(t, n.url(""), httpTimer("e2e", "tick", "* * * * * *", "POST", rcv.url("/tick"), "tick", nil))

	waitUntil(t, 10*time.Second, "3 fires before the stop", func() (bool, string) {
		k := len(rcv.snapshot())
		return k >= 3, fmt.Sprintf("%d fires", k)
	})
	// Stop at a random point within a second, not right at a fire.
	time.Sleep(time.Duration(time.Now().UnixNano()%700) * time.Millisecond) // behaviour under test: a random point of the second
	stopAt := time.Now()
	n.stop(sig)
	stopped := time.Now()
	t.Logf("%v at %s (exited after %v)", sig, stopAt.Format("15:04:05.000"), stopped.Sub(stopAt).Round(time.Millisecond))

	time.Sleep(outage) // behaviour under test: the outage itself
	restartAt := time.Now()
	n.start()
	n.waitReady(30 * time.Second)
	readyAt := time.Now()
	t.Logf("restarted at %s, ready after %v", restartAt.Format("15:04:05.000"), readyAt.Sub(restartAt).Round(time.Millisecond))

	// Run until a fire at least 4 s after the restart arrives and the lease
	// of anything in flight at the kill has long expired.
	endInstant := readyAt.Add(4 * time.Second).Truncate(time.Second)
	waitUntil(t, 20*time.Second, "a fire 4 s after the restart", func() (bool, string) {
		for _, c := range rcv.snapshot() {
			if !c.ScheduledAt.Before(endInstant) {
				return true, ""
			}
		}
		return false, "none at or after " + endInstant.Format("15:04:05")
	})
	apiRuns := timerRuns(t, n.url(""), tm.ID)
	n.stop(syscall.SIGTERM)
	calls := rcv.snapshot()

	// In flight at a SIGKILL: an instant shortly before the kill whose
	// callback may or may not have been made or recorded.
	inFlight := func(ts time.Time) bool {
		return sig == syscall.SIGKILL && !ts.After(stopAt) && ts.After(stopAt.Add(-2*time.Second))
	}
	// claimedAhead: a run due just after a SIGKILL may have been claimed
	// (the trigger claims up to 500 ms ahead) and not started; it is
	// recovered after its lease and delivered once, as attempt 2, since the
	// store cannot know that attempt 1 never ran.
	claimedAhead := func(ts time.Time) bool {
		return sig == syscall.SIGKILL && ts.After(stopAt) && !ts.After(stopAt.Add(time.Second))
	}

	byRun := map[string][]callback{}
	byInstant := map[int64][]string{} // instant → distinct run ids
	first, last := calls[0].ScheduledAt, calls[0].ScheduledAt
	for _, c := range calls {
		if c.TimerID != tm.ID {
			t.Errorf("callback for unknown timer: %v", c)
		}
		if len(byRun[c.RunID]) == 0 {
			byInstant[c.ScheduledAt.UnixNano()] = append(byInstant[c.ScheduledAt.UnixNano()], c.RunID)
		}
		byRun[c.RunID] = append(byRun[c.RunID], c)
		if c.ScheduledAt.Before(first) {
			first = c.ScheduledAt
		}
		if c.ScheduledAt.After(last) {
			last = c.ScheduledAt
		}
	}
	if !first.After(tm.CreatedAt) || first.After(tm.NextFireTimes[0]) {
		t.Errorf("first fire at %v, want after created_at %v and at most the first of next_fire_times %v",
			first, tm.CreatedAt, tm.NextFireTimes[0])
	}

	var lateOutage []string
	for ts := first; !ts.After(last); ts = ts.Add(time.Second) {
		runs := byInstant[ts.UnixNano()]
		switch {
		case len(runs) == 0 && inFlight(ts):
			t.Logf("instant %s (in flight at the kill) was not delivered", ts.Format("15:04:05"))
		case len(runs) == 0:
			t.Errorf("instant %s was never delivered (stop at %s, restart at %s)",
				ts.Format("15:04:05"), stopAt.Format("15:04:05.000"), restartAt.Format("15:04:05.000"))
		case len(runs) > 1:
			t.Errorf("instant %s delivered under %d run ids %v: a double fire", ts.Format("15:04:05"), len(runs), runs)
		}
		if ts.After(stopAt) && ts.Before(restartAt) {
			for _, id := range runs {
				for _, c := range byRun[id] {
					if c.Received.Before(restartAt) {
						t.Errorf("outage instant received before the restart: %v", c)
					}
					lateOutage = append(lateOutage, fmt.Sprintf("%s+%v", ts.Format("05"), c.Delay().Round(time.Millisecond)))
				}
			}
		}
	}
	t.Logf("outage instants delivered late (second+lateness): %v", lateOutage)
	// The runs API records the outage's runs as succeeded, with their
	// nominal instant kept and the lateness visible in started_at.
	for _, r := range apiRuns {
		if !r.ScheduledAt.After(stopAt) || !r.ScheduledAt.Before(restartAt) {
			continue
		}
		switch {
		case r.Status != "succeeded":
			t.Errorf("outage run %s (%s): status %s, want succeeded", r.ID, r.ScheduledAt.Format("15:04:05"), r.Status)
		case r.StartedAt == nil || r.StartedAt.Before(restartAt):
			t.Errorf("outage run %s (%s): started_at %v, want after the restart at %s",
				r.ID, r.ScheduledAt.Format("15:04:05"), r.StartedAt, restartAt.Format("15:04:05.000"))
		}
	}
	if len(lateOutage) < int(outage/time.Second)-1 {
		t.Errorf("only %d outage instants delivered, want about %d", len(lateOutage), int(outage/time.Second))
	}

	var dupRuns []string
	for id, cs := range byRun {
		if len(cs) == 1 {
			switch {
			case cs[0].Attempt != 1 && claimedAhead(cs[0].ScheduledAt):
				t.Logf("NOTE: claimed ahead of the kill, recovered after the lease: run %s attempt %d", id, cs[0].Attempt)
			case cs[0].Attempt != 1:
				t.Errorf("run %s delivered once with attempt %d", id, cs[0].Attempt)
			}
			continue
		}
		desc := fmt.Sprintf("run %s (scheduled %s) delivered %d times:", id, cs[0].ScheduledAt.Format("15:04:05"), len(cs))
		for _, c := range cs {
			desc += fmt.Sprintf(" [attempt %d at %s]", c.Attempt, c.Received.Format("15:04:05.000"))
		}
		dupRuns = append(dupRuns, desc)
		if inFlight(cs[0].ScheduledAt) && cs[len(cs)-1].Attempt > 1 {
			t.Logf("NOTE: in flight at the kill, redelivered after the lease: %s", desc)
		} else {
			t.Errorf("duplicate delivery: %s", desc)
		}
	}
	sort.Strings(dupRuns)
	t.Logf("%d instants from %s to %s, %d callbacks, %d run ids delivered more than once",
		len(byInstant), first.Format("15:04:05"), last.Format("15:04:05"), len(calls), len(dupRuns))
}

// TestRetryHeaders makes a one-shot timer's receiver fail twice: the run is
// retried with the same run id and attempts 1, 2, 3, after the backoff, and
// ends succeeded with attempt 3.
func TestRetryHeaders(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, func(c callback, nth int) int {
		if nth <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	n := startNode(t, "retry", nodeConfig{})
	at := time.Now().Add(3 * time.Second).Truncate(time.Second).UTC()
	req := httpTimer("e2e", "retry", "@at "+at.Format(time.RFC3339), "POST", rcv.url("/retry"), "retry-body", nil)
	req["retry"] = map[string]any{"max_attempts": 3, "backoff": "200ms"}
	tm := createTimer(t, n.url(""), req)

	waitUntil(t, 15*time.Second, "3 callbacks", func() (bool, string) {
		k := len(rcv.snapshot())
		return k >= 3, fmt.Sprintf("%d callbacks", k)
	})
	var run runResp
	waitUntil(t, 10*time.Second, "the run to end", func() (bool, string) {
		runs := timerRuns(t, n.url(""), tm.ID)
		if len(runs) != 1 {
			return false, fmt.Sprintf("%d runs", len(runs))
		}
		run = runs[0]
		return run.Status == "succeeded" || run.Status == "failed", run.Status
	})
	calls := rcv.snapshot()
	if len(calls) != 3 {
		t.Fatalf("%d callbacks, want 3: %v", len(calls), calls)
	}
	for i, c := range calls {
		if c.RunID != calls[0].RunID || c.RunID == "" {
			t.Errorf("callback %d has run id %q, want %q (the same for every attempt)", i+1, c.RunID, calls[0].RunID)
		}
		if c.TimerID != tm.ID {
			t.Errorf("callback %d has timer id %q, want %q", i+1, c.TimerID, tm.ID)
		}
		if c.Attempt != i+1 {
			t.Errorf("callback %d has X-Chime-Attempt %d, want %d", i+1, c.Attempt, i+1)
		}
		if !c.ScheduledAt.Equal(at) {
			t.Errorf("callback %d has X-Chime-Scheduled-At %s, want %s (the nominal instant, every attempt)", i+1, c.ScheduledRaw, at.Format(time.RFC3339Nano))
		}
		if c.Body != "retry-body" {
			t.Errorf("callback %d has body %q", i+1, c.Body)
		}
	}
	// Backoff: retry n waits backoff·2^(n-1) after the failure, with ±20%
	// jitter (executor.jitter).
	for i, d := range []time.Duration{200 * time.Millisecond, 400 * time.Millisecond} {
		lo, hi := d-d/5-10*time.Millisecond, d+d/5+maxDelay
		if gap := calls[i+1].Received.Sub(calls[i].Received); gap < lo || gap > hi {
			t.Errorf("attempt %d came %v after attempt %d, want %v ±20%% (within [%v, %v])", i+2, gap, i+1, d, lo, hi)
		}
	}
	if d := calls[0].Delay(); d < -earlySlack || d > maxDelay {
		t.Errorf("first attempt %v after its instant, want within %v", d, maxDelay)
	}
	if run.ID != calls[0].RunID || run.Status != "succeeded" || run.Attempt != 3 {
		t.Errorf("run %s: status %s attempt %d error %q; want run %s succeeded with attempt 3",
			run.ID, run.Status, run.Attempt, run.Error, calls[0].RunID)
	}
}

// TestBadRequests sends invalid requests to the real binary and checks the
// 4xx status and the error JSON.
func TestBadRequests(t *testing.T) {
	t.Parallel()
	n := startNode(t, "api", nodeConfig{})
	base := n.url("/api/v1")
	valid := func(name string) map[string]any {
		m := httpTimer("e2e", name, "@every 1h", "POST", "http://127.0.0.1:9/hook", "", nil)
		m["enabled"] = false
		return m
	}
	with := func(k string, v any) map[string]any {
		m := valid("bad")
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	withURL := func(u string) map[string]any {
		m := valid("bad")
		m["action"] = map[string]any{"type": "http", "http": map[string]any{"method": "POST", "url": u}}
		return m
	}
	existing := createTimer(t, n.url(""), valid("existing"))

	tests := []struct {
		name      string
		method    string
		path      string
		body      any
		wantCode  int
		wantField string // "" = no field
		wantMsg   string // substring of the message
	}{
		{"bad schedule", "POST", "/timers", with("schedule", "0 24 * * *"), 400, "schedule", "hour: 24 is out of range 0-23"},
		{"unknown zone", "POST", "/timers", with("timezone", "Mars/Olympus"), 400, "timezone", "unknown time zone"},
		{"ftp url", "POST", "/timers", withURL("ftp://example.test/x"), 400, "action.http.url", "http or https"},
		{"relative url", "POST", "/timers", withURL("/hook"), 400, "action.http.url", "absolute"},
		{"missing name", "POST", "/timers", with("name", nil), 400, "name", "is required"},
		{"unknown field", "POST", "/timers", with("colour", "red"), 400, "colour", "unknown field"},
		{"bad JSON", "POST", "/timers", `{"app":`, 400, "", "invalid JSON"},
		{"duplicate app and name", "POST", "/timers", valid("existing"), 409, "name", "already exists"},
		{"unknown timer", "GET", "/timers/01JNX8Q4Z3M0K9W6V5T2R1P0NB", nil, 404, "", "not found"},
		{"put id mismatch", "PUT", "/timers/" + existing.ID, with("id", "OTHER"), 400, "id", "does not match"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, body := call(t, tc.method, base+tc.path, tc.body)
			if code != tc.wantCode {
				t.Errorf("%s %s: status %d, want %d; body %s", tc.method, tc.path, code, tc.wantCode, body)
			}
			var e struct {
				Error *struct {
					Field   *string `json:"field"`
					Message string  `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &e); err != nil || e.Error == nil {
				t.Fatalf("answer %s is not the error shape {\"error\":{...}} (%v)", body, err)
			}
			field := ""
			if e.Error.Field != nil {
				field = *e.Error.Field
			}
			if field != tc.wantField {
				t.Errorf("error.field = %q, want %q; body %s", field, tc.wantField, body)
			}
			if e.Error.Message == "" || !strings.Contains(e.Error.Message, tc.wantMsg) {
				t.Errorf("error.message = %q, want it to contain %q", e.Error.Message, tc.wantMsg)
			}
		})
	}
	// Nothing was created by the bad requests.
	var list struct {
		Timers []timerResp `json:"timers"`
	}
	t.Cleanup(func() {
		callJSON(t, "GET", base+"/timers?app=e2e", nil, http.StatusOK, &list)
		if len(list.Timers) != 1 || list.Timers[0].ID != existing.ID {
			t.Errorf("after the bad requests the timers are %+v, want only %s", list.Timers, existing.ID)
		}
	})
}

// TestGracefulStopJustBeforeInstant stops a node with SIGTERM a few ms before
// a fire instant, once the trigger has claimed the instant's run (it claims
// trigger.DefaultClaimAhead, 500 ms, ahead; the test sees the run running in
// the API) but not started it, and starts the node again at once.
// A graceful stop must give such a run back: it fires once, with attempt 1,
// as soon as the node is back, not after its claim's lease ran out
// (executor.DefaultClaimLease after the instant, lengthened up to
// executor.DefaultLease while the store is slow) as if its node had died.
func TestGracefulStopJustBeforeInstant(t *testing.T) {
	t.Parallel()
	// The trigger claims well ahead (trigger.DefaultClaimAhead); stop
	// after the claim and early enough that the node exits before the
	// instant.
	const stopBefore = 35 * time.Millisecond
	rcv := newReceiver(t, nil)
	n := startNode(t, "graceful", nodeConfig{})
	tm := createTimer(t, n.url(""), httpTimer("e2e", "tick", "* * * * * *", "POST", rcv.url("/tick"), "tick", nil))
	waitUntil(t, 10*time.Second, "2 fires", func() (bool, string) {
		k := len(rcv.snapshot())
		return k >= 2, fmt.Sprintf("%d fires", k)
	})

	// Find an instant whose run the node claims early enough: poll the
	// runs API from 45 ms before it until its run is running (claimed),
	// then stop at once; if the claim comes too late, try the next second.
	var instant, stopAt time.Time
	claimed := false
	for try := 0; try < 8 && !claimed; try++ {
		instant = time.Now().Truncate(time.Second).Add(time.Second)
		if time.Until(instant) < 300*time.Millisecond {
			instant = instant.Add(time.Second)
		}
		time.Sleep(time.Until(instant.Add(-stopBefore - 10*time.Millisecond))) // behaviour under test: the stop's point before the instant
		for time.Until(instant) > 10*time.Millisecond {
			code, body := call(t, "GET", n.url("/api/v1/timers/"+tm.ID+"/runs?status=running&limit=10"), nil)
			var page struct {
				Runs []runResp `json:"runs"`
			}
			if code == http.StatusOK && json.Unmarshal(body, &page) == nil &&
				slices.ContainsFunc(page.Runs, func(r runResp) bool { return r.ScheduledAt.Equal(instant) }) {
				claimed = true
				break
			}
		}
		if claimed && time.Until(instant) > 10*time.Millisecond {
			stopAt = time.Now()
			n.stop(syscall.SIGTERM)
		} else {
			claimed = false
		}
	}
	if !claimed {
		t.Fatalf("no instant's run was seen claimed (running) at least 10 ms before its instant in 8 tries")
	}
	exited := time.Now()
	n.start()
	n.waitReady(30 * time.Second)
	readyAt := time.Now()
	t.Logf("SIGTERM at %s, %v before the instant %s; exited after %v; ready again at %s",
		stopAt.Format("15:04:05.000"), instant.Sub(stopAt).Round(time.Millisecond), instant.Format("15:04:05"),
		exited.Sub(stopAt).Round(time.Millisecond), readyAt.Format("15:04:05.000"))

	after := readyAt.Add(3 * time.Second).Truncate(time.Second)
	waitUntil(t, 10*time.Second, "fires after the restart", func() (bool, string) {
		for _, c := range rcv.snapshot() {
			if !c.ScheduledAt.Before(after) {
				return true, ""
			}
		}
		return false, "none at or after " + after.Format("15:04:05")
	})
	// Give the instant up to 2 s more than the others, then judge.
	var got []callback
	testenv.Poll(2*time.Second, func() (bool, string) {
		got = got[:0]
		for _, c := range rcv.snapshot() {
			if c.ScheduledAt.Equal(instant) {
				got = append(got, c)
			}
		}
		return len(got) > 0, ""
	})
	switch {
	case len(got) == 0:
		var status string
		for _, r := range timerRuns(t, n.url(""), tm.ID) {
			if r.ScheduledAt.Equal(instant) {
				status = fmt.Sprintf("run %s status %s attempt %d node %s", r.ID, r.Status, r.Attempt, r.Node)
			}
		}
		t.Errorf("the instant %s, claimed before the SIGTERM, was not delivered within %v of the restart "+
			"(the runs API says: %s): a graceful stop left its claimed run to the lease",
			instant.Format("15:04:05"), time.Since(readyAt).Round(100*time.Millisecond), status)
		// For the report: when (and as which attempt) does it come at last?
		if ok, _ := testenv.Poll(20*time.Second, func() (bool, string) {
			for _, c := range rcv.snapshot() {
				if c.ScheduledAt.Equal(instant) {
					t.Logf("the instant %s came at last %v late, %v after the restart, with X-Chime-Attempt %d",
						instant.Format("15:04:05"), c.Delay().Round(time.Millisecond),
						c.Received.Sub(readyAt).Round(time.Millisecond), c.Attempt)
					return true, ""
				}
			}
			return false, ""
		}); ok {
			return
		}
		t.Logf("the instant %s had still not come %v after the restart", instant.Format("15:04:05"),
			time.Since(readyAt).Round(time.Second))
	case len(got) > 1:
		t.Errorf("the instant %s was delivered %d times: %v", instant.Format("15:04:05"), len(got), got)
	default:
		if c := got[0]; c.Attempt != 1 || c.Received.After(readyAt.Add(time.Second)) {
			t.Errorf("the instant %s was delivered with attempt %d, %v after its instant (%v after the restart); "+
				"want attempt 1 within 1 s of the restart", instant.Format("15:04:05"), c.Attempt,
				c.Delay().Round(time.Millisecond), c.Received.Sub(readyAt).Round(time.Millisecond))
		}
	}
}

package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// resultTests are the tests of results: FinishRun and FinishRuns, their
// fences, retries, and text that no database takes as is.
var resultTests = []test{
	{"Fence", testFence},
	{"FinishRuns", testFinishRuns},
	{"Retry", testRetry},
	{"Failures", testFailures},
	{"BadValues", testFinishRunsBadValues},
	{"Large", testFinishRunsLarge},
}

// testFence: a result is recorded once, and only by the node and
// attempt that hold the run; a big output survives.
func testFence(t *testing.T, s store.Store) {
	_, runs := pendingRuns(t, s, "cf", 5)
	now := base.Add(time.Second)
	_, err := s.ClaimRuns(ctx(t), claimsFor(runs[:3], "n1", now))
	must(t, err)

	start, end := now, now.Add(1500*time.Millisecond)
	res := model.Result{RunID: runs[0].ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded,
		StartedAt: start, FinishedAt: end, Output: "ok"}
	fences := []struct {
		name string
		mod  func(r model.Result) model.Result
	}{
		{"wrong node", func(r model.Result) model.Result { r.Node = "n2"; return r }},
		{"wrong attempt", func(r model.Result) model.Result { r.Attempt = 2; return r }},
		{"not running", func(r model.Result) model.Result { r.RunID = runs[4].ID; return r }},
		{"missing", func(r model.Result) model.Result { r.RunID = "missing"; return r }},
	}
	for _, f := range fences {
		if err := Finish(ctx(t), s, f.mod(res)); !errors.Is(err, model.ErrNotClaimed) {
			t.Errorf("Finish(%s) = %v, want ErrNotClaimed", f.name, err)
		}
	}
	must(t, Finish(ctx(t), s, res))
	if err := Finish(ctx(t), s, res); !errors.Is(err, model.ErrNotClaimed) {
		t.Errorf("FinishRun twice = %v, want ErrNotClaimed", err)
	}
	r, err := s.GetRun(ctx(t), runs[0].ID)
	must(t, err)
	if r.Status != model.RunSucceeded || r.DurationMS != 1500 || r.Output != "ok" || r.LeaseUntil != nil ||
		r.FinishedAt == nil || !r.FinishedAt.Equal(end) || r.Attempt != 1 {
		t.Errorf("finished run = %+v", r)
	}
	// A big output survives (MEDIUMTEXT on MySQL).
	big := make([]byte, 100<<10)
	for i := range big {
		big[i] = 'a' + byte(i%26)
	}
	must(t, Finish(ctx(t), s, model.Result{RunID: runs[1].ID, Node: "n1", Attempt: 1, Status: model.RunFailed,
		StartedAt: start, FinishedAt: end, Output: string(big), Error: "exit status 1"}))
	r, err = s.GetRun(ctx(t), runs[1].ID)
	must(t, err)
	if r.Status != model.RunFailed || r.Output != string(big) || r.Error != "exit status 1" {
		t.Errorf("failed run: status %s, output %d bytes, error %q", r.Status, len(r.Output), r.Error)
	}
}

// testFinishRuns: one batch of results, some fenced off and some retried,
// reports each result's fate and records the others.
func testFinishRuns(t *testing.T, s store.Store) {
	_, runs := pendingRuns(t, s, "fr", 300)
	_, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n1", base))
	must(t, err)
	var rs []model.Result
	for i, r := range runs {
		res := model.Result{RunID: r.ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded,
			StartedAt: base, FinishedAt: base.Add(time.Duration(i) * time.Millisecond)}
		switch i % 3 {
		case 1:
			res.Node = "n2" // lost fence
		case 2:
			res.Status, res.Error, res.RetryAt = model.RunFailed, "try again", base.Add(time.Hour)
		}
		rs = append(rs, res)
	}
	ok, _, err := s.FinishRuns(ctx(t), rs)
	must(t, err)
	if len(ok) != len(rs) {
		t.Fatalf("FinishRuns returned %d flags for %d results", len(ok), len(rs))
	}
	for i := range rs {
		if ok[i] != (i%3 != 1) {
			t.Errorf("result %d: ok = %v", i, ok[i])
		}
	}
	st, err := s.Stats(ctx(t))
	must(t, err)
	if st.Runs[model.RunSucceeded] != 100 || st.Runs[model.RunPending] != 100 || st.Runs[model.RunRunning] != 100 {
		t.Errorf("stats after FinishRuns: %v", st.Runs)
	}
	r, err := s.GetRun(ctx(t), runs[297].ID)
	must(t, err)
	if r.DurationMS != 297 || r.Status != model.RunSucceeded || r.LeaseUntil != nil {
		t.Errorf("run 297 = %+v, want succeeded in 297ms", r)
	}
	r, err = s.GetRun(ctx(t), runs[299].ID)
	must(t, err)
	if r.Status != model.RunPending || !r.DueAt.Equal(base.Add(time.Hour)) || r.Error != "try again" || r.Attempt != 1 || r.DurationMS != 299 {
		t.Errorf("retried run 299 = %+v", r)
	}
	r, err = s.GetRun(ctx(t), runs[298].ID)
	must(t, err)
	if r.Status != model.RunRunning || !r.DueAt.Equal(runs[298].DueAt) {
		t.Errorf("fenced-off run 298 = %+v", r)
	}
	if ok, _, err := s.FinishRuns(ctx(t), nil); err != nil || len(ok) != 0 {
		t.Errorf("FinishRuns(nil) = %v, %v", ok, err)
	}
}

// testRetry: a failed result with RetryAt puts the run back to pending at
// RetryAt, keeping its attempt, error and output; the next claim is attempt
// 2, which fences off the first attempt's result.
func testRetry(t *testing.T, s store.Store) {
	_, runs := pendingRuns(t, s, "rr", 1)
	_, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n1", base))
	must(t, err)

	retryAt := base.Add(10 * time.Second)
	must(t, Finish(ctx(t), s, model.Result{RunID: runs[0].ID, Node: "n1", Attempt: 1, Status: model.RunFailed,
		StartedAt: base, FinishedAt: base.Add(time.Second), Error: "HTTP 500", Output: "boom", RetryAt: retryAt}))
	r, err := s.GetRun(ctx(t), runs[0].ID)
	must(t, err)
	if r.Status != model.RunPending || !r.DueAt.Equal(retryAt) || r.Attempt != 1 || r.Error != "HTTP 500" ||
		r.Output != "boom" || r.DurationMS != 1000 || r.LeaseUntil != nil {
		t.Errorf("run after retry = %+v", r)
	}
	pend, err := s.PendingRuns(ctx(t), retryAt, retryAt.Add(time.Nanosecond), 10)
	must(t, err)
	if len(pend) != 1 {
		t.Errorf("retried run not pending at RetryAt")
	}
	// Second attempt, on another node.
	got, err := s.ClaimRuns(ctx(t), claimsFor(runs[:1], "n2", retryAt))
	must(t, err)
	if len(got) != 1 || got[0].Run.Attempt != 2 || got[0].Run.Node != "n2" {
		t.Fatalf("second claim = %+v", got)
	}
	if err := Finish(ctx(t), s, model.Result{RunID: runs[0].ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded}); !errors.Is(err, model.ErrNotClaimed) {
		t.Errorf("finish by the first attempt after a retry = %v, want ErrNotClaimed", err)
	}
	must(t, Finish(ctx(t), s, model.Result{RunID: runs[0].ID, Node: "n2", Attempt: 2, Status: model.RunSucceeded,
		StartedAt: retryAt, FinishedAt: retryAt}))
}

// testFinishRunsBadValues: one FinishRuns batch holding results whose text
// no database takes as is (too long for a 64 KiB column, NUL bytes,
// invalid UTF-8, past MaxResultText), a status that is not final, and
// ordinary results: every result is recorded, its text cleaned, and the
// fences hold.
func testFinishRunsBadValues(t *testing.T, s store.Store) {
	_, runs := pendingRuns(t, s, "bad", 12)
	_, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n1", base))
	must(t, err)
	end := base.Add(250 * time.Millisecond)
	retryAt := base.Add(time.Hour)
	big := text(70 << 10)
	// MaxResultText-1 bytes, then a two-byte rune across the limit.
	over := text(store.MaxResultText-1) + "é and more"
	tests := []struct {
		name       string
		mod        func(r *model.Result)
		ok         bool
		status     model.RunStatus
		output     string
		errText    string // the stored error; "" with errPrefix set: checked by prefix
		errPrefix  string
		due        time.Time // zero: unchanged
		keepsLease bool      // fenced off: still running
	}{
		{name: "ordinary", mod: func(r *model.Result) { r.Output = "ok" },
			ok: true, status: model.RunSucceeded, output: "ok"},
		{name: "70 KiB error", mod: func(r *model.Result) { r.Status, r.Error = model.RunFailed, big },
			ok: true, status: model.RunFailed, errText: big},
		{name: "NUL bytes", mod: func(r *model.Result) { r.Output, r.Error = "a\x00b\x00", "\x00exit\x00 1" },
			ok: true, status: model.RunSucceeded, output: "ab", errText: "exit 1"},
		{name: "invalid UTF-8", mod: func(r *model.Result) { r.Output, r.Error = "caf\xe9 \xff\xfe ok", "bad \xc3" },
			ok: true, status: model.RunSucceeded, output: "caf\uFFFD \uFFFD ok", errText: "bad \uFFFD"},
		{name: "past MaxResultText", mod: func(r *model.Result) { r.Output = over },
			ok: true, status: model.RunSucceeded, output: over[:store.MaxResultText-1]},
		{name: "multi-byte text kept as is", mod: func(r *model.Result) { r.Output, r.Error = "日本語 🎉 ünïcode", "ça n'a pas marché" },
			ok: true, status: model.RunSucceeded, output: "日本語 🎉 ünïcode", errText: "ça n'a pas marché"},
		{name: "retry with invalid UTF-8", mod: func(r *model.Result) {
			r.Status, r.Error, r.Output, r.RetryAt = model.RunFailed, "HTTP 500: \xff", big, retryAt
		}, ok: true, status: model.RunPending, output: big, errText: "HTTP 500: \uFFFD", due: retryAt},
		{name: "status not final", mod: func(r *model.Result) { r.Status, r.Error = model.RunRunning, "boom" },
			ok: true, status: model.RunFailed, errPrefix: "chime: result status"},
		{name: "lost fence: other node", mod: func(r *model.Result) { r.Node, r.Error = "n2", big+"\x00" },
			status: model.RunRunning, keepsLease: true},
		{name: "lost fence: other attempt", mod: func(r *model.Result) { r.Attempt, r.Output = 2, "\xff" },
			status: model.RunRunning, keepsLease: true},
		{name: "ordinary after the bad ones", mod: func(r *model.Result) { r.Output = "fine" },
			ok: true, status: model.RunSucceeded, output: "fine"},
	}
	rs := make([]model.Result, len(tests))
	for i, tc := range tests {
		rs[i] = model.Result{RunID: runs[i].ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded, StartedAt: base, FinishedAt: end}
		tc.mod(&rs[i])
	}
	ok, _, err := s.FinishRuns(ctx(t), rs)
	must(t, err)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if ok[i] != tc.ok {
				t.Errorf("ok = %v, want %v", ok[i], tc.ok)
			}
			r := getRun(t, s, runs[i].ID)
			if r.Status != tc.status || r.Attempt != 1 {
				t.Errorf("status %s attempt %d, want %s attempt 1", r.Status, r.Attempt, tc.status)
			}
			if tc.keepsLease {
				if r.LeaseUntil == nil || r.Output != "" || r.Error != "" {
					t.Errorf("fenced-off run changed: lease %v, output %d bytes, error %d bytes", r.LeaseUntil, len(r.Output), len(r.Error))
				}
				return
			}
			if r.LeaseUntil != nil || r.DurationMS != 250 {
				t.Errorf("lease %v, duration %d ms; want none, 250", r.LeaseUntil, r.DurationMS)
			}
			if r.Output != tc.output {
				t.Errorf("output = %q (%d bytes), want %q (%d bytes)", clip(r.Output), len(r.Output), clip(tc.output), len(tc.output))
			}
			if tc.errPrefix != "" {
				if !strings.HasPrefix(r.Error, tc.errPrefix) {
					t.Errorf("error = %q, want it to start with %q", clip(r.Error), tc.errPrefix)
				}
			} else if r.Error != tc.errText {
				t.Errorf("error = %q (%d bytes), want %q (%d bytes)", clip(r.Error), len(r.Error), clip(tc.errText), len(tc.errText))
			}
			if !utf8.ValidString(r.Output) || !utf8.ValidString(r.Error) {
				t.Error("stored text is not valid UTF-8")
			}
			if !tc.due.IsZero() && !r.DueAt.Equal(tc.due) {
				t.Errorf("due %v, want %v", r.DueAt, tc.due)
			}
		})
	}

	// FinishRun cleans the same way.
	last := runs[len(tests)].ID
	must(t, Finish(ctx(t), s, model.Result{RunID: last, Node: "n1", Attempt: 1, Status: model.RunFailed,
		StartedAt: base, FinishedAt: end, Output: "x\x00y\xff", Error: big + "\xff"}))
	r := getRun(t, s, last)
	if r.Status != model.RunFailed || r.Output != "xy\uFFFD" || r.Error != big+"\uFFFD" {
		t.Errorf("FinishRun: status %s, output %q, error %d bytes", r.Status, r.Output, len(r.Error))
	}
	if err := Finish(ctx(t), s, model.Result{RunID: last, Node: "n1", Attempt: 1, Status: model.RunSucceeded,
		Output: "\x00"}); !errors.Is(err, model.ErrNotClaimed) {
		t.Errorf("FinishRun again = %v, want ErrNotClaimed", err)
	}
}

// testFinishRunsLarge: results whose text adds up to more than one
// statement takes on MySQL (max_allowed_packet, 16 MiB by default on
// MariaDB) are all recorded.
func testFinishRunsLarge(t *testing.T, s store.Store) {
	tm := mustTimer(t, s, "app", "large")
	const n = 120 // × 150 KiB = 18 MiB
	runs := NewRuns(tm.ID, base, time.Second, n)
	mustInsert(t, s, runs)
	_, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n1", base))
	must(t, err)
	out := text(150 << 10)
	rs := make([]model.Result, n)
	for i, r := range runs {
		rs[i] = model.Result{RunID: r.ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded, StartedAt: base, FinishedAt: base,
			Output: out}
	}
	ok, _, err := s.FinishRuns(ctx(t), rs)
	must(t, err)
	for i := range ok {
		if !ok[i] {
			t.Errorf("result %d not recorded", i)
		}
	}
	for _, i := range []int{0, n / 2, n - 1} {
		if r := getRun(t, s, runs[i].ID); r.Status != model.RunSucceeded || r.Output != out {
			t.Errorf("run %d: status %s, output %d bytes", i, r.Status, len(r.Output))
		}
	}
}

// testFailures: a run's failures count its attempts that ran and failed,
// recorded one at a time or in a batch (a fenced-off result beside them
// takes MySQL's careful path); a lease recovery and a success add none,
// and the claim hands the count to the next attempt.
func testFailures(t *testing.T, s store.Store) {
	_, runs := pendingRuns(t, s, "fl", 4)
	now := base.Add(time.Second)
	_, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n1", now))
	must(t, err)
	fail := func(i, attempt int, retry bool) model.Result {
		r := model.Result{RunID: runs[i].ID, Node: "n1", Attempt: attempt, Status: model.RunFailed,
			StartedAt: now, FinishedAt: now, Error: "boom"}
		if retry {
			r.RetryAt = now
		}
		return r
	}
	// Run 0 fails and is retried; run 1 is recovered (its node died); run
	// 2 succeeds; run 3 fails for good.
	must(t, Finish(ctx(t), s, fail(0, 1, true)))
	later := now.Add(2 * time.Minute) // past the claim's lease
	must(t, s.Requeue(ctx(t), getRun(t, s, runs[1].ID), later, later))
	must(t, Finish(ctx(t), s, model.Result{RunID: runs[2].ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded,
		StartedAt: now, FinishedAt: now}))
	_, _, err = s.FinishRuns(ctx(t), []model.Result{fail(3, 1, false)})
	must(t, err)
	for i, want := range []int{1, 0, 0, 1} {
		if r := getRun(t, s, runs[i].ID); r.Failures != want {
			t.Errorf("run %d after its first attempt: failures %d, want %d", i, r.Failures, want)
		}
	}
	// The second attempts of runs 0 and 1, claimed with their count, fail
	// in one batch beside a result whose fence does not hold.
	got, err := s.ClaimRuns(ctx(t), claimsFor(runs[:2], "n1", later))
	must(t, err)
	if len(got) != 2 {
		t.Fatalf("second claims = %d, want 2", len(got))
	}
	for _, cr := range got {
		want := 0
		if cr.Run.ID == runs[0].ID {
			want = 1
		}
		if cr.Run.Attempt != 2 || cr.Run.Failures != want {
			t.Errorf("claimed run %s: attempt %d, failures %d; want attempt 2, failures %d", cr.Run.ID, cr.Run.Attempt, cr.Run.Failures, want)
		}
	}
	stale := fail(2, 1, false)
	ok, _, err := s.FinishRuns(ctx(t), []model.Result{fail(0, 2, true), fail(1, 2, true), stale})
	must(t, err)
	if !ok[0] || !ok[1] || ok[2] {
		t.Errorf("FinishRuns ok = %v, want [true true false]", ok)
	}
	for i, want := range []int{2, 1, 0} {
		if r := getRun(t, s, runs[i].ID); r.Failures != want {
			t.Errorf("run %d after its second attempt: failures %d, want %d", i, r.Failures, want)
		}
	}
}

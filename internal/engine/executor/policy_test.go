package executor

import (
	"testing"
	"time"

	"github.com/chimehq/chime/model"
)

// TestPolicyReasons: each policy that skips a claimed run says which, with
// its reason code; manual runs are exempt.
func TestPolicyReasons(t *testing.T) {
	t.Parallel()
	e := &Executor{cfg: Config{MisfireGrace: 30 * time.Second}}
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	timer := func(mod func(*model.Timer)) *model.Timer {
		tm := &model.Timer{ID: "t", Schedule: "* * * * * *", Timezone: "UTC", CreatedAt: now.Add(-time.Hour)}
		if mod != nil {
			mod(tm)
		}
		return tm
	}
	mk := func(late time.Duration, manual bool) *model.Run {
		return &model.Run{ID: "r", TimerID: "t", ScheduledAt: now.Add(-late), DueAt: now.Add(-late), Attempt: 1, Manual: manual}
	}
	attempt := func(r *model.Run, n, failures int) *model.Run {
		r.Attempt, r.Failures = n, failures
		return r
	}
	for _, tc := range []struct {
		name   string
		t      *model.Timer
		r      *model.Run
		want   verdict
		reason string
	}{
		{"on time", timer(nil), mk(0, false), run, ""},
		{"paused", timer(func(t *model.Timer) { t.Paused = true }), mk(0, false), skip, model.SkipPaused},
		{"paused, manual", timer(func(t *model.Timer) { t.Paused = true }), mk(0, true), run, ""},
		{"after end_at", timer(func(t *model.Timer) { t.Policy.EndAt = now.Add(-time.Minute) }), mk(0, false), skip, model.SkipEndAt},
		{"late, misfire all", timer(nil), mk(time.Minute, false), run, ""},
		{"late, misfire skip", timer(func(t *model.Timer) { t.Policy.Misfire = model.MisfireSkip }), mk(time.Minute, false), skip, model.SkipMisfire},
		{"late, superseded", timer(func(t *model.Timer) { t.Policy.Misfire = model.MisfireLatest }), mk(time.Minute, false), skip, model.SkipMisfire},
		{"beyond the catchup window", timer(func(t *model.Timer) { t.Policy.CatchupWindow = 40 * time.Second }), mk(time.Minute, false), skip, model.SkipCatchupWindow},
		{"late, manual", timer(func(t *model.Timer) { t.Policy.Misfire = model.MisfireSkip }), mk(time.Minute, true), run, ""},
		// Lateness decides, whatever the attempt: a fire recovered or fenced
		// before it ran (attempt 2, no failure) misfires as attempt 1 does;
		// a retry (a failure recorded) is exempt.
		{"late, recovered, misfire skip", timer(func(t *model.Timer) { t.Policy.Misfire = model.MisfireSkip }), attempt(mk(time.Minute, false), 2, 0), skip, model.SkipMisfire},
		{"late, recovered, catchup window", timer(func(t *model.Timer) { t.Policy.CatchupWindow = 40 * time.Second }), attempt(mk(time.Minute, false), 3, 0), skip, model.SkipCatchupWindow},
		{"late, retry, misfire skip", timer(func(t *model.Timer) { t.Policy.Misfire = model.MisfireSkip }), attempt(mk(time.Minute, false), 2, 1), run, ""},
	} {
		v, reason, why := e.policy(tc.r, tc.t, now)
		if v != tc.want || reason != tc.reason || (reason != "" && why == "") {
			t.Errorf("%s: verdict %v reason %q (%q), want %v %q", tc.name, v, reason, why, tc.want, tc.reason)
		}
	}
}

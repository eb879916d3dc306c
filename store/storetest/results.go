package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/store"
)

// text returns n bytes of printable ASCII.
func text(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return string(b)
}

// testFinishRunsBadValues: one FinishRuns batch holding results whose text
// no database takes as is (too long for a 64 KiB column, NUL bytes,
// invalid UTF-8, past MaxResultText), a status that is not final, and
// ordinary results: every result is recorded, its text cleaned, and the
// fences hold.
func testFinishRunsBadValues(t *testing.T, s store.Store) {
	tm := mustTimer(t, s, "app", "bad")
	runs := NewRuns(tm.ID, base, time.Second, 12)
	mustInsert(t, s, runs)
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
	ok, err := s.FinishRuns(ctx(t), rs)
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
	must(t, s.FinishRun(ctx(t), model.Result{RunID: last, Node: "n1", Attempt: 1, Status: model.RunFailed,
		StartedAt: base, FinishedAt: end, Output: "x\x00y\xff", Error: big + "\xff"}))
	r := getRun(t, s, last)
	if r.Status != model.RunFailed || r.Output != "xy\uFFFD" || r.Error != big+"\uFFFD" {
		t.Errorf("FinishRun: status %s, output %q, error %d bytes", r.Status, r.Output, len(r.Error))
	}
	if err := s.FinishRun(ctx(t), model.Result{RunID: last, Node: "n1", Attempt: 1, Status: model.RunSucceeded,
		Output: "\x00"}); !errors.Is(err, model.ErrNotClaimed) {
		t.Errorf("FinishRun again = %v, want ErrNotClaimed", err)
	}
}

// clip shortens long text in failure messages.
func clip(s string) string {
	if len(s) > 80 {
		return s[:40] + "…" + s[len(s)-40:]
	}
	return s
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
	ok, err := s.FinishRuns(ctx(t), rs)
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

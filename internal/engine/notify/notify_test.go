package notify_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/engine/notify"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/sqlstore"
	"github.com/chimehq/chime/model"
)

// TestStreakSkipsSkippedRuns: a skipped run neither counts in a streak of
// failures nor breaks it, a streak is told once at its threshold, and a
// recovery follows the previous finished run whatever was skipped between.
func TestStreakSkipsSkippedRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, "sqlite::memory:", sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var mu sync.Mutex
	var got []string
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get(model.HeaderNotification)+"@"+r.Header.Get(model.HeaderRunID))
		mu.Unlock()
	}))
	t.Cleanup(recv.Close)
	base := time.Now().Truncate(time.Second).UTC()
	clk := clock.NewFake(base)
	tm := &model.Timer{ID: "t1", App: "a", Name: "n", Schedule: "@every 1h", Timezone: "UTC", Enabled: true,
		Action:  model.Action{Type: "http", HTTP: &model.HTTPAction{Method: "POST", URL: "http://127.0.0.1:9/"}},
		Timeout: time.Minute, Retry: model.RetryPolicy{MaxAttempts: 1}, CreatedAt: base, UpdatedAt: base,
		Notify: []model.NotifyRule{{On: model.NotifyConsecutiveFailures, Threshold: 2, Webhook: &model.NotifyWebhook{URL: recv.URL}},
			{On: model.NotifyRecovery, Webhook: &model.NotifyWebhook{URL: recv.URL}}}}
	if _, err := st.SaveTimer(ctx, store.TimerWrite{Timer: tm, Create: true}); err != nil {
		t.Fatal(err)
	}
	n := notify.New(notify.Config{Store: st, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	// failed, skipped, failed (streak 2: told), failed (3: not told),
	// skipped, succeeded (recovery).
	statuses := []model.RunStatus{model.RunFailed, model.RunSkipped, model.RunFailed, model.RunFailed, model.RunSkipped, model.RunSucceeded}
	var ids []string
	for i, s := range statuses {
		at := base.Add(time.Duration(i) * time.Minute)
		r := &model.Run{ID: model.RunID(tm.ID, at), TimerID: tm.ID, ScheduledAt: at, DueAt: at, CreatedAt: base}
		ids = append(ids, r.ID)
		if _, err := st.InsertRuns(ctx, []*model.Run{r}); err != nil {
			t.Fatal(err)
		}
		if s == model.RunSkipped {
			if _, err := st.SetRunStatus(ctx, r.ID, model.RunPending, model.RunSkipped, "skipped"); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := st.ClaimRuns(ctx, []store.Claim{{RunID: r.ID, Node: "n1", LeaseUntil: at.Add(time.Hour), Now: at}}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.FinishRuns(ctx, []model.Result{{RunID: r.ID, Node: "n1", Attempt: 1, Status: s, StartedAt: at, FinishedAt: at,
			Error: "boom", Notify: true, TimerID: tm.ID}}); err != nil {
			t.Fatal(err)
		}
		n.Pass(ctx)
	}
	want := []string{"consecutive_failures@" + ids[2], "recovery@" + ids[5]}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("notifications %v, want %v", got, want)
	}
}

// TestEmailText: the subject names the timer and the event.
func TestEmailText(t *testing.T) {
	t.Parallel()
	for on, want := range map[string]string{
		model.NotifyFailure:             "chime: billing/invoices failed",
		model.NotifyConsecutiveFailures: "chime: billing/invoices failed 3 times in a row",
		model.NotifyRecovery:            "chime: billing/invoices recovered",
	} {
		p := notify.Payload{On: on, ConsecutiveFailures: 3, Timer: notify.PayloadTimer{App: "billing", Name: "invoices"},
			Error: "http status 502", Links: notify.Links{Run: "/runs/r1"}}
		subject, body := notify.EmailText(p)
		if subject != want || !strings.Contains(body, "/runs/r1") {
			t.Errorf("%s: subject %q body %q", on, subject, body)
		}
	}
}

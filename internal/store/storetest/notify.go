package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// notifyTests are the tests of priorities in claims and of failure
// notifications: the outbox written with results, its expansion into
// deliveries, and their claims.
var notifyTests = []test{
	{"ClaimOrder", testClaimOrder},
	{"PriorityStored", testPriorityStored},
	{"Outbox", testNotifyOutbox},
	{"OutboxOfSetRunStatus", testNotifyOutboxSetStatus},
	{"Deliveries", testNotifyDeliveries},
	{"AppDefaults", testAppNotify},
}

func withPriority(t *testing.T, s store.Store, name string, p int) *model.Timer {
	t.Helper()
	tm := NewTimer("app", name)
	tm.Priority = &p
	must(t, createTimer(ctx(t), s, tm))
	return tm
}

// testClaimOrder: ClaimRuns returns a batch in the order to start it:
// higher priority first, then earlier due, whatever order it was asked in.
func testClaimOrder(t *testing.T, s store.Store) {
	low, mid, high := withPriority(t, s, "low", 0), mustTimer(t, s, "app", "mid"), withPriority(t, s, "high", 9)
	var runs []*model.Run
	for _, tm := range []*model.Timer{low, mid, high} {
		runs = append(runs, mustInsert(t, s, NewRuns(tm.ID, base, time.Second, 3))...)
	}
	slices.Reverse(runs)
	got, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n1", base.Add(time.Minute)))
	must(t, err)
	if len(got) != 9 {
		t.Fatalf("claimed %d runs, want 9", len(got))
	}
	want := []struct {
		timer string
		due   time.Time
	}{}
	for _, tm := range []*model.Timer{high, mid, low} {
		for i := range 3 {
			want = append(want, struct {
				timer string
				due   time.Time
			}{tm.ID, base.Add(time.Duration(i) * time.Second)})
		}
	}
	for i, c := range got {
		if c.Run.TimerID != want[i].timer || !c.Run.DueAt.Equal(want[i].due) {
			t.Errorf("claim %d: timer %s (priority %d) due %v, want timer %s due %v", i, c.Run.TimerID,
				c.Timer.EffectivePriority(), c.Run.DueAt, want[i].timer, want[i].due)
		}
	}
}

// testPriorityStored: a timer's priority and notify rules round-trip; a
// timer without a priority reads back the default.
func testPriorityStored(t *testing.T, s store.Store) {
	tm := NewTimer("app", "prio")
	tm.Notify = []model.NotifyRule{{On: model.NotifyConsecutiveFailures, Threshold: 3,
		Webhook: &model.NotifyWebhook{URL: "https://example.com/hook"}, Email: &model.NotifyEmail{To: []string{"ops@example.com"}}}}
	must(t, createTimer(ctx(t), s, tm))
	got, err := s.GetTimer(ctx(t), tm.ID)
	must(t, err)
	if got.EffectivePriority() != model.DefaultPriority || len(got.Notify) != 1 || got.Notify[0].Threshold != 3 ||
		got.Notify[0].Webhook == nil || got.Notify[0].Email == nil || got.Notify[0].Email.To[0] != "ops@example.com" {
		t.Errorf("stored timer: priority %d notify %+v", got.EffectivePriority(), got.Notify)
	}
	p := 2
	got.Priority, got.Notify = &p, nil
	must(t, s.UpdateTimer(ctx(t), got))
	got, err = s.GetTimer(ctx(t), tm.ID)
	must(t, err)
	if got.EffectivePriority() != 2 || got.Notify != nil {
		t.Errorf("updated timer: priority %d notify %+v", got.EffectivePriority(), got.Notify)
	}
}

// testNotifyOutbox: FinishRuns writes an event for each final result that
// asks for one and whose fence held (not for a retry, a lost fence or a
// result without Notify); a claimed event is not claimed again until its
// claim ends, and its expansion is fenced on the claim and idempotent.
func testNotifyOutbox(t *testing.T, s store.Store) {
	tm, runs := pendingRuns(t, s, "outbox", 5)
	now := base.Add(time.Minute)
	_, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n1", now))
	must(t, err)
	res := func(i int, st model.RunStatus, notify bool) model.Result {
		return model.Result{RunID: runs[i].ID, Node: "n1", Attempt: 1, Status: st, StartedAt: now, FinishedAt: now.Add(time.Duration(i) * time.Millisecond),
			Notify: notify, TimerID: tm.ID}
	}
	retry := res(2, model.RunFailed, true)
	retry.RetryAt = now.Add(time.Hour)
	fenced := res(3, model.RunFailed, true)
	fenced.Attempt = 7
	ok, _, err := s.FinishRuns(ctx(t), []model.Result{res(0, model.RunFailed, true), res(1, model.RunSucceeded, true), retry, fenced,
		res(4, model.RunFailed, false)})
	must(t, err)
	if !slices.Equal(ok, []bool{true, true, true, false, true}) {
		t.Fatalf("FinishRuns ok = %v", ok)
	}
	evs, err := s.ClaimNotifyEvents(ctx(t), now, now.Add(time.Minute), 10)
	must(t, err)
	if len(evs) != 2 || evs[0].RunID != runs[0].ID || evs[0].Status != model.RunFailed || evs[1].RunID != runs[1].ID ||
		evs[1].Status != model.RunSucceeded || evs[0].TimerID != tm.ID || evs[0].Attempt != 1 {
		t.Fatalf("events = %+v, want the failure of run 0 and the success of run 1", evs)
	}
	again, err := s.ClaimNotifyEvents(ctx(t), now.Add(time.Second), now.Add(2*time.Minute), 10)
	must(t, err)
	if len(again) != 0 {
		t.Errorf("claimed events again within their claim: %+v", again)
	}
	n := &model.Notification{ID: runs[0].ID + "/0/webhook", RunID: runs[0].ID, TimerID: tm.ID, App: tm.App, On: model.NotifyFailure,
		Channel: model.ChannelWebhook, Target: "https://example.com/hook", Payload: []byte(`{"x":1}`), Status: model.NotificationPending,
		NextAt: now, CreatedAt: now}
	stale := evs[0]
	stale.ClaimUntil = now.Add(time.Second)
	if err := s.ExpandNotifyEvent(ctx(t), stale, []*model.Notification{n}); !errors.Is(err, model.ErrNotClaimed) {
		t.Errorf("expand with a stale claim = %v, want ErrNotClaimed", err)
	}
	must(t, s.ExpandNotifyEvent(ctx(t), evs[0], []*model.Notification{n}))
	// The claim of event 1 ran out; another claimer takes it and expands
	// it with a notification id that exists already: nothing doubles.
	later, err := s.ClaimNotifyEvents(ctx(t), now.Add(2*time.Minute), now.Add(3*time.Minute), 10)
	must(t, err)
	if len(later) != 1 || later[0].RunID != runs[1].ID {
		t.Fatalf("events after the claim ran out = %+v, want run 1's", later)
	}
	must(t, s.ExpandNotifyEvent(ctx(t), later[0], []*model.Notification{n}))
	ns, err := s.RunNotifications(ctx(t), runs[0].ID)
	must(t, err)
	if len(ns) != 1 || ns[0].Status != model.NotificationPending || string(ns[0].Payload) != `{"x":1}` || ns[0].Target != n.Target {
		t.Errorf("notifications of run 0 = %+v", ns)
	}
}

// testNotifyOutboxSetStatus: a run ended failed by SetRunStatus (the
// sweeper, when its last attempt's lease expired) has its notify event
// too, written with the status; a status change that is not an end has
// none.
func testNotifyOutboxSetStatus(t *testing.T, s store.Store) {
	tm, runs := pendingRuns(t, s, "outbox-status", 2)
	mustMade(t)(s.SetRunStatus(ctx(t), runs[0].ID, model.RunPending, model.RunFailed, "lease expired at the last attempt"))
	mustMade(t)(s.SetRunStatus(ctx(t), runs[1].ID, model.RunPending, model.RunCancelled, "cancelled"))
	now := time.Now().Add(time.Minute)
	evs, err := s.ClaimNotifyEvents(ctx(t), now, now.Add(time.Minute), 10)
	must(t, err)
	if len(evs) != 1 || evs[0].RunID != runs[0].ID || evs[0].Status != model.RunFailed || evs[0].TimerID != tm.ID {
		t.Fatalf("events = %+v, want the failure of run 0 only", evs)
	}
}

// testNotifyDeliveries: a due notification is claimed once until its claim
// ends; its outcome is recorded fenced on the claim; a sent one is due no
// more.
func testNotifyDeliveries(t *testing.T, s store.Store) {
	tm, runs := pendingRuns(t, s, "deliveries", 1)
	now := base.Add(time.Minute)
	_, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n1", now))
	must(t, err)
	_, _, err = s.FinishRuns(ctx(t), []model.Result{{RunID: runs[0].ID, Node: "n1", Attempt: 1, Status: model.RunFailed,
		StartedAt: now, FinishedAt: now, Notify: true, TimerID: tm.ID}})
	must(t, err)
	evs, err := s.ClaimNotifyEvents(ctx(t), now, now.Add(time.Minute), 0)
	must(t, err)
	if len(evs) != 1 {
		t.Fatalf("events = %+v", evs)
	}
	mk := func(ch, target string) *model.Notification {
		return &model.Notification{ID: runs[0].ID + "/" + ch, RunID: runs[0].ID, TimerID: tm.ID, App: tm.App, On: model.NotifyFailure,
			Channel: ch, Target: target, Payload: []byte("{}"), Status: model.NotificationPending, NextAt: now, CreatedAt: now}
	}
	must(t, s.ExpandNotifyEvent(ctx(t), evs[0], []*model.Notification{mk(model.ChannelWebhook, "https://a.example/"),
		mk(model.ChannelEmail, "ops@example.com")}))
	due, err := s.DueNotifications(ctx(t), now, now.Add(time.Minute), 0)
	must(t, err)
	if len(due) != 2 || !due[0].NextAt.Equal(now.Add(time.Minute)) {
		t.Fatalf("due = %+v", due)
	}
	if again, err := s.DueNotifications(ctx(t), now.Add(time.Second), now.Add(2*time.Minute), 0); err != nil || len(again) != 0 {
		t.Errorf("due again within the claim = %d, %v", len(again), err)
	}
	sent := now.Add(time.Second)
	w, e := due[0], due[1]
	if w.Channel != model.ChannelWebhook {
		w, e = e, w
	}
	w.Status, w.Attempts, w.SentAt = model.NotificationSent, 1, &sent
	must(t, s.RecordNotification(ctx(t), w, now))
	stale := *e
	e.Attempts, e.Error = 1, "smtp: connection refused"
	must(t, s.RecordNotification(ctx(t), e, now.Add(10*time.Second)))
	if err := s.RecordNotification(ctx(t), &stale, now); !errors.Is(err, model.ErrNotClaimed) {
		t.Errorf("record with a stale claim = %v, want ErrNotClaimed", err)
	}
	due, err = s.DueNotifications(ctx(t), now.Add(10*time.Second), now.Add(11*time.Second), 0)
	must(t, err)
	if len(due) != 1 || due[0].Channel != model.ChannelEmail || due[0].Attempts != 1 || due[0].Error == "" {
		t.Fatalf("due after a failed delivery = %d %+v, want the email again", len(due), due[0])
	}
	ns, err := s.RunNotifications(ctx(t), runs[0].ID)
	must(t, err)
	if len(ns) != 2 {
		t.Fatalf("run notifications = %+v", ns)
	}
	for _, n := range ns {
		if n.Channel == model.ChannelWebhook && (n.Status != model.NotificationSent || n.SentAt == nil || !n.SentAt.Equal(sent) || n.Attempts != 1) {
			t.Errorf("webhook notification = %+v", n)
		}
	}
}

// testAppNotify: an app's default rules are set, replaced, read and
// removed; another app's are apart.
func testAppNotify(t *testing.T, s store.Store) {
	got, err := s.AppNotify(ctx(t), "ops")
	must(t, err)
	if got == nil || len(got) != 0 {
		t.Errorf("no defaults = %#v, want an empty slice", got)
	}
	rules := []model.NotifyRule{{On: model.NotifyFailure, Webhook: &model.NotifyWebhook{URL: "https://a.example/"}}}
	must(t, s.SetAppNotify(ctx(t), "ops", rules, base))
	rules = append(rules, model.NotifyRule{On: model.NotifyConsecutiveFailures, Threshold: 4, Email: &model.NotifyEmail{To: []string{"a@b.c"}}})
	must(t, s.SetAppNotify(ctx(t), "ops", rules, base.Add(time.Second)))
	got, err = s.AppNotify(ctx(t), "ops")
	must(t, err)
	if len(got) != 2 || got[1].Threshold != 4 || got[1].Email.To[0] != "a@b.c" {
		t.Errorf("defaults = %+v", got)
	}
	if other, err := s.AppNotify(ctx(t), "billing"); err != nil || len(other) != 0 {
		t.Errorf("another app's defaults = %v, %v", other, err)
	}
	must(t, s.SetAppNotify(ctx(t), "ops", nil, base))
	if got, err = s.AppNotify(ctx(t), "ops"); err != nil || len(got) != 0 {
		t.Errorf("removed defaults = %v, %v", got, err)
	}
}

package timers_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/sqlstore"
	"github.com/chimehq/chime/internal/timers"
	"github.com/chimehq/chime/model"
)

// engine records Saved calls.
type engine struct {
	mu    sync.Mutex
	calls []saved
}

type saved struct {
	id     string
	replan bool
}

func (e *engine) PlanSave(ctx context.Context, w *store.TimerWrite, replan bool) {}

func (e *engine) Saved(ctx context.Context, t *model.Timer, replan bool, inserted []*model.Run) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, saved{t.ID, replan})
}

// last returns the last call and how many there were.
func (e *engine) last() (saved, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.calls) == 0 {
		return saved{}, 0
	}
	return e.calls[len(e.calls)-1], len(e.calls)
}

var testNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func newService(t *testing.T) (*timers.Service, store.Store, *engine) {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "chime.db"), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng := &engine{}
	svc := timers.NewService(timers.Config{Store: st, Engine: eng, Clock: clock.Func(func() time.Time { return testNow }),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return svc, st, eng
}

func hasSecret(t *testing.T, st store.Store, app string) bool {
	t.Helper()
	ss, err := st.ActiveSigningSecrets(context.Background(), app, testNow)
	if err != nil {
		t.Fatal(err)
	}
	return len(ss) > 0
}

func TestCreate(t *testing.T) {
	t.Parallel()
	svc, st, eng := newService(t)
	ctx := context.Background()
	tm := valid()
	tm.Timezone = ""
	if err := svc.Create(ctx, tm, nil, nil); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetTimer(ctx, tm.ID)
	if err != nil || got.Timezone != "UTC" || !got.CreatedAt.Equal(testNow) || !got.UpdatedAt.Equal(testNow) {
		t.Fatalf("stored %+v err %v", got, err)
	}
	if c, n := eng.last(); n != 1 || c != (saved{tm.ID, true}) {
		t.Errorf("engine told %+v (%d calls)", c, n)
	}
	if !hasSecret(t, st, "a") {
		t.Error("app has no signing secret")
	}
	dup := valid()
	if err := svc.Create(ctx, dup, nil, nil); !errors.Is(err, model.ErrConflict) {
		t.Errorf("duplicate: %v", err)
	}
}

// TestCreateRefused checks that neither an invalid timer nor one its Check
// refuses is written.
func TestCreateRefused(t *testing.T) {
	t.Parallel()
	denied := errors.New("denied")
	tests := []struct {
		name  string
		timer func() *model.Timer
		check timers.Check
		want  func(error) bool
	}{
		{"invalid", func() *model.Timer { tm := valid(); tm.Schedule = "0 24 * * *"; return tm }, nil, func(err error) bool {
			var fe *model.FieldError
			return errors.As(err, &fe) && fe.Field == "schedule" && fe.Message == "hour: 24 is out of range 0-23"
		}},
		{"checked", valid, func(*model.Timer) error { return denied }, func(err error) bool { return errors.Is(err, denied) }},
		{"invalid before checked", func() *model.Timer { tm := valid(); tm.Name = ""; return tm },
			func(*model.Timer) error { return denied }, func(err error) bool {
				var fe *model.FieldError
				return errors.As(err, &fe) && fe.Field == "name"
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			svc, st, eng := newService(t)
			if err := svc.Create(context.Background(), tt.timer(), tt.check, nil); !tt.want(err) {
				t.Fatalf("err %v", err)
			}
			list, _, err := st.ListTimers(context.Background(), store.TimerFilter{})
			if err != nil || len(list) != 0 {
				t.Errorf("%d timers written (err %v)", len(list), err)
			}
			if _, n := eng.last(); n != 0 {
				t.Errorf("engine told %d times", n)
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	t.Parallel()
	planned := testNow.Add(10 * time.Minute)
	tests := []struct {
		name       string
		change     func(*model.Timer)
		wantReplan bool
	}{
		{"timeout", func(t *model.Timer) { t.Timeout = time.Minute }, false},
		{"schedule", func(t *model.Timer) { t.Schedule = "@every 2m" }, true},
		{"policy", func(t *model.Timer) { t.Policy.Overlap = model.OverlapSkip }, true},
		{"app", func(t *model.Timer) { t.App = "other" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			svc, st, eng := newService(t)
			ctx := context.Background()
			old := valid()
			if err := svc.Create(ctx, old, nil, nil); err != nil {
				t.Fatal(err)
			}
			if err := st.SetPlannedUntil(ctx, map[string]store.Plan{old.ID: {Until: planned}}); err != nil {
				t.Fatal(err)
			}
			old, _ = st.GetTimer(ctx, old.ID)
			cur := valid()
			tt.change(cur)
			replanned, err := svc.Update(ctx, cur, old, nil, nil)
			if err != nil || replanned != tt.wantReplan {
				t.Fatalf("replanned %v err %v, want %v", replanned, err, tt.wantReplan)
			}
			got, _ := st.GetTimer(ctx, old.ID)
			if got.ID != old.ID || !got.CreatedAt.Equal(old.CreatedAt) {
				t.Errorf("identity lost: %+v", got)
			}
			if keeps := got.PlannedUntil.Equal(planned); keeps == tt.wantReplan {
				t.Errorf("PlannedUntil %v after a change of %s", got.PlannedUntil, tt.name)
			}
			if c, _ := eng.last(); c != (saved{old.ID, tt.wantReplan}) {
				t.Errorf("engine told %+v", c)
			}
			if got.App != "a" && !hasSecret(t, st, got.App) {
				t.Errorf("app %s has no signing secret", got.App)
			}
		})
	}
}

// TestUpsert checks the idempotent save, and that a change of policy
// alone replans (the library's Upsert once did not).
func TestUpsert(t *testing.T) {
	t.Parallel()
	svc, st, eng := newService(t)
	ctx := context.Background()
	id, err := svc.Upsert(ctx, valid())
	if err != nil {
		t.Fatal(err)
	}
	if _, n := eng.last(); n != 1 {
		t.Fatalf("%d engine calls after create", n)
	}
	again := valid()
	again.Timezone = "" // the default, spelt out or not
	if id2, err := svc.Upsert(ctx, again); err != nil || id2 != id {
		t.Fatalf("same definition: id %s err %v", id2, err)
	}
	if _, n := eng.last(); n != 1 {
		t.Errorf("same definition told the engine (%d calls)", n)
	}
	pol := valid()
	pol.Policy.Misfire = model.MisfireSkip
	if id2, err := svc.Upsert(ctx, pol); err != nil || id2 != id {
		t.Fatalf("policy change: id %s err %v", id2, err)
	}
	if c, n := eng.last(); n != 2 || c != (saved{id, true}) {
		t.Errorf("policy change: engine told %+v (%d calls), want a replan", c, n)
	}
	got, _ := st.GetTimer(ctx, id)
	if got.Policy.Misfire != model.MisfireSkip {
		t.Errorf("policy not stored: %+v", got.Policy)
	}
	bad := valid()
	bad.Retry.MaxAttempts = 0
	var fe *model.FieldError
	if _, err := svc.Upsert(ctx, bad); !errors.As(err, &fe) || fe.Field != "retry.max_attempts" {
		t.Errorf("invalid: %v", err)
	}
}

func TestSetEnabled(t *testing.T) {
	t.Parallel()
	svc, st, eng := newService(t)
	ctx := context.Background()
	tm := valid()
	if err := svc.Create(ctx, tm, nil, nil); err != nil {
		t.Fatal(err)
	}
	if changed, err := svc.SetEnabled(ctx, tm, true, nil); err != nil || changed {
		t.Fatalf("enable an enabled timer: changed %v err %v", changed, err)
	}
	if changed, err := svc.SetEnabled(ctx, tm, false, nil); err != nil || !changed {
		t.Fatalf("disable: changed %v err %v", changed, err)
	}
	if c, n := eng.last(); n != 2 || c != (saved{tm.ID, true}) {
		t.Errorf("engine told %+v (%d calls)", c, n)
	}
	if got, _ := st.GetTimer(ctx, tm.ID); got.Enabled {
		t.Error("still enabled")
	}
}

// racingStore is a store whose timer reads and writes follow a script, as
// when other replicas create, change and delete the same timer meanwhile.
// Its other methods are those of the embedded store.
type racingStore struct {
	timers.Store
	mu      sync.Mutex
	gets    []error // GetTimerByName's answers in turn; nil finds old
	old     *model.Timer
	create  error // SaveTimer's answer to a create
	update  error // SaveTimer's answer to an update
	created int
}

func (s *racingStore) GetTimerByName(ctx context.Context, app, name string) (*model.Timer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := model.ErrNotFound
	if len(s.gets) > 0 {
		err, s.gets = s.gets[0], s.gets[1:]
	}
	if err != nil {
		return nil, err
	}
	c := *s.old
	return &c, nil
}

func (s *racingStore) SaveTimer(ctx context.Context, w store.TimerWrite) ([]*model.Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !w.Create {
		return nil, s.update
	}
	if s.create == nil {
		s.created++
	}
	return nil, s.create
}

func (s *racingStore) EnsureSigningSecret(ctx context.Context, app, secret string, now time.Time) (bool, error) {
	return true, nil
}

func TestUpsertRaces(t *testing.T) {
	t.Parallel()
	old := valid()
	old.ID, old.Schedule = "OLD", "@every 5m"
	down := errors.New("down")
	tests := []struct {
		name        string
		st          *racingStore
		wantErr     error // nil: none
		wantCreated int
	}{
		{"another replica created it first", &racingStore{gets: []error{model.ErrNotFound, nil}, old: old,
			create: model.ErrConflict}, nil, 0},
		{"deleted meanwhile", &racingStore{gets: []error{nil, model.ErrNotFound}, old: old,
			update: model.ErrNotFound}, nil, 1},
		{"contention", &racingStore{old: old, create: model.ErrConflict}, timers.ErrContention, 0},
		{"store down", &racingStore{gets: []error{down}}, down, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			svc := timers.NewService(timers.Config{Store: tt.st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			_, err := svc.Upsert(context.Background(), valid())
			if tt.wantErr == nil && err != nil || !errors.Is(err, tt.wantErr) {
				t.Errorf("err %v, want %v", err, tt.wantErr)
			}
			if tt.st.created != tt.wantCreated {
				t.Errorf("%d created, want %d", tt.st.created, tt.wantCreated)
			}
		})
	}
}

// TestEnableClearsDisabledReason: a timer chime disabled, with the reason
// recorded, loses the reason when it is enabled again.
func TestEnableClearsDisabledReason(t *testing.T) {
	t.Parallel()
	svc, st, _ := newService(t)
	ctx := context.Background()
	tm := valid()
	if err := svc.Create(ctx, tm, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetEnabled(ctx, tm, false, nil); err != nil {
		t.Fatal(err)
	}
	tm.DisabledReason = "disabled at upgrade: action.shell.env: LD_PRELOAD may not be set"
	if err := st.UpdateTimer(ctx, tm); err != nil {
		t.Fatal(err)
	}
	got, _ := st.GetTimer(ctx, tm.ID)
	if got.DisabledReason == "" {
		t.Fatal("the reason was not stored")
	}
	if _, err := svc.SetEnabled(ctx, got, true, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.GetTimer(ctx, tm.ID); !got.Enabled || got.DisabledReason != "" {
		t.Errorf("after enable: enabled %v, reason %q", got.Enabled, got.DisabledReason)
	}
}

// TestOneShotInThePast: a one-shot whose instant is more than
// model.MisfireGrace ago is refused on create, upsert and on an update
// that changes its schedule (a field error on schedule); one saved within
// the grace is accepted (it fires at once), and a stored one-shot that
// fired may be saved again with its schedule unchanged.
func TestOneShotInThePast(t *testing.T) {
	t.Parallel()
	at := func(d time.Duration) string { return "@at " + testNow.Add(d).Format(time.RFC3339Nano) }
	isSchedule := func(err error) bool {
		var fe *model.FieldError
		return errors.As(err, &fe) && fe.Field == "schedule"
	}
	tests := []struct {
		name, spec string
		refused    bool
	}{
		{"future", at(time.Minute), false},
		{"within the grace", at(-model.MisfireGrace + time.Second), false},
		{"beyond the grace", at(-model.MisfireGrace - time.Second), true},
		{"two minutes ago", at(-2 * time.Minute), true},
		{"cron", "0 0 0 1 1 * 2020", false}, // no fire left: not a one-shot, not this check
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			svc, _, _ := newService(t)
			ctx := context.Background()
			tm := valid()
			tm.Schedule = tt.spec
			err := svc.Create(ctx, tm, nil, nil)
			if tt.refused != isSchedule(err) || !tt.refused && err != nil {
				t.Fatalf("create: %v, want refused %v", err, tt.refused)
			}
			up := valid()
			up.Name = "upserted"
			up.Schedule = tt.spec
			if _, err := svc.Upsert(ctx, up); tt.refused != isSchedule(err) || !tt.refused && err != nil {
				t.Fatalf("upsert: %v, want refused %v", err, tt.refused)
			}
		})
	}
	t.Run("update", func(t *testing.T) {
		t.Parallel()
		svc, st, _ := newService(t)
		ctx := context.Background()
		tm := valid()
		tm.Schedule = at(-10 * time.Second)
		if err := svc.Create(ctx, tm, nil, nil); err != nil {
			t.Fatal(err)
		}
		// Later, the same one-shot is changed in another field.
		old, err := st.GetTimer(ctx, tm.ID)
		if err != nil {
			t.Fatal(err)
		}
		next := *old
		next.Description = "fired"
		if _, err := svc.Update(ctx, &next, old, nil, nil); err != nil {
			t.Fatalf("update keeping the schedule: %v", err)
		}
		moved := *old
		moved.Schedule = at(-time.Hour)
		if _, err := svc.Update(ctx, &moved, old, nil, nil); !isSchedule(err) {
			t.Fatalf("update to an instant an hour ago: %v", err)
		}
	})
}

package timers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/schedule"
	"github.com/chimehq/chime/webhook"
)

// ErrContention is wrapped by Upsert's error when other writers kept
// creating, changing or deleting the same timer while it tried: the caller
// may try again.
var ErrContention = errors.New("too much contention, try again")

// upsertTries bounds Upsert's rounds of read, compare and write.
const upsertTries = 5

// Engine is what the save path needs of the engine: it plans, replans or
// cancels a saved timer's runs. replan is true on creation, on enable and
// disable, and when NeedsReplan says the timer's fires changed.
//
// A save is one store transaction (store.Store.SaveTimer): PlanSave fills
// the write before it is made, Saved is told what it inserted after.
type Engine interface {
	// PlanSave adds to w what replanning w.Timer writes with it: for an
	// enabled timer the runs of its next fires, Timer.PlannedUntil and
	// ReplaceFrom; for a disabled one CancelPending. It writes nothing.
	PlanSave(ctx context.Context, w *store.TimerWrite, replan bool)
	// Saved is told of a written save and the runs it inserted.
	Saved(ctx context.Context, t *model.Timer, replan bool, inserted []*model.Run)
}

// Store is what a Service needs of the store: the timers it reads, the
// save's transaction, the audit entries written beside it and the apps'
// signing secrets (store.Store implements it).
type Store interface {
	GetTimer(ctx context.Context, id string) (*model.Timer, error)
	GetTimerByName(ctx context.Context, app string, name string) (*model.Timer, error)
	SaveTimer(ctx context.Context, w store.TimerWrite) (inserted []*model.Run, err error)
	AppendAudit(ctx context.Context, e *model.AuditEntry) error
	EnsureSigningSecret(ctx context.Context, app string, secret string, now time.Time) (bool, error)
}

// Config configures a Service. Store is required.
type Config struct {
	Store Store
	// Engine is told of every saved timer; nil tells nobody (the planner's
	// periodic pass plans the timer then).
	Engine Engine
	// Validate are the options every definition is validated with.
	Validate ValidateOptions
	// Clock tells the time of created_at and updated_at; nil means the
	// system clock.
	Clock clock.Clock
	// Logger logs what the save path recovers from (the signing secret
	// failing after the timer was written); nil means slog.Default().
	Logger *slog.Logger
}

// Service is the one path that saves timers: create, update, upsert,
// enable and disable. It is safe for concurrent use.
type Service struct {
	cfg Config
}

// NewService returns a Service for cfg.
func NewService(cfg Config) *Service {
	cfg.Clock = clock.Default(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{cfg: cfg}
}

// A Check vets a valid definition just before it is written; its error is
// returned as it is and nothing is written. The REST API checks with it
// that the caller's token may write in the timer's app.
type Check func(t *model.Timer) error

// Validate validates and normalises t (see Validate) with the service's
// options. Its error names the timer and wraps the *model.FieldError.
func (s *Service) Validate(t *model.Timer) error {
	if err := Validate(t, s.cfg.Validate); err != nil {
		return fmt.Errorf("timer %s/%s: %w", t.App, t.Name, err)
	}
	return nil
}

// Create validates t, passes it to check (when not nil), and creates it:
// it gets a new id and its creation time. The engine plans the timer in
// the same transaction, which also appends audit when it is not nil (see
// fillAudit), and the timer's app gets its first signing secret if it has
// none. A timer of the same app and name gives an error wrapping
// model.ErrConflict.
func (s *Service) Create(ctx context.Context, t *model.Timer, check Check, audit *model.AuditEntry) error {
	if err := s.vet(ctx, t, nil, check); err != nil {
		return err
	}
	return s.create(ctx, t, audit)
}

// Update validates t, the new definition of old (the stored timer), passes
// it to check (when not nil), and writes it. t keeps old's id and creation
// time; its runs are replanned if NeedsReplan says so, which Update
// reports; audit, when not nil, is appended in the same transaction. A
// timer moved to another app gives that app its first signing secret if it
// has none. A timer deleted meanwhile gives an error wrapping
// model.ErrNotFound.
func (s *Service) Update(ctx context.Context, t, old *model.Timer, check Check, audit *model.AuditEntry) (replanned bool, err error) {
	if err := s.vet(ctx, t, old, check); err != nil {
		return false, err
	}
	return s.update(ctx, t, old, audit)
}

// Upsert validates t and creates it, or updates the timer of the same
// (app, name), and returns its id. It is idempotent: when the stored timer
// has the same definition (SameDefinition), nothing is written and nothing
// replanned, so that every replica of an application may upsert its timers
// at start-up. Writers racing on the same timer are retried a few times;
// then the error wraps ErrContention.
func (s *Service) Upsert(ctx context.Context, t *model.Timer) (id string, err error) {
	if err := s.Validate(t); err != nil {
		return "", err
	}
	if err := s.resolveAfter(ctx, t); err != nil {
		return "", err
	}
	for range upsertTries {
		old, err := s.cfg.Store.GetTimerByName(ctx, t.App, t.Name)
		switch {
		case errors.Is(err, model.ErrNotFound):
			if err := s.checkPast(t, nil); err != nil {
				return "", err
			}
			err = s.create(ctx, t, nil)
			if errors.Is(err, model.ErrConflict) {
				continue // another replica created it first: compare with it
			}
			if err != nil {
				return "", err
			}
			return t.ID, nil
		case err != nil:
			return "", fmt.Errorf("timer %s/%s: %w", t.App, t.Name, err)
		}
		if SameDefinition(old, t) {
			return old.ID, nil
		}
		if err := s.checkPast(t, old); err != nil {
			return "", err
		}
		_, err = s.update(ctx, t, old, nil)
		if errors.Is(err, model.ErrNotFound) {
			continue // deleted meanwhile: create it again
		}
		if err != nil {
			return "", err
		}
		return t.ID, nil
	}
	return "", fmt.Errorf("timer %s/%s: %w", t.App, t.Name, ErrContention)
}

// SetEnabled enables or disables t, a stored timer, and reports whether
// that changed it (enabling an enabled timer writes only audit). The
// definition is not validated again: a timer that is stored may always be
// paused and resumed. Its runs are replanned (or cancelled) and audit, when
// not nil, appended, in one transaction.
func (s *Service) SetEnabled(ctx context.Context, t *model.Timer, enabled bool, audit *model.AuditEntry) (changed bool, err error) {
	if t.Enabled == enabled {
		if audit != nil {
			fillAudit(audit, t)
			if err := s.cfg.Store.AppendAudit(ctx, audit); err != nil {
				return false, fmt.Errorf("timer %s/%s: %w", t.App, t.Name, err)
			}
		}
		return false, nil
	}
	t.Enabled = enabled
	if enabled {
		t.DisabledReason = ""
	}
	t.UpdatedAt = s.cfg.Clock.Now().UTC()
	t.PlannedUntil = time.Time{} // the engine replans
	if err := s.write(ctx, store.TimerWrite{Timer: t, Audit: audit}, true); err != nil {
		return false, fmt.Errorf("update timer %s/%s: %w", t.App, t.Name, err)
	}
	return true, nil
}

// SetPaused pauses or resumes t, a stored timer, and reports whether that
// changed it (pausing a paused timer writes only audit). Pausing is not
// disabling: the timer keeps its schedule and its plan, and each of its
// fires is recorded skipped with the reason model.SkipPaused when its
// instant comes (the executor's policy); no run is written for a fire to
// come. Resuming replans it from now, as an enable does: the fires paused
// that are not yet due run, and those that were due meanwhile are not
// caught up. Audit, when not nil, is appended in the same transaction.
func (s *Service) SetPaused(ctx context.Context, t *model.Timer, paused bool, audit *model.AuditEntry) (changed bool, err error) {
	if t.Paused == paused {
		if audit != nil {
			fillAudit(audit, t)
			if err := s.cfg.Store.AppendAudit(ctx, audit); err != nil {
				return false, fmt.Errorf("timer %s/%s: %w", t.App, t.Name, err)
			}
		}
		return false, nil
	}
	t.Paused = paused
	t.UpdatedAt = s.cfg.Clock.Now().UTC()
	w := store.TimerWrite{Timer: t, Audit: audit}
	replan := !paused
	if !paused {
		t.PlannedUntil = time.Time{} // the engine replans from now
	}
	if err := s.write(ctx, w, replan); err != nil {
		return false, fmt.Errorf("update timer %s/%s: %w", t.App, t.Name, err)
	}
	return true, nil
}

// fillAudit completes e, the audit entry of a change of t, with what the
// save knows: the timer's app and id, and its name as the detail unless e
// has one.
func fillAudit(e *model.AuditEntry, t *model.Timer) {
	e.App, e.Target = t.App, t.ID
	if e.Detail == "" {
		e.Detail = t.Name
	}
}

// vet validates t, resolves its After, and passes it to check.
func (s *Service) vet(ctx context.Context, t *model.Timer, old *model.Timer, check Check) error {
	if err := s.Validate(t); err != nil {
		return err
	}
	if err := s.checkPast(t, old); err != nil {
		return err
	}
	if err := s.resolveAfter(ctx, t); err != nil {
		return err
	}
	if check != nil {
		return check(t)
	}
	return nil
}

// checkPast refuses a one-shot (@at) whose instant is more than
// model.MisfireGrace ago: it would never fire. A one-shot saved within the
// grace fires at once (the planner starts its plan that far back). old,
// when not nil, is the stored timer t replaces: a one-shot whose schedule
// and zone it keeps may be saved again after it fired.
func (s *Service) checkPast(t, old *model.Timer) error {
	if t.Schedule == "" || old != nil && old.Schedule == t.Schedule && old.Timezone == t.Timezone {
		return nil
	}
	sched, err := Schedule(t)
	if err != nil || !schedule.IsOneShot(sched) {
		return nil // Validate reports a bad schedule
	}
	now := s.cfg.Clock.Now()
	if !sched.Next(now.Add(-model.MisfireGrace)).IsZero() {
		return nil
	}
	at := sched.Next(time.Time{})
	return fmt.Errorf("timer %s/%s: %w", t.App, t.Name, model.Errorf("schedule",
		"%s is %s in the past: a one-shot fires only when saved at most %s after its instant",
		at.Format(time.RFC3339), now.Sub(at).Round(time.Second), model.MisfireGrace))
}

// create writes the valid timer t as a new timer and tells the others.
func (s *Service) create(ctx context.Context, t *model.Timer, audit *model.AuditEntry) error {
	now := s.cfg.Clock.Now().UTC()
	t.ID = ulid.Make().String()
	t.CreatedAt, t.UpdatedAt = now, now
	t.PlannedUntil = time.Time{}
	if err := s.write(ctx, store.TimerWrite{Timer: t, Create: true, Audit: audit}, true); err != nil {
		return fmt.Errorf("create timer %s/%s: %w", t.App, t.Name, err)
	}
	s.ensureSigningSecret(ctx, t.App)
	return nil
}

// update writes the valid timer t over old and tells the others. t keeps
// old's Paused: only SetPaused changes it.
func (s *Service) update(ctx context.Context, t, old *model.Timer, audit *model.AuditEntry) (replanned bool, err error) {
	t.ID, t.CreatedAt, t.UpdatedAt = old.ID, old.CreatedAt, s.cfg.Clock.Now().UTC()
	t.Paused = old.Paused
	replan := NeedsReplan(old, t)
	if replan {
		t.PlannedUntil = time.Time{}
	} else {
		t.PlannedUntil, t.NextFireAt = old.PlannedUntil, old.NextFireAt
	}
	if err := s.write(ctx, store.TimerWrite{Timer: t, Audit: audit}, replan); err != nil {
		return false, fmt.Errorf("update timer %s/%s: %w", t.App, t.Name, err)
	}
	if t.App != old.App {
		s.ensureSigningSecret(ctx, t.App)
	}
	return replan, nil
}

// write saves w in one transaction, planned by the engine (see Engine).
// Without an engine the timer is written unplanned (a zero PlannedUntil),
// and the planner's periodic pass plans it.
func (s *Service) write(ctx context.Context, w store.TimerWrite, replan bool) error {
	if s.cfg.Engine != nil {
		s.cfg.Engine.PlanSave(ctx, &w, replan)
	}
	if w.Audit != nil {
		fillAudit(w.Audit, w.Timer)
	}
	inserted, err := s.cfg.Store.SaveTimer(ctx, w)
	if err != nil {
		return err
	}
	if s.cfg.Engine != nil {
		s.cfg.Engine.Saved(ctx, w.Timer, replan, inserted)
	}
	return nil
}

// resolveAfter replaces each "app/name" of t.After by that timer's id, and
// refuses with a *model.FieldError (wrapped with the timer's name) an
// upstream that does not exist or that two entries name. Cycles are
// refused by the store, in the save's transaction.
func (s *Service) resolveAfter(ctx context.Context, t *model.Timer) error {
	seen := map[string]int{}
	for i := range t.After {
		d := &t.After[i]
		field := fmt.Sprintf("after[%d].timer", i)
		var (
			up  *model.Timer
			err error
		)
		if app, name, ok := strings.Cut(d.Timer, "/"); ok {
			up, err = s.cfg.Store.GetTimerByName(ctx, app, name)
		} else {
			up, err = s.cfg.Store.GetTimer(ctx, d.Timer)
		}
		if errors.Is(err, model.ErrNotFound) {
			return fmt.Errorf("timer %s/%s: %w", t.App, t.Name, model.Errorf(field, "no timer %q", d.Timer))
		}
		if err != nil {
			return fmt.Errorf("timer %s/%s: %s: %w", t.App, t.Name, field, err)
		}
		if up.ID == t.ID || (up.App == t.App && up.Name == t.Name) {
			return fmt.Errorf("timer %s/%s: %w", t.App, t.Name, model.Errorf(field, "a timer cannot run after itself"))
		}
		if j, dup := seen[up.ID]; dup {
			return fmt.Errorf("timer %s/%s: %w", t.App, t.Name, model.Errorf(field, "names the same timer as after[%d]", j))
		}
		seen[up.ID] = i
		d.Timer = up.ID
	}
	return nil
}

// ensureSigningSecret gives app its first signing secret if it has none,
// when a timer is created in it or moved to it, so that a receiver can
// fetch it before the first callback. A failure is logged, not returned:
// the timer is saved, and the sender creates the secret on the app's first
// callback.
func (s *Service) ensureSigningSecret(ctx context.Context, app string) {
	if _, err := s.cfg.Store.EnsureSigningSecret(ctx, app, webhook.NewSecret(), s.cfg.Clock.Now().UTC()); err != nil {
		s.cfg.Logger.Error("timers: signing secret not created; the first callback will create it", "app", app, "err", err)
	}
}

package chime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/chimehq/chime/api"
	"github.com/chimehq/chime/model"
)

// Defaults of the fields of Timer left zero, the same as the REST API's.
const (
	DefaultTimeout     = api.DefaultTimeout
	DefaultMaxAttempts = api.DefaultMaxAttempts
	DefaultBackoff     = api.DefaultBackoff
)

// toModel applies the defaults and validates t as the REST API does, plus
// the handler's own args check.
func (n *Node) toModel(t Timer) (*model.Timer, error) {
	m := &model.Timer{
		App: t.App, Name: t.Name, Description: t.Description, Schedule: t.Schedule,
		Timezone: t.Timezone, Enabled: !t.Disabled, Action: t.Action, Timeout: t.Timeout, Retry: t.Retry,
	}
	if m.App == "" {
		m.App = n.cfg.App
	}
	if m.Timeout == 0 {
		m.Timeout = DefaultTimeout
	}
	if m.Retry.MaxAttempts == 0 {
		m.Retry.MaxAttempts = DefaultMaxAttempts
	}
	if m.Retry.Backoff == 0 {
		m.Retry.Backoff = DefaultBackoff
	}
	if h := m.Action.Handler; h != nil && len(h.Args) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, h.Args); err != nil {
			return nil, fmt.Errorf("chime: timer %s/%s: action.handler.args: %w", m.App, m.Name, err)
		}
		h2 := *h
		h2.Args = buf.Bytes()
		m.Action.Handler = &h2
	}
	err := api.ValidateTimer(m, api.ValidateOptions{AllowShell: n.cfg.AllowShell, HandlerExists: n.HandlerExists, Egress: n.cfg.Egress})
	if err == nil && m.Action.Type == model.ActionHandler {
		err = n.ValidateArgs(m.Action.Handler.Name, m.Action.Handler.Args)
	}
	if err != nil {
		return nil, fmt.Errorf("chime: timer %s/%s: %w", m.App, m.Name, err)
	}
	return m, nil
}

// Upsert creates the timer t, or updates the timer of the same (app, name),
// and returns its id. It is idempotent: every replica of an application may
// call it at start-up with the same definition, and the cluster ends up
// with one timer. When the stored timer equals t, nothing is written and
// nothing is replanned; when it differs, it is updated, and its future runs
// are replanned if its schedule, zone or enabled flag changed. t is
// validated like a timer of the REST API (a handler action needs a handler
// registered on this node, and its args pass the handler's ArgsValidator).
//
// Upsert may be called before Start (the timer is planned at once and
// fires once the node runs) or after.
func (n *Node) Upsert(ctx context.Context, t Timer) (id string, err error) {
	m, err := n.toModel(t)
	if err != nil {
		return "", err
	}
	for range 5 {
		old, err := n.store.GetTimerByName(ctx, m.App, m.Name)
		switch {
		case errors.Is(err, model.ErrNotFound):
			now := time.Now().UTC()
			m.ID = ulid.Make().String()
			m.CreatedAt, m.UpdatedAt = now, now
			err = n.store.CreateTimer(ctx, m)
			if errors.Is(err, model.ErrConflict) {
				continue // another replica created it first: compare with it
			}
			if err != nil {
				return "", fmt.Errorf("chime: create timer %s/%s: %w", m.App, m.Name, err)
			}
			n.saved(ctx, m, true)
			return m.ID, nil
		case err != nil:
			return "", fmt.Errorf("chime: timer %s/%s: %w", m.App, m.Name, err)
		}
		if sameDefinition(old, m) {
			return old.ID, nil
		}
		m.ID, m.CreatedAt, m.UpdatedAt = old.ID, old.CreatedAt, time.Now().UTC()
		changed := m.Schedule != old.Schedule || m.Timezone != old.Timezone || m.Enabled != old.Enabled
		if !changed {
			m.PlannedUntil = old.PlannedUntil
		}
		err = n.store.UpdateTimer(ctx, m)
		if errors.Is(err, model.ErrNotFound) {
			continue // deleted meanwhile: create it again
		}
		if err != nil {
			return "", fmt.Errorf("chime: update timer %s/%s: %w", m.App, m.Name, err)
		}
		n.saved(ctx, m, changed)
		return m.ID, nil
	}
	return "", fmt.Errorf("chime: timer %s/%s: too much contention, try again", m.App, m.Name)
}

// saved tells the engine; a failure is logged, as the API does: the timer
// is stored and the planner's periodic pass catches up.
func (n *Node) saved(ctx context.Context, t *model.Timer, scheduleChanged bool) {
	if err := n.engine.TimerSaved(ctx, t, scheduleChanged); err != nil {
		n.cfg.Logger.Warn("chime: engine did not take the saved timer; the planner will catch up", "timer", t.ID, "err", err)
	}
}

// sameDefinition compares the fields a user defines: every field of the
// timer's JSON form but its id and timestamps (PlannedUntil is not in it),
// semantically, so that args written with other spacing or key order, and
// nil or empty maps, compare equal. Fields added to model.Timer later are
// compared without a change here.
func sameDefinition(a, b *model.Timer) bool {
	return sameJSON(definition(a), definition(b))
}

func definition(t *model.Timer) []byte {
	c := *t
	c.ID, c.CreatedAt, c.UpdatedAt = "", time.Time{}, time.Time{}
	b, _ := json.Marshal(&c)
	return b
}

func sameJSON(a, b []byte) bool {
	empty := func(x []byte) bool { return len(bytes.TrimSpace(x)) == 0 || string(bytes.TrimSpace(x)) == "null" }
	if empty(a) || empty(b) {
		return empty(a) && empty(b)
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(va, vb)
}

// Every defines the timer name of Config.App that calls the handler
// registered under handler on schedule spec ("@every 5m", "0 3 * * *", ...),
// with no args and the default timeout and retry policy. It validates now;
// before Start, the timer is upserted when the node starts (Start reports
// a failure); after Start, it is upserted at once.
func (n *Node) Every(name, spec, handler string) error {
	t := Timer{Name: name, Schedule: spec, Action: HandlerAction(handler, nil)}
	if _, err := n.toModel(t); err != nil {
		return err
	}
	n.mu.Lock()
	if !n.started {
		n.pending = append(n.pending, t)
		n.mu.Unlock()
		return nil
	}
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := n.Upsert(ctx, t)
	return err
}

// Delete deletes the timer (app, name) and its pending runs. App "" means
// Config.App. It returns an error wrapping model.ErrNotFound when the timer
// does not exist.
func (n *Node) Delete(ctx context.Context, app, name string) error {
	if app == "" {
		app = n.cfg.App
	}
	t, err := n.store.GetTimerByName(ctx, app, name)
	if err != nil {
		return fmt.Errorf("chime: timer %s/%s: %w", app, name, err)
	}
	if err := n.store.DeleteTimer(ctx, t.ID); err != nil {
		return fmt.Errorf("chime: delete timer %s/%s: %w", app, name, err)
	}
	return n.engine.TimerDeleted(ctx, t.ID)
}

// Trigger fires the timer (app, name) now, outside its schedule, and
// returns the new run. App "" means Config.App.
func (n *Node) Trigger(ctx context.Context, app, name string) (*model.Run, error) {
	if app == "" {
		app = n.cfg.App
	}
	t, err := n.store.GetTimerByName(ctx, app, name)
	if err != nil {
		return nil, fmt.Errorf("chime: timer %s/%s: %w", app, name, err)
	}
	return n.engine.Trigger(ctx, t)
}

package chime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/chimehq/chime/internal/timers"
	"github.com/chimehq/chime/model"
)

// Defaults of the fields of Timer left zero, the same as the REST API's
// (see package timers).
const (
	DefaultTimeout     = timers.DefaultTimeout
	DefaultMaxAttempts = timers.DefaultMaxAttempts
	DefaultBackoff     = timers.DefaultBackoff
)

// timerService returns the save path of this node's timers: validated as the
// REST API validates them, with this node's handlers and their
// ArgsValidators, shell setting and callback policy.
func (n *Node) timerService() *timers.Service {
	return timers.NewService(timers.Config{
		Store: n.store, Engine: n.engine, Logger: n.cfg.Logger,
		Validate: timers.ValidateOptions{AllowShell: n.cfg.Security.AllowShell, HandlerExists: n.HandlerExists,
			ValidateArgs: n.ValidateArgs, Egress: n.cfg.Security.Egress},
	})
}

// toModel converts t to its model form: App defaults to Config.App, zero
// fields take their defaults (timers.FillDefaults), and handler args are
// compacted, so that args written with other spacing compare equal.
func (n *Node) toModel(t Timer) (*model.Timer, error) {
	m := &model.Timer{
		App: t.App, Name: t.Name, Description: t.Description, Schedule: t.Schedule,
		Timezone: t.Timezone, Enabled: !t.Disabled, Action: t.Action, Timeout: t.Timeout, Retry: t.Retry,
		Policy: t.Policy, History: t.History, Priority: t.Priority, Notify: t.Notify,
	}
	if len(t.After) > 0 {
		m.After = append([]model.Dependency(nil), t.After...)
	}
	if m.App == "" {
		m.App = n.cfg.App
	}
	timers.FillDefaults(m)
	if h := m.Action.Handler; h != nil && len(h.Args) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, h.Args); err != nil {
			return nil, fmt.Errorf("timer %s/%s: action.handler.args: %w", m.App, m.Name, err)
		}
		h2 := *h
		h2.Args = buf.Bytes()
		m.Action.Handler = &h2
	}
	return m, nil
}

// Upsert creates the timer t, or updates the timer of the same (app, name),
// and returns its id. It is idempotent: every replica of an application may
// call it at start-up with the same definition, and the cluster ends up
// with one timer. When the stored timer equals t, nothing is written and
// nothing is replanned; when it differs, it is updated, and its future runs
// are replanned if its schedule, zone, enabled flag or policy changed (see
// timers.NeedsReplan). t is validated like a timer of the REST API (a
// handler action needs a handler registered on this node, and its args pass
// the handler's ArgsValidator), and saved through the same path
// (timers.Service), which also gives a new app its first signing secret.
//
// Upsert may be called before Start (the timer is planned at once and
// fires once the node runs) or after.
func (n *Node) Upsert(ctx context.Context, t Timer) (id string, err error) {
	m, err := n.toModel(t)
	if err == nil {
		id, err = n.timerService().Upsert(ctx, m)
	}
	if err != nil {
		return "", fmt.Errorf("chime: %w", err)
	}
	return id, nil
}

// Every defines the timer name of Config.App that calls the handler
// registered under handler on schedule spec ("@every 5m", "0 3 * * *", ...),
// with no args and the default timeout and retry policy. It validates now;
// before Start, the timer is upserted when the node starts (Start reports
// a failure); after Start, it is upserted at once.
func (n *Node) Every(name, spec, handler string) error {
	t := Timer{Name: name, Schedule: spec, Action: HandlerAction(handler, nil)}
	m, err := n.toModel(t)
	if err == nil {
		err = n.timerService().Validate(m)
	}
	if err != nil {
		return fmt.Errorf("chime: %w", err)
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
	_, err = n.Upsert(ctx, t)
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

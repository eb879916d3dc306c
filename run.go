package chime

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/chimehq/chime/model"
)

// Run is one attempt of one fire of a handler timer, as its handler sees it.
// The embedded model.Run gives ID (the same for every attempt of the fire:
// use it to make the handler idempotent), TimerID, ScheduledAt (the nominal
// instant) and Attempt (1 for the first). A shard of a broadcast or sharded
// fire (docs/fleet.md) also has Shard (its Index, from 0, and the Total)
// and FireID, the id of the fire's own run; its ID is the shard's.
type Run struct {
	*model.Run
	// Timer is the timer that fired.
	Timer *model.Timer
	// Handler is the name the handler was called by.
	Handler string
	// Args are the action's JSON args, as written in the timer; nil when
	// the timer has none.
	Args json.RawMessage
}

// Decode unmarshals the run's args into v. Absent args leave v unchanged.
func (r *Run) Decode(v any) error {
	if len(r.Args) == 0 || string(r.Args) == "null" {
		return nil
	}
	if err := json.Unmarshal(r.Args, v); err != nil {
		return fmt.Errorf("handler %s: args: %w", r.Handler, err)
	}
	return nil
}

// Handler runs the fires of handler timers. Run's output and error are
// recorded as the run's result; ctx is cancelled at the timer's timeout.
type Handler interface {
	Run(ctx context.Context, run *Run) (output []byte, err error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, run *Run) (output []byte, err error)

// Run calls f.
func (f HandlerFunc) Run(ctx context.Context, run *Run) ([]byte, error) { return f(ctx, run) }

// ArgsValidator is implemented by handlers that check their args when a
// timer is created or updated, so that a bad timer is refused at once
// rather than failing at every fire. The error should say what is wrong
// with which arg.
type ArgsValidator interface {
	ValidateArgs(args json.RawMessage) error
}

// handlerRunner adapts a Handler to action.Runner.
type handlerRunner struct {
	name string
	h    Handler
}

func (a handlerRunner) Run(ctx context.Context, run *model.Run, t *model.Timer) ([]byte, error) {
	r := &Run{Run: run, Timer: t, Handler: a.name}
	if t.Action.Handler != nil {
		r.Args = t.Action.Handler.Args
	}
	return a.h.Run(ctx, r)
}

// Timer is a timer as defined in code, for Upsert. It carries every field
// of a timer of the REST API but the ones the server sets (id, timestamps,
// next fires). Zero fields take the defaults of the REST API
// (timers.FillDefaults): App is Config.App, Timezone UTC, Timeout 30s,
// Retry one attempt (no retry) with a backoff of 1s, Policy the defaults
// (every fire runs, late if it must, side by side, for ever). A timer is
// enabled unless Disabled.
//
// Upsert makes the stored timer what Timer says: a field left zero here
// resets what was set through the REST API. Give a timer whose policy is
// managed in code its Policy here.
type Timer struct {
	App         string
	Name        string
	Description string
	// Schedule is a cron expression, "@every 1h", "@at <RFC 3339>", ...
	// (see package schedule).
	Schedule string
	Timezone string
	Disabled bool
	// Action is what the timer does: HandlerAction for a handler of this
	// node, or an HTTP action (whose SecretHeaders name headers kept
	// secret) or a shell action.
	Action  model.Action
	Timeout time.Duration
	Retry   model.RetryPolicy
	// Policy holds the misfire, overlap and catchup policies, the start
	// and end bounds and the maximum number of fires.
	Policy model.Policy
	// History bounds the finished runs kept of this timer; its nil fields
	// take the node's Config.History (Keep and MaxAge), and a
	// zero one is no limit (see model.History).
	History model.History
	// After names the timers this one runs after (by id, or "app/name"),
	// each with how its run must end (model.OnSuccess, OnFailure,
	// OnFinish): see docs/workflows.md. With After, Schedule may be
	// empty. Upsert refuses an upstream that does not exist yet: upsert
	// the upstreams first.
	After []model.Dependency
	// Priority is 0 (lowest) to 9; nil is model.DefaultPriority (5). When
	// more runs are due than the node can claim or start at once, higher
	// priorities go first (docs/workflows.md).
	Priority *int
	// Notify are the timer's failure notifications (docs/workflows.md).
	Notify []model.NotifyRule
}

// HandlerAction returns the action that calls the handler registered under
// name with args encoded as JSON (nil for none). It panics if args cannot be
// encoded, which is a programming error.
func HandlerAction(name string, args any) model.Action {
	var raw json.RawMessage
	if args != nil {
		switch v := args.(type) {
		case json.RawMessage:
			raw = v
		default:
			b, err := json.Marshal(args)
			if err != nil {
				panic(fmt.Sprintf("chime: args of handler %s: %v", name, err))
			}
			raw = b
		}
	}
	return model.Action{Type: model.ActionHandler, Handler: &model.HandlerAction{Name: name, Args: raw}}
}

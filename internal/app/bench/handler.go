package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/chimehq/chime"
	"github.com/chimehq/chime/model"
)

// Go handler actions (--action handler): the timers of steady and burst run
// a handler registered on the node instead of calling the receiver, and
// the handler records what the receiver records, so that every figure of
// the report means the same without HTTP.

// Values of Config.Action.
const (
	ActionHTTP    = model.ActionHTTP    // an HTTP callback to the receiver
	ActionHandler = model.ActionHandler // a Go handler registered on the node
)

// benchHandler is the name the bench's handler is registered under.
const benchHandler = "bench"

// checkAction rejects an action the scenario of cfg cannot measure.
func checkAction(cfg Config) error {
	switch cfg.Action {
	case ActionHTTP:
		return nil
	case ActionHandler:
		if cfg.Scenario != Steady && cfg.Scenario != Burst {
			return fmt.Errorf("bench: --action handler is for the steady and burst scenarios, not %s", cfg.Scenario)
		}
		if cfg.Receiver != "" {
			return fmt.Errorf("bench: --action handler fires no callbacks: it takes no --receiver")
		}
		return nil
	}
	return fmt.Errorf("bench: unknown action %q (http or handler)", cfg.Action)
}

// action returns the action of the node's timers: a callback to the
// receiver, or the bench's handler.
func (n *node) action() model.Action {
	if n.cfg.Action == ActionHandler {
		return model.Action{Type: model.ActionHandler, Handler: &model.HandlerAction{Name: benchHandler}}
	}
	return model.Action{Type: model.ActionHTTP, HTTP: &model.HTTPAction{Method: "POST", URL: n.recv.fireURL()}}
}

// handlerLog is the fireLog of --action handler: the Go handler of the
// bench's timers. Each run it is called for is recorded as the receiver
// records a callback: run id, timer id, scheduled instant and the time the
// handler was called, which stands for the receive time.
type handlerLog struct {
	mu    sync.Mutex
	fires firesHeld
}

func newHandlerLog() *handlerLog { return &handlerLog{fires: newFiresHeld()} }

// Run records the run; it is the handler.
func (h *handlerLog) Run(_ context.Context, run *chime.Run) ([]byte, error) {
	now := time.Now().UnixNano()
	f := fire{runID: run.ID, timerID: run.TimerID, sched: run.ScheduledAt.UnixNano(), recv: now}
	h.mu.Lock()
	h.fires.add(f)
	h.mu.Unlock()
	return nil, nil
}

// fireURL is empty: handler timers call no URL.
func (h *handlerLog) fireURL() string { return "" }

func (h *handlerLog) count(context.Context) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fires.len(), nil
}

func (h *handlerLog) snapshot(context.Context) ([]fire, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fires.slice(0, h.fires.len()), nil
}

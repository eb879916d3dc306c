package action

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/chimehq/chime/model"
)

// ErrNoHandler is wrapped by HandlerRunner.Run's error when the run's
// handler is not registered on the node: the action did not run.
var ErrNoHandler = errors.New("no handler registered")

// noHandlerError says which handler a node lacks; it is ErrNoHandler.
type noHandlerError struct{ name, node string }

func (e noHandlerError) Error() string {
	return fmt.Sprintf("no handler %q registered on node %s", e.name, e.node)
}
func (e noHandlerError) Is(target error) bool { return target == ErrNoHandler }

// HandlerRunner performs "handler" actions: it dispatches a run to the
// Runner registered under the action's handler name. The executor hands a
// run whose handler this node lacks to a node that has it, or ends it at
// once, skipped with the reason model.SkipHandlerMissing, when no live
// node has it (executor.Config.HasHandler and Nodes), so the runner meets such
// a run only in an executor whose HasHandler does not know its handlers:
// the attempt then fails with the error "no handler %q registered on node
// %s" (wrapping ErrNoHandler) and is retried per the timer's retry policy;
// when it was the last attempt, the executor records the run skipped with
// the reason model.SkipHandlerMissing.
//
// It is safe for concurrent use: handlers may be registered while runs are
// dispatched.
type HandlerRunner struct {
	nodeID string

	mu       sync.RWMutex
	handlers map[string]Runner
}

// NewHandlerRunner returns an empty HandlerRunner for the node nodeID (used
// in its error messages).
func NewHandlerRunner(nodeID string) *HandlerRunner {
	return &HandlerRunner{nodeID: nodeID, handlers: map[string]Runner{}}
}

// Register registers r under name, replacing any previous handler of that
// name. It panics on an empty name or a nil runner, like http.Handle.
func (h *HandlerRunner) Register(name string, r Runner) {
	if name == "" {
		panic("action: handler name is empty")
	}
	if r == nil {
		panic("action: nil handler for " + name)
	}
	h.mu.Lock()
	h.handlers[name] = r
	h.mu.Unlock()
}

// Lookup returns the handler registered under name.
func (h *HandlerRunner) Lookup(name string) (Runner, bool) {
	h.mu.RLock()
	r, ok := h.handlers[name]
	h.mu.RUnlock()
	return r, ok
}

// Exists reports whether a handler is registered under name; it suits
// api.ValidateOptions.HandlerExists.
func (h *HandlerRunner) Exists(name string) bool {
	_, ok := h.Lookup(name)
	return ok
}

// Names returns the registered handler names, sorted.
func (h *HandlerRunner) Names() []string {
	h.mu.RLock()
	names := make([]string, 0, len(h.handlers))
	for n := range h.handlers {
		names = append(names, n)
	}
	h.mu.RUnlock()
	sort.Strings(names)
	return names
}

// Run dispatches the run to the handler named by the timer's action.
func (h *HandlerRunner) Run(ctx context.Context, run *model.Run, t *model.Timer) ([]byte, error) {
	a := t.Action.Handler
	if a == nil {
		return nil, errors.New("handler action without handler settings")
	}
	r, ok := h.Lookup(a.Name)
	if !ok {
		return nil, noHandlerError{name: a.Name, node: h.nodeID}
	}
	return r.Run(ctx, run, t)
}

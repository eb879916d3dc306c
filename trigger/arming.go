package trigger

import (
	"time"

	"github.com/chimehq/chime/clock"
	"github.com/chimehq/chime/store"
)

type armedRun struct {
	timer clock.Timer
	cr    store.ClaimedRun
}

// arm submits cr at its instant, or gives it back if the trigger stopped.
func (t *Trigger) arm(cr store.ClaimedRun) {
	d := cr.Run.DueAt.Sub(t.cfg.Clock.Now())
	if d <= 200*time.Microsecond {
		t.cfg.Executor.Submit(cr)
		t.signals.armed.Signal(cr.Run.ID)
		return
	}
	t.armedMu.Lock()
	defer t.armedMu.Unlock()
	if t.stopped {
		t.cfg.Executor.GiveBack(cr)
		return
	}
	id := cr.Run.ID
	t.armed[id] = armedRun{cr: cr, timer: t.cfg.Clock.AfterFunc(d, func() {
		t.armedMu.Lock()
		_, ok := t.armed[id]
		delete(t.armed, id)
		t.armedMu.Unlock()
		if ok {
			t.cfg.Executor.Submit(cr)
		}
	})}
	t.signals.armed.Signal(id)
}

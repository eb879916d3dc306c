package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chimehq/chime/engine"
	"github.com/chimehq/chime/index/memindex"
	"github.com/chimehq/chime/lock/memlock"
	"github.com/chimehq/chime/model"
)

// TestLazyNodeStepsBackForEagerPeer: a node with lazy claims takes no
// slice while a live node claims with a write, yet stays ready; every fire
// happens once, on the eager node; once that node leaves, the lazy node
// takes the slices and fires on.
func TestLazyNodeStepsBackForEagerPeer(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	idx := memindex.New(4)
	locker, elector := memlock.NewLocker(nil), memlock.NewElector(nil)
	start := func(node string, lazy bool, rec *recorder) *engine.Engine {
		return startEngine(t, st, rec, node, func(c *engine.Config) {
			c.Index, c.Locker, c.Elector, c.LazyClaims, c.Heartbeat = idx, locker, elector, lazy, 200*time.Millisecond
		})
	}
	eagerRec, lazyRec := &recorder{}, &recorder{}
	eager := start("node-eager", false, eagerRec)
	lazy := start("node-lazy", true, lazyRec)

	e := &env{store: st, rec: eagerRec, eng: eager}
	var timers []*model.Timer
	for i := range 8 {
		timers = append(timers, e.createTimer(t, fmt.Sprintf("t%d", i), "* * * * * *"))
	}
	waitFor(t, 15*time.Second, "3 fires of every timer on the eager node", firedAtLeast(eagerRec, timers, 3))
	if got := lazy.Slices(); len(got) != 0 {
		t.Errorf("the lazy node holds %v beside an eager node", got)
	}
	if got := lazyRec.snapshot(); len(got) != 0 {
		t.Errorf("the lazy node ran %d attempts beside an eager node", len(got))
	}
	if err := lazy.Ready(context.Background()); err != nil {
		t.Errorf("the lazy node is not ready beside an eager node: %v", err)
	}
	nodes, err := lazy.Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]string{}
	for _, n := range nodes {
		modes[n.ID] = n.ClaimMode
	}
	if modes["node-eager"] != model.ClaimsEager || modes["node-lazy"] != model.ClaimsLazy {
		t.Errorf("published claim modes = %v", modes)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := eager.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "3 fires of every timer on the lazy node", firedAtLeast(lazyRec, timers, 3))
	seen := map[string]call{}
	for _, c := range append(eagerRec.snapshot(), lazyRec.snapshot()...) {
		if p, ok := seen[c.runID]; ok && p.attempt == c.attempt {
			t.Errorf("run %s (scheduled %s) executed twice at attempt %d", c.runID, c.sched.Format("15:04:05.000"), c.attempt)
		}
		seen[c.runID] = c
	}
}

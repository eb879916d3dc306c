package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/engine"
	"github.com/chimehq/chime/model"
)

// TestNodeWaitsForLazyPeer: in a rolling upgrade from a version that ran
// lazy claims, a node takes no slice and runs nothing, yet stays ready,
// while a live node of that version publishes lazy claims and holds
// slices; once that node holds none (it stood by for this one), the node
// takes the slices a lock TTL later and fires every timer once.
func TestNodeWaitsForLazyPeer(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	const heartbeat = 200 * time.Millisecond
	var mu sync.Mutex
	slices := []string{fmt.Sprint(time.Now().Unix()/60) + ":0"}
	started := time.Now()
	beat := func() {
		mu.Lock()
		held := slices
		mu.Unlock()
		n := model.Node{ID: "old-lazy", StartedAt: started, SeenAt: time.Now(), ClaimMode: model.ClaimsLazy, Slices: held}
		if err := st.Heartbeat(context.Background(), n); err != nil {
			t.Error(err)
		}
	}
	beat()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(heartbeat):
				beat()
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })

	rec := &recorder{}
	eng := startEngine(t, st, rec, "node-new", func(c *engine.Config) { c.Heartbeat = heartbeat })
	e := &env{store: st, rec: rec, eng: eng}
	var timers []*model.Timer
	for i := range 4 {
		timers = append(timers, e.createTimer(t, fmt.Sprintf("t%d", i), "* * * * * *"))
	}
	hold := time.Now().Add(3 * time.Second)
	for time.Now().Before(hold) {
		if got := eng.Slices(); len(got) != 0 {
			t.Fatalf("the node holds %v beside a live lazy node that holds slices", got)
		}
		if got := rec.snapshot(); len(got) != 0 {
			t.Fatalf("the node ran %d attempts beside a live lazy node that holds slices", len(got))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := eng.Ready(context.Background()); err != nil {
		t.Errorf("the node is not ready beside a lazy node: %v", err)
	}
	mu.Lock()
	slices = nil // the old node stood by: it hands its slices back
	mu.Unlock()
	waitFor(t, 20*time.Second, "3 fires of every timer", firedAtLeast(rec, timers, 3))
	seen := map[string]call{}
	for _, c := range rec.snapshot() {
		if _, ok := seen[c.runID]; ok {
			t.Errorf("run %s (scheduled %s) executed twice", c.runID, c.sched.Format("15:04:05.000"))
		}
		seen[c.runID] = c
	}
}

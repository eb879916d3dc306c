package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/engine"
	"github.com/chimehq/chime/internal/metrics"
)

// TestStatsMinutesWritten: a node's counted fires reach the store's
// dashboard minutes, as its own rows, by the time it stopped; the save
// path records the timer's next fire.
func TestStatsMinutesWritten(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *engine.Config) { c.Metrics = metrics.New(nil) })
	ctx := context.Background()
	waitFor(t, 5*time.Second, "slices held", func() bool { return len(e.eng.Slices()) > 0 })
	before := time.Now()
	tm := e.createTimer(t, "dash", "* * * * * *")
	stored, err := e.store.GetTimer(ctx, tm.ID)
	if err != nil {
		t.Fatal(err)
	}
	if nf := stored.NextFireAt; !nf.After(before) || nf.After(before.Add(2*time.Second)) {
		t.Errorf("NextFireAt after the save = %v, want within a second or two of %v", nf, before)
	}
	waitFor(t, 10*time.Second, "2 fires", func() bool { return len(callsOf(e.rec.snapshot(), tm.ID)) >= 2 })
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := e.eng.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	rows, err := e.store.StatsMinutes(ctx, before.Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var fires, delays int64
	for _, r := range rows {
		if r.Node != "node-a" {
			t.Errorf("row of node %q", r.Node)
		}
		fires += r.Fires["succeeded"]
		for _, c := range r.Delays {
			delays += c
		}
	}
	if fires < 2 || delays < 2 {
		t.Errorf("stored minutes %+v: %d succeeded, %d delays; want at least 2 each", rows, fires, delays)
	}
}

package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/engine/planner"
	"github.com/chimehq/chime/model"
)

// runBurst creates cfg.Timers one-shot timers due at one instant, plans
// them, and measures how long the node takes to fire them all.
func runBurst(ctx context.Context, cfg Config) (*BurstResult, error) {
	n, err := newNode(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer n.shutdown()
	log := cfg.Logger
	if err := n.start(ctx); err != nil {
		return nil, err
	}
	engineUp := true
	defer func() {
		if engineUp {
			n.stopEngine()
		}
	}()
	res := &BurstResult{Timers: cfg.Timers}

	// The instant is chosen far enough ahead that creating and planning the
	// timers fits before it: calibrate on the first timers.
	t0 := time.Now()
	probe := min(cfg.Timers, 500)
	placeholder := t0.Add(time.Hour)
	timers := make([]*model.Timer, cfg.Timers)
	for i := range timers {
		timers[i] = n.timer(fmt.Sprintf("burst-%d", i), "", t0)
	}
	for _, t := range timers[:probe] {
		t.Schedule = "@at " + placeholder.UTC().Format(time.RFC3339)
	}
	if err := n.createTimers(ctx, timers[:probe]); err != nil {
		return nil, err
	}
	perTimer := time.Since(t0) / time.Duration(probe)
	// Creating and planning cost about the same per timer.
	est := 2 * perTimer * time.Duration(cfg.Timers-probe)
	due := time.Now().Add(est + est/2 + cfg.Lead).Truncate(time.Second).Add(time.Second)
	spec := "@at " + due.UTC().Format(time.RFC3339)
	for _, t := range timers {
		t.Schedule = spec
	}
	// Rewrite the probe timers with the real instant.
	for _, t := range timers[:probe] {
		if err := n.store.UpdateTimer(ctx, t); err != nil {
			return nil, fmt.Errorf("bench: update timer: %w", err)
		}
	}
	if err := n.createTimers(ctx, timers[probe:]); err != nil {
		return nil, err
	}
	res.CreateSeconds = time.Since(t0).Seconds()

	stopProf, err := startCPUProfile(cfg.CPUProfile)
	if err != nil {
		return nil, err
	}
	smp := startSampler(peakProfile(cfg, ".peak"))
	n.store.record(true)
	// One planning pass like the engine's, over the same store and index.
	pl := planner.New(planner.Config{Store: n.store, Index: n.idx, Lookahead: cfg.Lookahead, Logger: log})
	t1 := time.Now()
	if _, err := pl.PlanDue(ctx); err != nil {
		stopProf()
		smp.done()
		return nil, fmt.Errorf("bench: plan: %w", err)
	}
	res.PlanSeconds = time.Since(t1).Seconds()
	res.LeadSeconds = time.Until(due).Seconds()
	log.Info("bench: burst planned", "timers", cfg.Timers, "due", due, "lead", res.LeadSeconds)

	timeout := time.Until(due) + cfg.Drain + time.Duration(cfg.Timers)*time.Millisecond
	var recvErr error
	waitFor(ctx, timeout, func() bool {
		c, err := n.recv.count(ctx)
		if err != nil {
			recvErr = err
			return true
		}
		return c >= cfg.Timers
	})
	if recvErr != nil {
		stopProf()
		smp.done()
		return nil, recvErr
	}
	// A little more for duplicates to show.
	_ = clock.Sleep(ctx, nil, 500*time.Millisecond)
	n.store.record(false)
	res.Store = n.store.stats()
	res.Resources = smp.done()
	if err := stopProf(); err != nil {
		return nil, fmt.Errorf("bench: cpu profile: %w", err)
	}
	n.stopEngine()
	engineUp = false

	fires, err := n.recv.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	first, dups := firstDeliveries(fires)
	res.Duplicated = dups
	var ds []int64
	var last int64
	for _, f := range first {
		ds = append(ds, f.recv-f.sched)
		last = max(last, f.recv)
	}
	res.Missed = cfg.Timers - len(first)
	res.Delay = delays(ds)
	res.StartDelay = n.run.startDelays(due, due.Add(time.Second))
	if last > 0 {
		res.DrainSeconds = float64(last-due.UnixNano()) / 1e9
		if res.DrainSeconds > 0 {
			res.DrainFiresPerS = float64(len(first)) / res.DrainSeconds
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := n.runsByStatus(sctx)
	if err != nil {
		return res, err
	}
	res.RunsSucceeded = st[model.RunSucceeded]
	return res, nil
}

package bench

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/chimehq/chime/model"
)

const (
	steadyMixText   = "aligned: 90% of the rate from '* * * * * *' timers, 5% from '*/5 * * * * *', 5% from '@every 2s'"
	steadySpreadMix = "spread: 90% of the rate from '@every 1s' timers, 5% from '@every 5s', 5% from '@every 2s', phases random to the millisecond"
)

// steadyTimers returns timers whose fires add up to rate per second.
func steadyTimers(n *node, rate int, spread bool, now time.Time) []*model.Timer {
	every1 := int(math.Round(0.90 * float64(rate)))
	every5 := int(math.Round(0.05 * float64(rate) * 5))
	every2 := int(math.Round(0.05 * float64(rate) * 2))
	timers := make([]*model.Timer, 0, every1+every5+every2)
	add := func(k int, spec, kind string) {
		for i := 0; i < k; i++ {
			created := now
			if spread {
				// An @every schedule counts from the timer's creation:
				// a random creation millisecond is a random phase.
				created = now.Add(-time.Duration(rand.IntN(5000)) * time.Millisecond)
			}
			timers = append(timers, n.timer(fmt.Sprintf("%s-%d", kind, i), spec, created))
		}
	}
	if spread {
		add(every1, "@every 1s", "e1")
		add(every5, "@every 5s", "e5")
	} else {
		add(every1, "* * * * * *", "s1")
		add(every5, "*/5 * * * * *", "s5")
	}
	add(every2, "@every 2s", "e2")
	return timers
}

// slowestShown is how many of the latest fires a steady report lists.
const slowestShown = 5

func runSteady(ctx context.Context, cfg Config, p *Params) (*SteadyResult, error) {
	n, err := newNode(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer n.shutdown()
	log := cfg.Logger

	t0 := time.Now()
	timers := steadyTimers(n, cfg.Rate, cfg.Spread, t0)
	p.Timers = len(timers)
	if err := n.createTimers(ctx, timers); err != nil {
		return nil, err
	}
	plans, err := firesOf(timers)
	if err != nil {
		return nil, err
	}
	if err := n.start(ctx); err != nil {
		return nil, err
	}
	engineUp := true
	defer func() {
		if engineUp {
			n.stopEngine()
		}
	}()
	res := &SteadyResult{Timers: len(timers), SetupSeconds: time.Since(t0).Seconds()}
	log.Info("bench: steady: timers created and planned", "timers", len(timers), "seconds", res.SetupSeconds)

	// The window starts on a whole second after the warm-up, so that it
	// holds whole seconds of fires.
	ws := time.Now().Add(cfg.Warmup).Truncate(time.Second).Add(time.Second)
	we := ws.Add(cfg.Duration)
	if res.Store, res.Resources, err = measureWindow(ctx, cfg, n, ws, we); err != nil {
		return nil, err
	}
	// Every fire due in [ws, we) is expected once.
	expected := expectedFires(plans, ws, we)
	res.Expected = len(expected)
	if err := drainExpected(ctx, cfg.Drain, n, expected); err != nil {
		return nil, err
	}
	res.CleanStop = n.stopEngine()
	engineUp = false

	fires, err := n.recv.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	first, dups := firstDeliveries(fires)
	res.Duplicated = dups
	var ds []int64
	var slow []fire
	for _, f := range first {
		if _, ok := expected[f.runID]; ok {
			d := f.recv - f.sched
			ds = append(ds, d)
			if d > int64(time.Second) {
				res.Late1s++
			}
			slow = append(slow, f)
		}
	}
	res.UniqueFired = len(first)
	res.Received = len(ds)
	res.Missed = res.Expected - res.Received
	res.AchievedRate = float64(res.Received) / cfg.Duration.Seconds()
	res.Delay = delays(ds)
	slices.SortFunc(slow, func(a, b fire) int { return cmp.Compare(b.recv-b.sched, a.recv-a.sched) })
	for _, f := range slow[:min(len(slow), slowestShown)] {
		res.Slowest = append(res.Slowest, SlowFire{At: float64(f.sched-ws.UnixNano()) / 1e9, DelayMS: ms(f.recv - f.sched)})
	}
	res.StartDelay = n.run.startDelays(ws, we)
	sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if res.RunsByStatus, err = n.runsByStatus(sctx); err != nil {
		return res, err
	}
	res.RunsSucceeded = res.RunsByStatus[model.RunSucceeded]
	return res, nil
}

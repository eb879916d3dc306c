package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/chimehq/chime/model"
)

// The herd scenario: many timers due at the same instant, every other
// second, and (with Config.Baseline) the bare client sending the same herd
// to the same receiver on the seconds between.

// DefaultHerdTimers is the herd scenario's default Config.Timers.
const DefaultHerdTimers = 1000

// DefaultHerdDuration is the herd scenario's default Config.Duration: ten
// herds of chime's and ten of the baseline's.
const DefaultHerdDuration = 20 * time.Second

// herdSpec fires chime's timers on the even seconds; the baseline takes
// the odd ones, so that both see the same machine and receiver, a second
// apart, and neither's herd overlaps the other's.
const herdSpec = "*/2 * * * * *"

const herdMixText = "'" + herdSpec + "': every timer due at the same instant, on the even seconds"

// baselineLead is how long before its instant the baseline builds a herd's
// requests and starts its goroutines: after chime's herd of the second
// before has landed, before chime claims the next one (ClaimAhead, 500 ms,
// ahead of it).
const baselineLead = 300 * time.Millisecond

// runHerd measures cfg.Timers every-other-second cron timers firing on the
// same instants at the receiver and, with cfg.Baseline, the bare client
// firing the same number of requests on the seconds between.
func runHerd(ctx context.Context, cfg Config, p *Params) (*HerdResult, error) {
	n, err := newNode(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer n.shutdown()
	log := cfg.Logger

	t0 := time.Now()
	timers := make([]*model.Timer, cfg.Timers)
	for i := range timers {
		timers[i] = n.timer(fmt.Sprintf("herd-%d", i), herdSpec, t0)
	}
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
	res := &HerdResult{Timers: len(timers), SetupSeconds: time.Since(t0).Seconds()}
	log.Info("bench: herd: timers created and planned", "timers", len(timers), "seconds", res.SetupSeconds)

	var bl *baseline
	if cfg.Baseline {
		if bl, err = newBaseline(ctx, n.recv.fireURL(), cfg.BaselineConns, cfg.Timers, "bench-"+randHex(4)); err != nil {
			return nil, err
		}
		defer bl.close()
	}

	// The window starts on an even second after the warm-up: chime's herds
	// on its even seconds, the baseline's on its odd ones.
	ws := time.Now().Add(cfg.Warmup).Truncate(2 * time.Second).Add(2 * time.Second)
	we := ws.Add(cfg.Duration)
	var blInstants []time.Time
	for at := ws.Add(time.Second); at.Before(we); at = at.Add(2 * time.Second) {
		blInstants = append(blInstants, at)
	}
	blDone := make(chan struct{})
	if bl != nil {
		go func() {
			defer close(blDone)
			bl.run(ctx, blInstants, baselineLead)
		}()
	} else {
		close(blDone)
	}
	if res.Store, res.Resources, err = measureWindow(ctx, cfg, n, ws, we); err != nil {
		return nil, err
	}
	expected := expectedFires(plans, ws, we)
	res.Expected = len(expected)
	if err := drainExpected(ctx, cfg.Drain, n, expected); err != nil {
		return nil, err
	}
	<-blDone
	res.CleanStop = n.stopEngine()
	engineUp = false

	fires, err := n.recv.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	first, dups := firstDeliveries(fires)
	res.Duplicated = dups
	var ds, bds []int64
	last, blLast := map[int64]int64{}, map[int64]int64{}
	for _, f := range first {
		d := f.recv - f.sched
		switch {
		case strings.HasPrefix(f.timerID, baselineTimerPrefix):
			if f.sched >= ws.UnixNano() && f.sched < we.UnixNano() {
				bds = append(bds, d)
				blLast[f.sched] = max(blLast[f.sched], d)
			}
		default:
			if _, ok := expected[f.runID]; ok {
				ds = append(ds, d)
				last[f.sched] = max(last[f.sched], d)
			}
		}
	}
	res.Herds = len(last)
	res.Received = len(ds)
	res.Missed = res.Expected - res.Received
	res.Delay = delays(ds)
	res.Last = delays(values(last))
	res.StartDelay = n.run.startDelays(ws, we)
	if bl != nil {
		b := &BaselineResult{Conns: bl.conns, Herds: len(blLast), Expected: len(blInstants) * cfg.Timers,
			Received: len(bds), Errors: int(bl.errs.Load()), Delay: delays(bds), Last: delays(values(blLast))}
		res.Baseline = b
		if b.Delay.P50 > 0 {
			res.RatioP50 = res.Delay.P50 / b.Delay.P50
		}
		if b.Delay.P99 > 0 {
			res.RatioP99 = res.Delay.P99 / b.Delay.P99
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if res.RunsByStatus, err = n.runsByStatus(sctx); err != nil {
		return res, err
	}
	res.RunsSucceeded = res.RunsByStatus[model.RunSucceeded]
	return res, nil
}

func values(m map[int64]int64) []int64 {
	out := make([]int64, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// HerdResult is the outcome of the herd scenario: chime's herds and, with
// --baseline, the bare client's beside them.
type HerdResult struct {
	Timers       int     `json:"timers"`
	SetupSeconds float64 `json:"setup_seconds"`
	Herds        int     `json:"herds"`    // chime's instants with a fire received in the window
	Expected     int     `json:"expected"` // chime's fires due in the window
	Received     int     `json:"received"`
	Missed       int     `json:"missed"`
	Duplicated   int     `json:"duplicated"` // run ids received more than once, whole run
	Delay        Delays  `json:"delay"`
	// Last summarises, over the herds, the delay of each herd's last fire.
	Last       Delays          `json:"last_of_herd"`
	StartDelay Delays          `json:"action_start_delay"`
	Baseline   *BaselineResult `json:"baseline,omitempty"`
	// RatioP50 and RatioP99 are chime's delay percentiles over the
	// baseline's (with Baseline): 1 is the bare client's speed.
	RatioP50      float64            `json:"ratio_p50,omitempty"`
	RatioP99      float64            `json:"ratio_p99,omitempty"`
	RunsSucceeded int64              `json:"runs_succeeded"`
	RunsByStatus  StatusMap          `json:"runs_by_status"`
	CleanStop     bool               `json:"clean_shutdown"`
	Resources     Resources          `json:"resources"`
	Store         map[string]OpStats `json:"store_ops"`
}

// BaselineResult is what the bare client measured on its instants.
type BaselineResult struct {
	Conns    int    `json:"conns"` // connections, one sending goroutine each
	Herds    int    `json:"herds"`
	Expected int    `json:"expected"` // requests it was to send in the window
	Received int    `json:"received"` // of those, received
	Errors   int    `json:"errors"`   // requests that failed or were not answered 2xx
	Delay    Delays `json:"delay"`
	Last     Delays `json:"last_of_herd"`
}

// writeHerd writes a herd result's rows.
func writeHerd(row func(k, format string, args ...any), delay func(string, Delays), h *HerdResult) {
	row("setup", "%.1f s (create timers, first plan)", h.SetupSeconds)
	row("chime", "%d herds, %d of %d fires received", h.Herds, h.Received, h.Expected)
	delay("fire delay", h.Delay)
	delay("last of each herd", h.Last)
	delay("action start delay", h.StartDelay)
	row("missed / duplicated", "%d / %d", h.Missed, h.Duplicated)
	if b := h.Baseline; b != nil {
		row("baseline", "bare net/http client, %d keep-alive connections, %d herds, %d of %d received, %d errors",
			b.Conns, b.Herds, b.Received, b.Expected, b.Errors)
		delay("baseline delay", b.Delay)
		delay("baseline last of each herd", b.Last)
		row("chime / baseline", "p50 %.2fx  p99 %.2fx", h.RatioP50, h.RatioP99)
	}
	row("runs", "%d succeeded in the store; %v", h.RunsSucceeded, statusText(h.RunsByStatus))
	if !h.CleanStop {
		row("shutdown", "did not finish in %s: the node was still recording its backlog", shutdownWait)
	}
}

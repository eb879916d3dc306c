package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/engine/planner"
	"github.com/chimehq/chime/model"
)

const scaleMixText = "45% hourly 'S M * * * *', 45% daily 'S M H * * *', 10% every minute 'S * * * * *', seconds/minutes/hours spread evenly"

// scaleSpec returns the schedule of the i-th scale timer. Of every 20
// timers, 2 fire every minute, 9 hourly and 9 daily; the k-th timer of a
// class takes the k-th second (of the minute, hour or day), so that the
// fires of each class spread evenly.
func scaleSpec(i int) string {
	c := i % 20
	switch {
	case c < 2:
		k := i/20*2 + c
		return fmt.Sprintf("%d * * * * *", k%60)
	case c < 11:
		k := i/20*9 + c - 2
		return fmt.Sprintf("%d %d * * * *", k%60, (k/60)%60)
	default:
		k := i/20*9 + c - 11
		return fmt.Sprintf("%d %d %d * * *", k%60, (k/60)%60, (k/3600)%24)
	}
}

func runScale(ctx context.Context, cfg Config) (*ScaleResult, error) {
	n, err := newNode(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer n.shutdown()
	log := cfg.Logger
	res := &ScaleResult{Timers: cfg.Timers, API: map[string]Latency{}}

	// Insert through the store in chunks, so that the timers slice of the
	// bench itself does not dominate the node's memory.
	t0 := time.Now()
	// The API phase gets timers by id: a uniform sample of them, not every
	// id (a million ids and their strings were 50 MiB of the process's
	// peak, the node's memory as measured).
	ids := make([]string, 0, min(cfg.Timers, apiSample))
	const chunk = 10000
	for start := 0; start < cfg.Timers; start += chunk {
		end := min(start+chunk, cfg.Timers)
		batch := make([]*model.Timer, 0, end-start)
		for i := start; i < end; i++ {
			t := n.timer(fmt.Sprintf("scale-%d", i), scaleSpec(i), t0)
			batch = append(batch, t)
			if len(ids) < apiSample {
				ids = append(ids, t.ID)
			} else if k := rand.IntN(i + 1); k < apiSample {
				ids[k] = t.ID
			}
		}
		if err := n.createTimers(ctx, batch); err != nil {
			return nil, err
		}
		if end%100000 == 0 {
			log.Info("bench: scale: inserted", "timers", end, "elapsed", time.Since(t0))
		}
	}
	res.InsertSeconds = time.Since(t0).Seconds()
	res.InsertPerS = float64(cfg.Timers) / res.InsertSeconds

	stopProf, err := startCPUProfile(cfg.CPUProfile)
	if err != nil {
		return nil, err
	}
	smp := startSampler(peakProfile(cfg, ".peak"))
	n.store.record(true)
	defer func() {
		if smp != nil {
			smp.done()
			stopProf()
		}
	}()
	pl := planner.New(planner.Config{Store: n.store, Index: n.idx, Lookahead: cfg.Lookahead, Logger: log,
		OnPlanned: func(e []index.Entry) { res.RunsPlanned += len(e) }})
	t1 := time.Now()
	if _, err := pl.PlanDue(ctx); err != nil {
		return nil, fmt.Errorf("bench: plan: %w", err)
	}
	res.PlanSeconds = time.Since(t1).Seconds()
	res.HeapAfterPlan = liveHeapMiB()
	if cfg.MemProfile != "" {
		// The heap the plan left, the index full and the engine not
		// started yet.
		if err := writeHeapProfile(cfg.MemProfile + ".plan"); err != nil {
			return nil, err
		}
	}
	res.PlanStore = n.store.stats()
	n.store.reset()
	log.Info("bench: scale: planned", "runs", res.RunsPlanned, "seconds", res.PlanSeconds)

	if err := n.start(ctx); err != nil {
		return nil, err
	}
	defer n.stopEngine()
	// The engine starts after the plan, with the fires due meanwhile
	// overdue. The API is measured once they are made: the load of that
	// phase is then the timers' own rate, not a catch-up.
	t2 := time.Now()
	res.CaughtUp = waitFor(ctx, catchUpWait, func() bool {
		overdue, err := n.store.Store.PendingRuns(ctx, time.Unix(0, 0), time.Now().Add(-time.Second), 1)
		return err == nil && len(overdue) == 0
	})
	res.CatchUpSeconds = time.Since(t2).Seconds()
	n.store.reset()
	log.Info("bench: scale: caught up", "ok", res.CaughtUp, "seconds", res.CatchUpSeconds)
	base, stopAPI, err := serveAPI(n)
	if err != nil {
		return nil, err
	}
	defer stopAPI()

	fired0, err := n.recv.count(ctx)
	if err != nil {
		return nil, err
	}
	apiStart := time.Now()
	res.API = apiLoad(ctx, base, ids, cfg.Timers, n.recv.fireURL(), cfg.Duration)
	apiEnd := time.Now()
	n.store.record(false)
	res.Store = n.store.stats()
	res.Resources = smp.done()
	smp = nil
	if err := stopProf(); err != nil {
		return nil, fmt.Errorf("bench: cpu profile: %w", err)
	}
	// The heap as the API phase ends, the node still running.
	if cfg.MemProfile != "" {
		if err := writeHeapProfile(cfg.MemProfile); err != nil {
			return nil, err
		}
	}
	// Read the fires after the measured phase: reading them from a remote
	// receiver is no cost of the node.
	fires, err := n.recv.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	var ds []int64
	for _, f := range fires[min(fired0, len(fires)):] {
		if f.sched >= apiStart.UnixNano() && f.sched < apiEnd.UnixNano() {
			ds = append(ds, f.recv-f.sched)
		}
	}
	res.FireDelay = delays(ds)
	return res, nil
}

// apiSample is how many timer ids the scale scenario keeps for the API
// phase's gets (reservoir sampling over every timer inserted).
const apiSample = 10_000

// catchUpWait bounds the wait for the engine to make the fires that came
// due during the plan.
const catchUpWait = 3 * time.Minute

// apiLoad sends get (of ids), list, search (the digits of one of the
// timers' names, scale-0 to scale-(timers-1), as the web UI's search box
// sends them: a scan of the names) and create requests from a few clients
// for d and returns their latencies.
func apiLoad(ctx context.Context, base string, ids []string, timers int, hook string, d time.Duration) map[string]Latency {
	const clients = 4
	client := &http.Client{Timeout: 30 * time.Second}
	var mu sync.Mutex
	lat := map[string][]int64{}
	errs := map[string]int{}
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
				var op string
				var req *http.Request
				switch i % 4 {
				case 0:
					op = "get"
					req, _ = http.NewRequestWithContext(ctx, "GET", base+"/timers/"+ids[rand.IntN(len(ids))], nil)
				case 1:
					op = "list"
					req, _ = http.NewRequestWithContext(ctx, "GET", base+"/timers?app=bench&limit=100", nil)
				case 2:
					op = "search"
					req, _ = http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/timers?search=scale-%d&limit=50", base, rand.IntN(timers)), nil)
				default:
					op = "create"
					body, _ := json.Marshal(map[string]any{
						"app": "bench-api", "name": "api-" + randHex(8), "schedule": "0 0 3 * * *", "timezone": "UTC",
						"action":  map[string]any{"type": "http", "http": map[string]any{"method": "POST", "url": hook}},
						"timeout": "10s", "retry": map[string]any{"max_attempts": 1, "backoff": "1s"},
					})
					req, _ = http.NewRequestWithContext(ctx, "POST", base+"/timers", bytes.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
				}
				start := time.Now()
				resp, err := client.Do(req)
				el := time.Since(start).Nanoseconds()
				ok := err == nil && resp.StatusCode < 300
				if resp != nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				mu.Lock()
				lat[op] = append(lat[op], el)
				if !ok {
					errs[op]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	out := map[string]Latency{}
	for op, ns := range lat {
		dl := delays(ns)
		out[op] = Latency{Count: dl.Count, Errors: errs[op], P50: dl.P50, P99: dl.P99, Max: dl.Max}
	}
	return out
}

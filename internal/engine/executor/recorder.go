package executor

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/engine/planner"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// recorder writes results to the store in batches: under load, the results
// that finished while the previous batch was written go in one FinishRuns
// call; at low load each result is written at once.
//
// A result is never dropped while the node lives: a batch the store does
// not take (it is down, stalled or restarting) is kept and written again,
// with the results that finished meanwhile, until the store records it or
// its fence says that the run is no longer this attempt's. Meanwhile the
// lease keeper goes on extending the attempts' leases, so that a store
// outage shorter than the lease never hands a finished run to another node.
type recorder struct {
	e    *Executor
	ch   chan pending
	done chan struct{}
	// kept counts results taken from ch and not recorded yet.
	kept atomic.Int64
	// stopping is closed by close: record what is queued, then stop.
	stopping chan struct{}
	// abandon is closed when shutdown gives up on the results kept.
	abandon chan struct{}
}

type pending struct {
	res   model.Result
	timer *model.Timer
}

const (
	// recordBatch is the most results one FinishRuns call records. A busy
	// store makes the recorder wait for its turn; a large batch then
	// records everything that finished meanwhile in that one turn.
	recordBatch = 4000
	// recordLinger is how long the recorder waits for more results once it
	// has one, so that a busy node commits many results per transaction.
	recordLinger = 5 * time.Millisecond
	// herdLinger is how long, at most, the recorder holds a batch while
	// runs wait in the executor's lanes (a herd is being sent): its
	// transactions then do not take the cores from the herd's last
	// callbacks. It stays well under the lease's first renewal
	// (Lease/10 after the start), so the held results cost no lease
	// extension.
	herdLinger = 200 * time.Millisecond
	// retryFirst and retryMax bound the wait between two tries of a batch
	// the store did not take.
	retryFirst = 100 * time.Millisecond
	retryMax   = time.Second
)

func newRecorder(e *Executor) *recorder {
	return &recorder{e: e, ch: make(chan pending, 2*recordBatch), done: make(chan struct{}),
		stopping: make(chan struct{}), abandon: make(chan struct{})}
}

// add queues a result. After close it drops it (the run's lease expires
// and the sweeper recovers it), which only an action that ignored its
// cancelled context past the shutdown deadline can meet.
func (r *recorder) add(res model.Result, t *model.Timer) {
	if t != nil {
		// The store finds the timers that run after t by it.
		res.TimerID = t.ID
	}
	if r.e.notifies(t) {
		// The store writes the run's notify event with its final result.
		res.Notify = true
	}
	select {
	case r.ch <- pending{res, t}:
	case <-r.done:
		r.e.cfg.Logger.Warn("result after shutdown: not recorded", runAttrs(t.ID, res.RunID, res.Attempt)...)
	}
}

// backlog is the number of results not recorded yet.
func (r *recorder) backlog() int { return len(r.ch) + int(r.kept.Load()) }

// close flushes what is queued and stops the loop, waiting until ctx is
// done at most; results not written by then stay running in the store, and
// the sweeper recovers them when their lease expires.
func (r *recorder) close(ctx context.Context) {
	close(r.stopping)
	select {
	case <-r.done:
	case <-ctx.Done():
		close(r.abandon)
		<-r.done
	}
}

func (r *recorder) loop() {
	defer close(r.done)
	var batch, kept []pending
	linger := time.NewTimer(time.Hour)
	defer linger.Stop()
	wait := retryFirst
	for {
		if len(kept) == 0 {
			var p pending
			select {
			case p = <-r.ch:
			case <-r.stopping:
				select {
				case p = <-r.ch:
				default:
					return // stopping, and nothing left
				}
			}
			batch = append(batch[:0], p)
			linger.Reset(recordLinger)
		} else {
			// Results wait for the store: try again after a pause, with
			// whatever finished meanwhile.
			batch = append(batch[:0], kept...)
			linger.Reset(wait)
			wait = min(2*wait, retryMax)
		}
		r.fill(&batch, linger, time.Now())
		kept = r.write(batch)
		r.kept.Store(int64(len(kept)))
		if m := r.e.cfg.Metrics; m != nil {
			m.ResultsWaiting.Set(float64(len(kept)))
		}
		if len(kept) == 0 {
			wait = retryFirst
			continue
		}
		select {
		case <-r.abandon:
			r.e.cfg.Logger.Warn("shutdown: results not recorded; their runs will be recovered after their lease", "results", len(kept))
			return
		default:
		}
	}
}

// fill adds results to batch until it is full or linger fires; while
// runs wait in the executor's lanes, linger is drawn out, up to herdLinger
// after begun.
func (r *recorder) fill(batch *[]pending, linger *time.Timer, begun time.Time) {
	for len(*batch) < recordBatch {
		select {
		case p := <-r.ch:
			*batch = append(*batch, p)
		case <-linger.C:
			if r.e.queue.laneQueued.Load() > 0 && time.Since(begun) < herdLinger {
				linger.Reset(recordLinger)
				continue
			}
			return
		case <-r.abandon:
			return
		}
	}
}

// write records batch and returns the results to keep for another try
// (all of them when the store failed, those it did not report recorded
// when it failed part way).
func (r *recorder) write(batch []pending) (kept []pending) {
	e := r.e
	results := make([]model.Result, len(batch))
	for i, p := range batch {
		results[i] = p.res
	}
	// The runs that the ends of these runs make for the timers after
	// theirs (model.Timer.After) are indexed with the retries.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	ok, made, err := e.cfg.Store.FinishRuns(ctx, results)
	cancel()
	if err != nil {
		if ok == nil {
			e.cfg.Logger.Warn("record results: kept for another try", "results", len(results), "err", err)
			return append([]pending(nil), batch...)
		}
		// Some batches were committed (store.Store.FinishRuns): those
		// results are recorded; the others are kept for another try (one
		// whose fence failed in a committed batch fails it again then).
		recorded := make([]pending, 0, len(batch))
		for i, p := range batch {
			if ok[i] {
				recorded = append(recorded, p)
			} else {
				kept = append(kept, p)
			}
		}
		e.cfg.Logger.Warn("record results: some kept for another try", "results", len(results), "recorded", len(recorded),
			"kept", len(kept), "err", err)
		batch = recorded
		ok = ok[:0]
		for range recorded {
			ok = append(ok, true)
		}
	}
	var retries []index.Entry
	for _, r := range made {
		retries = append(retries, index.EntryOf(r))
	}
	exhausted := map[string]bool{}
	for i, p := range batch {
		e.keep.forget(store.Lease{RunID: p.res.RunID, Attempt: p.res.Attempt})
		if !ok[i] {
			e.cfg.Logger.Warn("result not recorded: the run is no longer this attempt's (its lease was taken over)",
				runAttrs(p.timer.ID, p.res.RunID, p.res.Attempt)...)
			continue
		}
		status := string(p.res.Status)
		if !p.res.RetryAt.IsZero() {
			status = "retried"
			retries = append(retries, index.Entry{RunID: p.res.RunID, TimerID: p.timer.ID, DueAt: p.res.RetryAt})
			e.cfg.Logger.Info("attempt failed: retry planned",
				runAttrs(p.timer.ID, p.res.RunID, p.res.Attempt, "retry_at", p.res.RetryAt, "err", p.res.Error)...)
		} else {
			if p.res.Status == model.RunFailed {
				e.cfg.Logger.Warn("run failed: no attempts left",
					runAttrs(p.timer.ID, p.res.RunID, p.res.Attempt, "err", p.res.Error)...)
			}
			if p.timer.Policy.MaxFires > 0 {
				exhausted[p.timer.ID] = true
			}
		}
		if m := e.cfg.Metrics; m != nil {
			m.Fires.WithLabelValues(status).Inc()
			if p.res.Status == model.RunSkipped {
				m.Skipped(p.res.Reason, 1)
			}
			m.Series.Fire(e.cfg.Clock.Now(), p.timer.ID, status)
		}
	}
	for id := range exhausted {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := planner.DisableIfExhausted(ctx, e.cfg.Store, id, e.cfg.Clock.Now(), e.cfg.Logger); err != nil {
			e.cfg.Logger.Warn("max fires: disable timer", "timer_id", id, "err", err)
		}
		cancel()
	}
	if len(retries) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		e.addToIndex(ctx, retries)
		cancel()
	}
	return kept
}

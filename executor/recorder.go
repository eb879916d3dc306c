package executor

import (
	"context"
	"time"

	"github.com/chimehq/chime/index"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/planner"
)

// recorder writes results to the store in batches: under load, the results
// that finished while the previous batch was written go in one FinishRuns
// call; at low load each result is written at once.
type recorder struct {
	e    *Executor
	ch   chan pending
	done chan struct{}
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
)

func newRecorder(e *Executor) *recorder {
	return &recorder{e: e, ch: make(chan pending, 2*recordBatch), done: make(chan struct{})}
}

func (r *recorder) add(res model.Result, t *model.Timer) { r.ch <- pending{res, t} }

// close flushes what is queued and stops the loop, waiting until ctx is
// done at most; results not written by then stay running in the store, and
// the sweeper recovers them when their lease expires.
func (r *recorder) close(ctx context.Context) {
	close(r.ch)
	select {
	case <-r.done:
	case <-ctx.Done():
		r.e.cfg.Logger.Warn("shutdown: results not all recorded; their runs will be recovered after their lease")
	}
}

func (r *recorder) loop() {
	defer close(r.done)
	batch := make([]pending, 0, recordBatch)
	linger := time.NewTimer(time.Hour)
	defer linger.Stop()
	for p := range r.ch {
		batch = append(batch[:0], p)
		linger.Reset(recordLinger)
	fill:
		for len(batch) < recordBatch {
			select {
			case p, ok := <-r.ch:
				if !ok {
					break fill
				}
				batch = append(batch, p)
			case <-linger.C:
				break fill
			}
		}
		r.write(batch)
	}
}

func (r *recorder) write(batch []pending) {
	e := r.e
	results := make([]model.Result, len(batch))
	for i, p := range batch {
		results[i] = p.res
	}
	var ok []bool
	var err error
	for try := 0; try < 5; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ok, err = e.cfg.Store.FinishRuns(ctx, results)
		cancel()
		if err == nil {
			break
		}
		e.cfg.Logger.Warn("record results", "runs", len(results), "try", try+1, "err", err)
		time.Sleep(time.Duration(try+1) * 200 * time.Millisecond)
	}
	var retries []index.Entry
	exhausted := map[string]bool{}
	for i, p := range batch {
		e.forget(p.res.RunID)
		if err != nil {
			// The run stays running; its lease expires and the sweeper
			// applies the timer's policy.
			continue
		}
		if !ok[i] {
			e.cfg.Logger.Warn("result not recorded: the run's lease was taken over",
				"run", p.res.RunID, "attempt", p.res.Attempt)
			continue
		}
		status := string(p.res.Status)
		if !p.res.RetryAt.IsZero() {
			status = "retried"
			retries = append(retries, index.Entry{RunID: p.res.RunID, TimerID: p.timer.ID, DueAt: p.res.RetryAt})
		} else if p.timer.Policy.MaxFires > 0 {
			exhausted[p.timer.ID] = true
		}
		if m := e.cfg.Metrics; m != nil {
			m.Fires.WithLabelValues(status).Inc()
		}
	}
	for id := range exhausted {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := planner.DisableIfExhausted(ctx, e.cfg.Store, id, e.cfg.Now(), e.cfg.Logger); err != nil {
			e.cfg.Logger.Warn("max fires: disable timer", "timer", id, "err", err)
		}
		cancel()
	}
	if len(retries) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		e.addToIndex(ctx, retries)
		cancel()
	}
}

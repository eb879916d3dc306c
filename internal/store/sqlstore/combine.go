// Group commit: the claims and results that arrive while one of them holds
// the writer share the next transaction.

package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// partFunc is the body of one caller's part of a combined transaction. It
// runs with the transaction's context (not its caller's: one caller giving
// up must not break the others' statements) and must be safe to run again
// from the start, in another transaction, after it failed.
type partFunc func(ctx context.Context, tx *wtx) error

// combiner gathers the hot writes (ClaimRuns, FinishRuns, and on SQLite
// ExtendLeases) that arrive
// while a combined transaction is in progress and runs them together in
// the next one: one commit (on SQLite with synchronous=FULL one fsync, and
// one write of the pages that the claims of the next second and the results
// of the last one share) instead of one per call.
//
// Each part runs under its own savepoint, so a part that fails is rolled
// back alone and its caller gets its error, while the others commit. A part
// that failed on a transient lock conflict (deadlock, busy) is run again
// alone, in a transaction of its own, with the retries of core.tx; so is
// every part when the combined transaction cannot begin, loses itself
// (a failed rollback to a savepoint) or cannot commit: a part is applied at
// most once, since a transaction that did not commit applied nothing.
//
// The caller that finds no combined transaction in progress runs one (with
// whatever queued meanwhile); when it ends, the first caller queued since
// takes over, with the whole queue. No goroutine of its own.
type combiner struct {
	mu    sync.Mutex
	busy  bool
	queue []*part
	// size counts the parts of each combined transaction (tests).
	size func(n int)
}

type part struct {
	ctx context.Context
	fn  partFunc
	// done receives the part's outcome, or lead: this part's caller runs
	// the next transaction.
	done chan outcome
	// taken is set (under combiner.mu) once the part left the queue.
	taken bool
}

type outcome struct {
	err  error
	lead bool
}

// hotTx runs fn in a write transaction, combined with other callers' on the
// dialects where that pays (see combiner); otherwise in a transaction of its
// own, like tx. It returns fn's error, or the transaction's.
func (s *core) hotTx(ctx context.Context, fn partFunc) error {
	if !s.combineWrites {
		return s.tx(ctx, func(tx *wtx) error { return fn(ctx, tx) })
	}
	c := &s.comb
	p := &part{ctx: ctx, fn: fn, done: make(chan outcome, 1)}
	c.mu.Lock()
	if !c.busy {
		c.busy = true
		c.mu.Unlock()
		return s.lead(p)
	}
	c.queue = append(c.queue, p)
	c.mu.Unlock()
	select {
	case o := <-p.done:
		if o.lead {
			return s.lead(p)
		}
		return o.err
	case <-ctx.Done():
		c.mu.Lock()
		if !p.taken {
			// Still queued: leave the queue.
			for i, q := range c.queue {
				if q == p {
					c.queue = append(c.queue[:i], c.queue[i+1:]...)
					break
				}
			}
			c.mu.Unlock()
			return ctx.Err()
		}
		c.mu.Unlock()
		// Taken by a transaction (or made the next leader): its outcome
		// comes, and leadership must not be dropped.
		o := <-p.done
		if o.lead {
			return s.lead(p)
		}
		return o.err
	}
}

// lead runs one combined transaction with own (whose caller leads) and the
// queue, then hands the lead to the first part queued since, or ends it.
func (s *core) lead(own *part) error {
	c := &s.comb
	c.mu.Lock()
	parts := append([]*part{own}, c.queue...)
	c.queue = nil
	for _, p := range parts {
		p.taken = true
	}
	c.mu.Unlock()
	errs := s.runParts(parts)
	for i, p := range parts[1:] {
		p.done <- outcome{err: errs[i+1]}
	}
	c.mu.Lock()
	if len(c.queue) == 0 {
		c.busy = false
		c.mu.Unlock()
		return errs[0]
	}
	next := c.queue[0]
	next.taken = true
	c.queue = c.queue[1:]
	c.mu.Unlock()
	next.done <- outcome{lead: true}
	return errs[0]
}

// runParts runs parts in one transaction, each under a savepoint, and
// returns each one's error. See combiner for what is run again alone.
func (s *core) runParts(parts []*part) []error {
	errs := make([]error, len(parts))
	var live []int
	for i, p := range parts {
		if err := p.ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		live = append(live, i)
	}
	if s.comb.size != nil && len(live) > 0 {
		s.comb.size(len(live))
	}
	ctx, cancel := txContext(parts, live)
	defer cancel()
	alone := func(i int) {
		errs[i] = s.tx(ctx, func(tx *wtx) error { return parts[i].fn(ctx, tx) })
	}
	switch len(live) {
	case 0:
		return errs
	case 1:
		alone(live[0])
		return errs
	}
	var again []int // parts to run alone after the combined transaction
	err := func() error {
		tx, err := s.begin(ctx)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		for _, i := range live {
			var perr error // the part's own error, rolled back to its savepoint
			err := savepoint(ctx, tx, "chime_part", func() error { perr = parts[i].fn(ctx, tx); return perr })
			if err != nil && (perr == nil || !errors.Is(err, perr)) {
				// The savepoint itself failed: the transaction is lost.
				tx.Rollback()
				return err
			}
			if perr == nil {
				continue
			}
			if s.retryable(perr) {
				again = append(again, i)
			} else {
				errs[i] = perr
			}
		}
		if err := s.commit(tx); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		return nil
	}()
	if err != nil {
		// Nothing of the combined transaction applied: every live part
		// alone, each with the retries of core.tx.
		for _, i := range live {
			alone(i)
		}
		return errs
	}
	for _, i := range again {
		alone(i)
	}
	return errs
}

// txContext is the context of a combined transaction: no caller's
// cancellation, and the latest of the parts' deadlines, if they all have
// one.
func txContext(parts []*part, live []int) (context.Context, context.CancelFunc) {
	if len(live) == 0 {
		return context.Background(), func() {}
	}
	var latest time.Time
	for _, i := range live {
		d, ok := parts[i].ctx.Deadline()
		if !ok {
			return context.WithoutCancel(parts[live[0]].ctx), func() {}
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.WithoutCancel(parts[live[0]].ctx), latest)
}

// Claims: pending to running for one node, in batches, with the timers of
// the claimed runs (timercache.go), and Release, the undo of a claim.

package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// claimStore moves runs from pending to running (claims), keeps their
// leases and records their results.
type claimStore struct {
	*core
	timers *timerStore
	deps   *depStore
	notify *notifyStore
	// lastStart is the start of the latest claim on MySQL (claimStart).
	lastStart atomic.Int64
}

// ClaimRuns moves each run that is still pending to running. A claim with
// DueBy set applies only when the run's DueAt is not after DueBy. Claims that share
// Node, LeaseUntil, Now and DueBy (the usual case: one batch of one node) are applied
// by one statement per 500 runs. It returns the claimed runs, as stored,
// with their timers, in the order they are to be started: higher timer
// priority first, then earlier DueAt, then id (store.ClaimOrder). A pending
// run whose timer no longer exists is deleted instead of claimed.
func (s *claimStore) ClaimRuns(ctx context.Context, claims []store.Claim) ([]store.ClaimedRun, error) {
	if len(claims) == 0 {
		return nil, nil
	}
	defer s.hotOp()()
	type group struct {
		node                string
		lease, start, dueBy int64
	}
	groups := map[group][]string{}
	var order []group
	for _, c := range claims {
		g := group{c.Node, nanos(c.LeaseUntil), nanos(c.Now), nanos(c.DueBy)}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], c.RunID)
	}
	// One start per group, unique on MySQL (see claimStart).
	starts := make([]int64, len(order))
	for i, g := range order {
		starts[i] = s.claimStart(g.start)
	}
	var claimed []*model.Run
	err := s.hotTx(ctx, func(ctx context.Context, tx *wtx) error {
		claimed = claimed[:0]
		for i, g := range order {
			ids := slices.Clone(groups[g])
			slices.Sort(ids)
			ids = slices.Compact(ids)
			err := chunks(ids, func(b []string) error {
				got, err := s.claimBatch(ctx, tx, b, g.node, g.lease, starts[i], g.dueBy)
				claimed = append(claimed, got...)
				return err
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim runs: %w", err)
	}
	if len(claimed) == 0 {
		return nil, nil
	}
	timers, sealed, err := s.timers.timersByID(ctx, claimed)
	if err != nil {
		return nil, fmt.Errorf("claim runs: %w", err)
	}
	out := make([]store.ClaimedRun, 0, len(claimed))
	var orphans []string
	var unreadable []model.Result
	for _, r := range claimed {
		if err := sealed[r.TimerID]; err != nil {
			unreadable = append(unreadable, unreadableResult(r, err))
			continue
		}
		t := timers[r.TimerID]
		if t == nil {
			orphans = append(orphans, r.ID)
			continue
		}
		out = append(out, store.ClaimedRun{Run: r, Timer: t})
	}
	slices.SortFunc(out, store.ClaimOrder)
	if len(orphans) > 0 {
		// The timer was deleted while its run was planned: drop the run.
		err := chunks(orphans, func(b []string) error {
			_, err := s.w.ExecContext(ctx, s.q(`DELETE FROM runs WHERE id IN (`+placeholders(len(b))+`) AND status = 'running'`), stringArgs(b)...)
			return err
		})
		if err != nil {
			return out, fmt.Errorf("claim runs: delete runs of deleted timers: %w", err)
		}
	}
	if len(unreadable) > 0 {
		// The run cannot be performed without its secrets: it fails, with
		// the reason, instead of blocking the claims of the other timers.
		if _, _, err := s.FinishRuns(ctx, unreadable); err != nil {
			return out, fmt.Errorf("claim runs: fail runs of timers whose secrets do not decrypt: %w", err)
		}
	}
	return out, nil
}

// unreadableResult fails the claimed run r, whose timer's secrets do not
// decrypt (err).
func unreadableResult(r *model.Run, err error) model.Result {
	now := time.Now().UTC()
	start := now
	if r.StartedAt != nil {
		start = *r.StartedAt
	}
	return model.Result{RunID: r.ID, Node: r.Node, Attempt: r.Attempt, Status: model.RunFailed,
		StartedAt: start, FinishedAt: now, Error: err.Error()}
}

// claimTarget ends a claim's condition: a run with a target node is only
// that node's to claim (a shard placed on it, a run handed to it for its
// handler). Its one argument is the claiming node.
const claimTarget = ` AND (target_node = '' OR target_node = ?)`

const claimSet = `status = 'running', node = ?, lease_until = ?, started_at = ?, finished_at = NULL, duration_ms = 0, attempt = attempt + 1`

func (s *claimStore) claimBatch(ctx context.Context, tx *wtx, ids []string, node string, lease, start, dueBy int64) ([]*model.Run, error) {
	switch s.d {
	case dialectPostgres:
		return s.claimBatchPostgres(ctx, tx, ids, node, lease, start, dueBy)
	case dialectMySQL:
		return s.claimBatchMySQL(ctx, tx, ids, node, lease, start, dueBy)
	}
	// SQLite: the write transaction is exclusive, no row locks to order.
	// cond ends the WHERE clause: still pending, and due by dueBy if set.
	cond := ` AND status = 'pending'` + claimTarget
	args := append(append([]any{node, lease, start}, stringArgs(ids)...), node)
	if dueBy != 0 {
		cond += ` AND due_at <= ?`
		args = append(args, dueBy)
	}
	return s.queryRuns(ctx, tx, `UPDATE runs SET `+claimSet+` WHERE id IN (`+placeholders(len(ids))+`)`+cond+` RETURNING `+runCols, args...)
}

// claimBatchPostgres claims with one statement whose text does not depend
// on the batch (the ids go as one array), so that pgx's statement cache and
// the server's plan cache serve every claim. Concurrent claimers of one
// batch lock its rows in the same order (the sorted array of an index scan,
// or heap order), so deadlocks are rare, and retried; a row that another
// claimer took is re-checked once its lock is released, found running, and
// skipped.
func (s *claimStore) claimBatchPostgres(ctx context.Context, tx *wtx, ids []string, node string, lease, start, dueBy int64) ([]*model.Run, error) {
	query := `UPDATE runs SET ` + claimSet + ` WHERE id = ANY(?::text[]) AND status = 'pending'` + claimTarget
	args := []any{node, lease, start, ids, node}
	if dueBy != 0 {
		query += ` AND due_at <= ?`
		args = append(args, dueBy)
	}
	return s.queryRuns(ctx, tx, query+` RETURNING `+runCols, args...)
}

// claimBatchMySQL claims with an UPDATE conditional on pending, then reads
// back the rows this call claimed, which the UPDATE holds locked until the
// transaction ends: those running on node since start. start is unique to
// this call among the claims of this store (claimStart), and a node
// id is one process at a time, so no other claim, earlier or concurrent,
// left a row at (node, start). MySQL has no RETURNING; this is two
// statements instead of a SELECT … FOR UPDATE, an UPDATE and a SELECT.
func (s *claimStore) claimBatchMySQL(ctx context.Context, tx *wtx, ids []string, node string, lease, start, dueBy int64) ([]*model.Run, error) {
	idArgs := stringArgs(ids)
	cond := ` AND status = 'pending'` + claimTarget
	args := append(append([]any{node, lease, start}, idArgs...), node)
	if dueBy != 0 {
		cond += ` AND due_at <= ?`
		args = append(args, dueBy)
	}
	res, err := tx.ExecContext(ctx, `UPDATE runs SET `+claimSet+` WHERE id IN (`+placeholders(len(ids))+`)`+cond, args...)
	if err != nil {
		return nil, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return nil, err
	}
	return s.queryRuns(ctx, tx, `SELECT `+runCols+` FROM runs WHERE id IN (`+placeholders(len(ids))+`)
		AND status = 'running' AND node = ? AND started_at = ?`, append(idArgs, node, start)...)
}

// claimStart returns the start instant of a claim sent at now: now, or on
// MySQL a nanosecond after the previous claim's start when that is not
// before now, so that every claim of this store has its own start
// (claimBatchMySQL finds the rows it claimed by it).
func (s *claimStore) claimStart(now int64) int64 {
	if s.d != dialectMySQL {
		return now
	}
	for {
		last := s.lastStart.Load()
		next := max(now, last+1)
		if s.lastStart.CompareAndSwap(last, next) {
			return next
		}
	}
}

// Release gives back a run this node claimed but did not start (an overlap
// policy holds it): running → pending with DueAt = dueAt, undoing the
// claim's attempt count. Fenced on r.Node and r.Attempt.
func (s *claimStore) Release(ctx context.Context, r *model.Run, dueAt time.Time) error {
	res, err := s.w.ExecContext(ctx, s.q(`UPDATE runs SET status = 'pending', due_at = ?, lease_until = NULL,
		attempt = attempt - 1, started_at = NULL WHERE id = ? AND status = 'running' AND node = ? AND attempt = ?`),
		nanos(dueAt), r.ID, r.Node, r.Attempt)
	if err != nil {
		return fmt.Errorf("release run %s: %w", r.ID, err)
	}
	return s.checkRunUpdated(ctx, res, r.ID, "release run "+r.ID)
}

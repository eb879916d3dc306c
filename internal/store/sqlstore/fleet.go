// Runs placed on nodes: hand-offs to a node that has a run's handler, and
// fires split into shards (broadcast, shards). See store.Fleet.

package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/chimehq/chime/model"
)

// fleetStore keeps the runs placed on nodes: hand-offs and the shards of
// a fire.
type fleetStore struct {
	*core
	deps *depStore
	// fires is where the next FinishFires reads the waiting fires from:
	// after the id after, "" for the first.
	fires struct {
		mu    sync.Mutex
		after string
	}
}

// Handoff gives a claimed run to target, as Release gives it back.
func (s *fleetStore) Handoff(ctx context.Context, r *model.Run, target string, dueAt time.Time) error {
	res, err := s.w.ExecContext(ctx, s.q(`UPDATE runs SET status = 'pending', due_at = ?, lease_until = NULL,
		attempt = attempt - 1, started_at = NULL, target_node = ? WHERE id = ? AND status = 'running' AND node = ? AND attempt = ?`),
		nanos(dueAt), target, r.ID, r.Node, r.Attempt)
	if err != nil {
		return fmt.Errorf("hand run %s to node %s: %w", r.ID, target, err)
	}
	return s.checkRunUpdated(ctx, res, r.ID, "hand run "+r.ID+" to node "+target)
}

// DirectedRuns returns the pending runs placed on node due before until.
func (s *fleetStore) DirectedRuns(ctx context.Context, node string, until time.Time, limit int) ([]*model.Run, error) {
	if limit <= 0 {
		limit = 1000
	}
	runs, err := s.queryRuns(ctx, s.r, `SELECT `+runCols+` FROM runs WHERE target_node = ? AND status = 'pending'
		AND target_node <> '' AND due_at < ? ORDER BY due_at, id LIMIT `+strconv.Itoa(limit), node, nanos(until))
	if err != nil {
		return nil, fmt.Errorf("runs placed on node %s: %w", node, err)
	}
	return runs, nil
}

// UntargetRuns makes the pending runs placed on nodes not in live
// anybody's again.
// placedRunsQuery selects the pending runs placed on a node, but for the
// limit. It is ordered as the index runs_pending_target is, so that it reads
// the placed runs only, not every pending run (ordered by due_at alone,
// SQLite scanned them all by due time at every sweep; TestPlacedRunsPlan).
const placedRunsQuery = `SELECT ` + runCols + ` FROM runs WHERE target_node <> '' AND status = 'pending'
	ORDER BY target_node, due_at LIMIT `

func (s *fleetStore) UntargetRuns(ctx context.Context, live []string, limit int) ([]*model.Run, error) {
	if limit <= 0 {
		limit = 1000
	}
	placed, err := s.queryRuns(ctx, s.r, placedRunsQuery+strconv.Itoa(limit))
	if err != nil {
		return nil, fmt.Errorf("untarget runs: %w", err)
	}
	var out []*model.Run
	for _, r := range placed {
		if slices.Contains(live, r.TargetNode) {
			continue
		}
		res, err := s.w.ExecContext(ctx, s.q(`UPDATE runs SET target_node = '' WHERE id = ? AND status = 'pending' AND target_node = ?`),
			r.ID, r.TargetNode)
		if err != nil {
			return out, fmt.Errorf("untarget run %s: %w", r.ID, err)
		}
		if n, err := res.RowsAffected(); err == nil && n > 0 {
			r.TargetNode = ""
			out = append(out, r)
		}
	}
	return out, nil
}

// StartFire inserts the shards of fire and leaves it waiting for them.
func (s *fleetStore) StartFire(ctx context.Context, fire *model.Run, shards []*model.Run) error {
	now := time.Now().UnixNano()
	err := s.tx(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, s.q(`UPDATE runs SET lease_until = NULL, fire_id = ?, shard_total = ?
			WHERE id = ? AND status = 'running' AND node = ? AND attempt = ?`),
			fire.ID, len(shards), fire.ID, fire.Node, fire.Attempt)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("fence (node %s, attempt %d): %w", fire.Node, fire.Attempt, model.ErrNotClaimed)
		}
		insert := `INSERT INTO runs (id, timer_id, timer_hash, scheduled_at, due_at, status, attempt, duration_ms, output, error,
			node, manual, created_at, fire_id, shard_index, shard_total, target_node)
			VALUES (?, ?, ?, ?, ?, 'pending', 0, 0, '', '', '', ?, ?, ?, ?, ?, ?)`
		if s.d == dialectMySQL {
			insert = `INSERT IGNORE` + insert[len(`INSERT`):]
		} else {
			insert += ` ON CONFLICT DO NOTHING`
		}
		for _, sh := range shards {
			if sh.Shard == nil {
				return fmt.Errorf("shard of fire %s without its index", fire.ID)
			}
			at := model.ShardInstant(fire.ScheduledAt, sh.Shard.Index)
			due := sh.DueAt
			if due.IsZero() {
				due = fire.DueAt
			}
			if _, err := tx.ExecContext(ctx, s.q(insert), model.ShardRunID(fire.TimerID, fire.ScheduledAt, sh.Shard.Index),
				fire.TimerID, int64(model.TimerHash(fire.TimerID)), at.UnixNano(), nanos(due), fire.Manual, now,
				fire.ID, sh.Shard.Index, sh.Shard.Total, sh.TargetNode); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("start fire %s: %w", fire.ID, err)
	}
	return nil
}

// waitingFiresQuery reads the fires waiting for their shards by an index
// whose entries for them are in id order: runs_fires_waiting on PostgreSQL
// (migration 0013), the index of running leases on SQLite and
// runs_status_lease_until on MySQL, from after an id. It ends with LIMIT.
const waitingFiresQuery = `SELECT ` + runCols + ` FROM runs WHERE status = 'running' AND lease_until IS NULL AND id > ? ORDER BY id LIMIT `

// FinishFires ends the waiting fires whose shards have all ended. Each
// call reads limit waiting fires on from where the previous call stopped,
// then from the first again, so that fires that wait long (a shard on a
// node that never takes it) hold no other back, however many they are.
//
// A fire's end is recorded in one transaction with what it makes: the
// runs of the timers after the fire's (follow, as a result's end makes
// them) and its notify event (the notifier expands it by the timer's
// rules). A shard's end makes neither.
func (s *fleetStore) FinishFires(ctx context.Context, now time.Time, limit int) (done []string, made []*model.Run, err error) {
	if limit <= 0 {
		limit = 1000
	}
	s.fires.mu.Lock()
	after := s.fires.after
	s.fires.mu.Unlock()
	waiting, err := s.queryRuns(ctx, s.r, waitingFiresQuery+strconv.Itoa(limit), after)
	if err != nil {
		return nil, nil, fmt.Errorf("finish fires: %w", err)
	}
	next := ""
	if len(waiting) == limit {
		next = waiting[len(waiting)-1].ID
	}
	s.fires.mu.Lock()
	s.fires.after = next
	s.fires.mu.Unlock()
	for _, f := range waiting {
		if f.FireID != f.ID {
			continue
		}
		rows, err := s.r.QueryContext(ctx, s.q(`SELECT status, COUNT(*) FROM runs WHERE fire_id = ? AND id <> ? GROUP BY status`), f.ID, f.ID)
		if err != nil {
			return done, made, fmt.Errorf("finish fire %s: %w", f.ID, err)
		}
		counts := map[model.RunStatus]int{}
		total := 0
		for rows.Next() {
			var st string
			var n int
			if err := rows.Scan(&st, &n); err != nil {
				rows.Close()
				return done, made, fmt.Errorf("finish fire %s: %w", f.ID, err)
			}
			counts[model.RunStatus(st)] += n
			total += n
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return done, made, fmt.Errorf("finish fire %s: %w", f.ID, err)
		}
		if counts[model.RunPending] > 0 || counts[model.RunRunning] > 0 {
			continue
		}
		status, reason := model.RunSucceeded, ""
		if ok := counts[model.RunSucceeded]; ok < total || total == 0 {
			status = model.RunFailed
			reason = fmt.Sprintf("%d of %d shards did not succeed (failed %d, skipped %d, cancelled %d)",
				total-ok, total, counts[model.RunFailed], counts[model.RunSkipped], counts[model.RunCancelled])
		}
		var ms int64
		if f.StartedAt != nil {
			ms = max(now.Sub(*f.StartedAt).Milliseconds(), 0)
		}
		var (
			applied bool
			fired   []*model.Run
		)
		err = s.tx(ctx, func(tx *wtx) error {
			applied, fired = false, nil
			res, err := tx.ExecContext(ctx, s.q(`UPDATE runs SET status = ?, error = ?, finished_at = ?, duration_ms = ?
				WHERE id = ? AND status = 'running' AND lease_until IS NULL`), string(status), reason, nanos(now), ms, f.ID)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				return err
			}
			applied = true
			if fired, err = s.deps.follow(ctx, tx, []ended{{runID: f.ID, timerID: f.TimerID, status: status, at: now.UTC()}}); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, s.insertIgnore("notify_events", notifyEventCols, 5),
				f.ID, f.Attempt, f.TimerID, string(status), nanos(now))
			return err
		})
		if err != nil {
			return done, made, fmt.Errorf("finish fire %s: %w", f.ID, err)
		}
		made = append(made, fired...)
		if applied {
			done = append(done, f.ID)
		}
	}
	return done, made, nil
}

// FireShards returns the shards of a fire, by index.
func (s *fleetStore) FireShards(ctx context.Context, fireID string) ([]*model.Run, error) {
	runs, err := s.queryRuns(ctx, s.r, `SELECT `+runCols+` FROM runs WHERE fire_id = ? AND id <> ? ORDER BY shard_index`, fireID, fireID)
	if err != nil {
		return nil, fmt.Errorf("shards of fire %s: %w", fireID, err)
	}
	return runs, nil
}

// Dependencies between timers (model.Timer.After): the edges a save
// writes, the cycles it refuses, and the downstream runs that an upstream
// run's end makes in the transaction that records that end.

package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// depStore keeps the timers' After edges and writes what a finished run
// starts downstream (follow).
type depStore struct {
	*core
}

// ended is an upstream run's end, recorded in the transaction at hand: a
// result that applied (its fence held) with a final status, or a status
// change to failed or succeeded.
type ended struct {
	runID string
	// timerID is the run's timer when the result said it (the executor's
	// do); "" makes follow read it from the run.
	timerID string
	status  model.RunStatus
	at      time.Time
}

// endOf returns the end that recording r (cleaned, applied) makes, and
// false for a failed attempt that goes back to pending for a retry.
func endOf(r model.Result) (ended, bool) {
	if r.Status == model.RunFailed && !r.RetryAt.IsZero() {
		return ended{}, false
	}
	if r.Status != model.RunSucceeded && r.Status != model.RunFailed {
		return ended{}, false
	}
	at := r.FinishedAt
	if at.IsZero() {
		at = time.Now()
	}
	return ended{runID: r.RunID, timerID: r.TimerID, status: r.Status, at: at.UTC()}, true
}

// follow makes, in tx, the runs of the timers that run after the runs of
// ends: for each downstream timer, in id order (one lock order for every
// writer), it locks the timer's edges, marks each end that meets its edge
// as seen, and when every edge of the timer is seen (a join: one edge, or
// each of several) inserts one run due at once, naming the upstream run
// that completed the join, and clears the marks. A disabled downstream
// timer gets no run and keeps no mark.
//
// It runs in the transaction that records the ends, after their fenced
// writes: an end that is recorded twice, or by a node whose fence no longer
// holds, is not an end here, and a transaction that does not commit makes
// no run. The run's id and the unique (timer_id, upstream_run_id) make the
// insert idempotent besides.
//
// It returns the runs it inserted, which the caller returns once the
// transaction commits (see store.Store.FinishRuns).
func (s *depStore) follow(ctx context.Context, tx *wtx, ends []ended) ([]*model.Run, error) {
	if len(ends) == 0 {
		return nil, nil
	}
	byRun := make(map[string]ended, len(ends))
	ids := make([]string, 0, len(ends))
	for _, e := range ends {
		if _, ok := byRun[e.runID]; !ok {
			ids = append(ids, e.runID)
		}
		byRun[e.runID] = e
	}
	type event struct {
		end      ended
		upstream string
	}
	events := map[string][]event{}
	add := func(runID, upstream, downstream, on string) {
		if e := byRun[runID]; model.Ends(on, e.status) {
			events[downstream] = append(events[downstream], event{e, upstream})
		}
	}
	// The ends whose timer is known look up that timer's edges only (an
	// index probe of the small timer_deps, usually empty); the others
	// read their run's timer too.
	var unknown []string
	byTimer := map[string][]string{} // timer -> its ended runs
	for _, id := range ids {
		if t := byRun[id].timerID; t != "" {
			byTimer[t] = append(byTimer[t], id)
		} else {
			unknown = append(unknown, id)
		}
	}
	timers := slices.Sorted(maps.Keys(byTimer))
	err := chunks(timers, func(b []string) error {
		rows, err := tx.QueryContext(ctx, s.q(`SELECT upstream_id, timer_id, on_status FROM timer_deps
			WHERE upstream_id IN (`+placeholders(len(b))+`)`), stringArgs(b)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var upstream, downstream, on string
			if err := rows.Scan(&upstream, &downstream, &on); err != nil {
				return err
			}
			for _, runID := range byTimer[upstream] {
				add(runID, upstream, downstream, on)
			}
		}
		return rows.Err()
	})
	if err == nil {
		err = chunks(unknown, func(b []string) error {
			rows, err := tx.QueryContext(ctx, s.q(`SELECT r.id, r.timer_id, d.timer_id, d.on_status FROM runs r
				JOIN timer_deps d ON d.upstream_id = r.timer_id WHERE r.id IN (`+placeholders(len(b))+`)`), stringArgs(b)...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var runID, upstream, downstream, on string
				if err := rows.Scan(&runID, &upstream, &downstream, &on); err != nil {
					return err
				}
				add(runID, upstream, downstream, on)
			}
			return rows.Err()
		})
	}
	if err != nil {
		return nil, fmt.Errorf("dependencies: %w", err)
	}
	if len(events) > 0 {
		// A shard's end is not its fire's: the fire's end (FinishFires)
		// meets the edges, once.
		var met []string
		for _, evs := range events {
			for _, ev := range evs {
				met = append(met, ev.end.runID)
			}
		}
		shards, err := s.shardsAmong(ctx, tx, met)
		if err != nil {
			return nil, fmt.Errorf("dependencies: %w", err)
		}
		for d, evs := range events {
			evs = slices.DeleteFunc(evs, func(ev event) bool { return shards[ev.end.runID] })
			if len(evs) == 0 {
				delete(events, d)
			} else {
				events[d] = evs
			}
		}
	}
	var made []*model.Run
	downs := make([]string, 0, len(events))
	for d := range events {
		downs = append(downs, d)
	}
	slices.Sort(downs)
	for _, d := range downs {
		evs := events[d]
		slices.SortFunc(evs, func(a, b event) int {
			if c := a.end.at.Compare(b.end.at); c != 0 {
				return c
			}
			return strings.Compare(a.end.runID, b.end.runID)
		})
		ups := make([]string, len(evs))
		endsOf := make([]ended, len(evs))
		for i, ev := range evs {
			ups[i], endsOf[i] = ev.upstream, ev.end
		}
		runs, err := s.join(ctx, tx, d, ups, endsOf)
		if err != nil {
			return nil, fmt.Errorf("dependencies of timer %s: %w", d, err)
		}
		made = append(made, runs...)
	}
	return made, nil
}

// shardsAmong returns which of the runs ids are shards of a split fire.
func (s *core) shardsAmong(ctx context.Context, tx *wtx, ids []string) (map[string]bool, error) {
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	shards := map[string]bool{}
	err := chunks(ids, func(b []string) error {
		found, err := s.queryIDs(ctx, tx, `SELECT id FROM runs WHERE id IN (`+placeholders(len(b))+`) AND shard_index >= 0`, stringArgs(b)...)
		for _, id := range found {
			shards[id] = true
		}
		return err
	})
	return shards, err
}

// join applies the ends of upstream runs (ends[i] of timer ups[i], in the
// order they ended) to downstream's join, in tx (see follow).
func (s *depStore) join(ctx context.Context, tx *wtx, downstream string, ups []string, ends []ended) ([]*model.Run, error) {
	lock := ""
	if s.d != dialectSQLite {
		// A locking read: it waits for, then sees, the marks of a
		// concurrent end of another upstream of the same timer (SQLite's
		// writer is one at a time).
		lock = " FOR UPDATE"
	}
	rows, err := tx.QueryContext(ctx, s.q(`SELECT upstream_id, seen_run FROM timer_deps WHERE timer_id = ? ORDER BY upstream_id`+lock), downstream)
	if err != nil {
		return nil, err
	}
	seen := map[string]string{}
	for rows.Next() {
		var up, run string
		if err := rows.Scan(&up, &run); err != nil {
			rows.Close()
			return nil, err
		}
		seen[up] = run
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var enabled bool
	err = tx.QueryRowContext(ctx, s.q(`SELECT enabled FROM timers WHERE id = ?`), downstream).Scan(&enabled)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !enabled) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	before := maps.Clone(seen)
	var made []ended
	for i, up := range ups {
		if _, ok := seen[up]; !ok {
			continue // the edge went meanwhile
		}
		seen[up] = ends[i].runID
		all := true
		for _, v := range seen {
			all = all && v != ""
		}
		if all {
			made = append(made, ends[i])
			for k := range seen {
				seen[k] = ""
			}
		}
	}
	for _, up := range slices.Sorted(maps.Keys(seen)) {
		if seen[up] == before[up] {
			continue
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE timer_deps SET seen_run = ? WHERE timer_id = ? AND upstream_id = ?`),
			seen[up], downstream, up); err != nil {
			return nil, err
		}
	}
	var out []*model.Run
	for _, e := range made {
		why, err := s.cycleOf(ctx, tx, downstream, e.runID)
		if err != nil {
			return nil, err
		}
		r, err := s.insertDependent(ctx, tx, downstream, e, why)
		if err != nil {
			return nil, err
		}
		if r != nil && why != "" {
			// The chain stops here: the run is recorded failed, and its
			// notify event raises the timer's failure notifications.
			if _, err := tx.ExecContext(ctx, s.insertIgnore("notify_events", notifyEventCols, 5),
				r.ID, 0, downstream, string(model.RunFailed), nanos(r.ScheduledAt)); err != nil {
				return nil, fmt.Errorf("notify event of run %s: %w", r.ID, err)
			}
			continue
		}
		if r != nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// maxChainWalk bounds how many upstream runs cycleOf reads: a cycle of up
// to that many timers is met the first time it closes.
const maxChainWalk = 100

// cycleOf reports, in words, whether a run of downstream made by the end
// of run upstream would close a cycle: whether a run of downstream is
// among upstream and the runs whose ends made it (model.Run.UpstreamRunID,
// back to a scheduled or manual run). A save refuses a cycle of edges, but
// two concurrent saves can each add the edge that closes one; this meets
// it at run time, where it would otherwise make runs for ever. "" when
// there is none.
func (s *depStore) cycleOf(ctx context.Context, tx *wtx, downstream, upstream string) (string, error) {
	chain := []string{}
	for id, hops := upstream, 0; id != "" && hops < maxChainWalk; hops++ {
		var timerID string
		var up sql.NullString
		err := tx.QueryRowContext(ctx, s.q(`SELECT timer_id, upstream_run_id FROM runs WHERE id = ?`), id).Scan(&timerID, &up)
		if errors.Is(err, sql.ErrNoRows) {
			return "", nil // pruned: the chain is not known further
		}
		if err != nil {
			return "", fmt.Errorf("chain of run %s: %w", upstream, err)
		}
		chain = append(chain, timerID)
		if timerID == downstream {
			slices.Reverse(chain)
			return fmt.Sprintf("dependency cycle: timer %s runs after itself (%s -> %s); the chain stops here: remove one of its edges",
				downstream, strings.Join(chain, " -> "), downstream), nil
		}
		id = up.String
	}
	return "", nil
}

// insertDependent inserts the run of downstream made by the end e, due at
// once, and returns it; nil when it exists already. Should another run of
// downstream hold the same instant (a scheduled fire at that very
// nanosecond), the run takes the next free microsecond. With a cycle's
// explanation (cycleOf), the run is inserted failed, with it as its error.
func (s *depStore) insertDependent(ctx context.Context, tx *wtx, downstream string, e ended, cycle string) (*model.Run, error) {
	ins := `INSERT INTO runs (` + insertRunCols + `, upstream_run_id) VALUES (?,?,?,?,?,?,0,0,'',?,'',?,?,'',?,?)`
	status, finished := model.RunPending, sql.NullInt64{}
	if cycle != "" {
		status = model.RunFailed
	}
	switch s.d {
	case dialectMySQL:
		ins = strings.Replace(ins, "INSERT INTO", "INSERT IGNORE INTO", 1)
	default:
		ins += ` ON CONFLICT DO NOTHING`
	}
	at := e.at
	for try := 0; try < 5; try++ {
		id := model.DependentRunID(downstream, e.runID, at)
		if cycle != "" {
			finished = sql.NullInt64{Int64: at.UnixNano(), Valid: true}
		}
		res, err := tx.ExecContext(ctx, s.q(ins), id, downstream, int64(model.TimerHash(downstream)), at.UnixNano(), at.UnixNano(),
			string(status), cleanText(cycle, store.MaxResultText), false, at.UnixNano(), finished, e.runID)
		if err != nil {
			return nil, fmt.Errorf("insert run after %s: %w", e.runID, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return nil, err
		}
		if n > 0 {
			return &model.Run{ID: id, TimerID: downstream, ScheduledAt: at, DueAt: at, Status: status, Error: cycle,
				UpstreamRunID: e.runID, CreatedAt: at}, nil
		}
		var one int
		err = tx.QueryRowContext(ctx, s.q(`SELECT 1 FROM runs WHERE timer_id = ? AND upstream_run_id = ?`), downstream, e.runID).Scan(&one)
		if err == nil {
			return nil, nil // made already
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
		at = at.Add(time.Microsecond)
	}
	return nil, fmt.Errorf("insert run after %s: every instant taken", e.runID)
}

// loadAfter sets the After of each of timers from the edges table.
func (s *depStore) loadAfter(ctx context.Context, db querier, timers ...*model.Timer) error {
	if len(timers) == 0 {
		return nil
	}
	byID := make(map[string]*model.Timer, len(timers))
	ids := make([]string, 0, len(timers))
	for _, t := range timers {
		if t == nil {
			continue
		}
		t.After = nil
		byID[t.ID] = t
		ids = append(ids, t.ID)
	}
	return chunks(ids, func(b []string) error {
		rows, err := db.QueryContext(ctx, s.q(`SELECT timer_id, upstream_id, on_status FROM timer_deps
			WHERE timer_id IN (`+placeholders(len(b))+`) ORDER BY timer_id, position`), stringArgs(b)...)
		if err != nil {
			return fmt.Errorf("load dependencies: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var d model.Dependency
			if err := rows.Scan(&id, &d.Timer, &d.On); err != nil {
				return fmt.Errorf("load dependencies: %w", err)
			}
			if t := byID[id]; t != nil {
				t.After = append(t.After, d)
			}
		}
		return rows.Err()
	})
}

// writeDeps makes the stored edges of t what t.After says, in tx: an edge
// that stays keeps its join mark (unless its On changed), a new one starts
// unmarked. It refuses an upstream that does not exist and an After that
// would close a cycle, with a *model.FieldError on after.
func (s *depStore) writeDeps(ctx context.Context, tx *wtx, t *model.Timer) error {
	rows, err := tx.QueryContext(ctx, s.q(`SELECT upstream_id, on_status, position FROM timer_deps WHERE timer_id = ?`), t.ID)
	if err != nil {
		return err
	}
	type edge struct {
		on  string
		pos int
	}
	old := map[string]edge{}
	for rows.Next() {
		var up string
		var e edge
		if err := rows.Scan(&up, &e.on, &e.pos); err != nil {
			rows.Close()
			return err
		}
		old[up] = e
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(old) == 0 && len(t.After) == 0 {
		return nil
	}
	if len(t.After) > 0 {
		if err := s.checkUpstreams(ctx, tx, t); err != nil {
			return err
		}
	}
	keep := map[string]bool{}
	for i, d := range t.After {
		keep[d.Timer] = true
		o, ok := old[d.Timer]
		switch {
		case !ok:
			_, err = tx.ExecContext(ctx, s.q(`INSERT INTO timer_deps (timer_id, upstream_id, on_status, position, seen_run) VALUES (?, ?, ?, ?, '')`),
				t.ID, d.Timer, d.On, i)
		case o.on != d.On:
			_, err = tx.ExecContext(ctx, s.q(`UPDATE timer_deps SET on_status = ?, position = ?, seen_run = '' WHERE timer_id = ? AND upstream_id = ?`),
				d.On, i, t.ID, d.Timer)
		case o.pos != i:
			_, err = tx.ExecContext(ctx, s.q(`UPDATE timer_deps SET position = ? WHERE timer_id = ? AND upstream_id = ?`), i, t.ID, d.Timer)
		}
		if err != nil {
			return fmt.Errorf("write dependencies: %w", err)
		}
	}
	for up := range old {
		if !keep[up] {
			if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM timer_deps WHERE timer_id = ? AND upstream_id = ?`), t.ID, up); err != nil {
				return fmt.Errorf("write dependencies: %w", err)
			}
		}
	}
	return nil
}

// checkUpstreams refuses, with a *model.FieldError, an upstream of t that
// does not exist, and with a *model.CycleError (which unwraps to one) an
// After that closes a cycle (t among its own upstreams, however far up). The cycle check reads the whole graph in
// tx; two concurrent saves that each close half of a cycle on MySQL or
// PostgreSQL can both pass it (SQLite's saves are one at a time).
func (s *depStore) checkUpstreams(ctx context.Context, tx *wtx, t *model.Timer) error {
	ids := make([]string, len(t.After))
	for i, d := range t.After {
		ids[i] = d.Timer
	}
	found := map[string]bool{}
	names, err := s.timerNames(ctx, tx, ids)
	if err != nil {
		return err
	}
	for id := range names {
		found[id] = true
	}
	for i, d := range t.After {
		if d.Timer == t.ID {
			return model.Errorf(fmt.Sprintf("after[%d].timer", i), "a timer cannot run after itself")
		}
		if !found[d.Timer] {
			return model.Errorf(fmt.Sprintf("after[%d].timer", i), "no timer %q", d.Timer)
		}
	}
	// The graph's upstream lists, t's own replaced by its new one.
	up := map[string][]string{t.ID: ids}
	rows, err := tx.QueryContext(ctx, s.q(`SELECT timer_id, upstream_id FROM timer_deps WHERE timer_id <> ? ORDER BY timer_id, position`), t.ID)
	if err != nil {
		return err
	}
	for rows.Next() {
		var d, u string
		if err := rows.Scan(&d, &u); err != nil {
			rows.Close()
			return err
		}
		up[d] = append(up[d], u)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	path := cyclePath(up, t.ID)
	if path == nil {
		return nil
	}
	names, err = s.timerNames(ctx, tx, path)
	if err != nil {
		return err
	}
	names[t.ID] = t.App + "/" + t.Name
	shown := make([]string, len(path))
	for i, id := range path {
		shown[i] = names[id]
		if shown[i] == "" {
			shown[i] = id
		}
	}
	// path runs upstream; the cycle reads downstream, as the runs flow.
	slices.Reverse(shown)
	return &model.CycleError{Path: shown}
}

// cyclePath returns a path from start back to start through up (timer →
// its upstreams), start at both ends, or nil when there is none.
func cyclePath(up map[string][]string, start string) []string {
	visited := map[string]bool{}
	var path []string
	var walk func(id string) bool
	walk = func(id string) bool {
		path = append(path, id)
		for _, u := range up[id] {
			if u == start {
				path = append(path, start)
				return true
			}
			if visited[u] {
				continue
			}
			visited[u] = true
			if walk(u) {
				return true
			}
		}
		path = path[:len(path)-1]
		return false
	}
	if walk(start) {
		return path
	}
	return nil
}

// timerNames returns "app/name" of each of ids that exists.
func (s *depStore) timerNames(ctx context.Context, db querier, ids []string) (map[string]string, error) {
	out := map[string]string{}
	err := chunks(ids, func(b []string) error {
		rows, err := db.QueryContext(ctx, s.q(`SELECT id, app, name FROM timers WHERE id IN (`+placeholders(len(b))+`)`), stringArgs(b)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id, app, name string
			if err := rows.Scan(&id, &app, &name); err != nil {
				return err
			}
			out[id] = app + "/" + name
		}
		return rows.Err()
	})
	return out, err
}

// dependentsOf returns the edges of the timers that run after id.
func (s *depStore) dependentsOf(ctx context.Context, db querier, id string) ([]model.Edge, error) {
	rows, err := db.QueryContext(ctx, s.q(`SELECT timer_id, on_status FROM timer_deps WHERE upstream_id = ? ORDER BY timer_id`), id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []model.Edge
	for rows.Next() {
		e := model.Edge{Upstream: id}
		if err := rows.Scan(&e.Downstream, &e.On); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// Downstreams returns the edges of the timers that run after the timer
// id, ordered by downstream id (none: an empty slice).
func (s *depStore) Downstreams(ctx context.Context, id string) ([]model.Edge, error) {
	out, err := s.dependentsOf(ctx, s.r, id)
	if err != nil {
		return nil, fmt.Errorf("downstreams of %s: %w", id, err)
	}
	if out == nil {
		out = []model.Edge{}
	}
	return out, nil
}

// DetachDependents removes the timer id from the After of every timer
// that runs after it, and returns their ids. A detached timer left with no
// upstream and no schedule fires only when triggered.
func (s *depStore) DetachDependents(ctx context.Context, id string) ([]string, error) {
	var ids []string
	err := s.tx(ctx, func(tx *wtx) error {
		edges, err := s.dependentsOf(ctx, tx, id)
		if err != nil {
			return err
		}
		ids = ids[:0]
		for _, e := range edges {
			ids = append(ids, e.Downstream)
		}
		if len(ids) == 0 {
			return nil
		}
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM timer_deps WHERE upstream_id = ?`), id); err != nil {
			return err
		}
		// The detached timers changed: bump their versions, so cached
		// copies are read again.
		return chunks(ids, func(b []string) error {
			_, err := tx.ExecContext(ctx, s.q(`UPDATE timers SET version = version + 1 WHERE id IN (`+placeholders(len(b))+`)`), stringArgs(b)...)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("detach dependents of %s: %w", id, err)
	}
	return ids, nil
}

// refuseDependents returns an error wrapping model.ErrHasDependents that
// names the timers that run after id, if any.
func (s *depStore) refuseDependents(ctx context.Context, tx *wtx, id string) error {
	edges, err := s.dependentsOf(ctx, tx, id)
	if err != nil || len(edges) == 0 {
		return err
	}
	ids := make([]string, len(edges))
	for i, e := range edges {
		ids[i] = e.Downstream
	}
	names, err := s.timerNames(ctx, tx, ids)
	if err != nil {
		return err
	}
	shown := make([]string, len(ids))
	for i, d := range ids {
		shown[i] = d
		if n := names[d]; n != "" {
			shown[i] = n + " (" + d + ")"
		}
	}
	return fmt.Errorf("%w: %s", model.ErrHasDependents, strings.Join(shown, ", "))
}

package bench

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// OpStats summarises the calls of one store method during the measured
// phase: how many, how many rows they carried, and their latency.
type OpStats struct {
	Calls        int     `json:"calls"`
	Rows         int     `json:"rows"`
	P50          float64 `json:"p50_ms"`
	P99          float64 `json:"p99_ms"`
	Max          float64 `json:"max_ms"`
	TotalSeconds float64 `json:"total_seconds"`
	// PerFire is Calls per result recorded in the phase (FinishRuns rows):
	// the store's calls, and its SQL transactions and statements, per fire.
	PerFire float64 `json:"per_fire,omitempty"`
}

// counter is what a store that counts its SQL work reports
// (sqlstore.Store.Counts): write transactions committed and the
// statements run in them.
type counter interface {
	Counts() (transactions, statements int64)
}

// timedStore wraps a store and times the methods on the hot path, so that a
// report says where the time of a fire goes without a profiler.
type timedStore struct {
	store.Store
	mu  sync.Mutex
	on  bool
	ops map[string]*opRec
	// txs0 and stmts0 are the store's counts when recording began.
	txs0, stmts0 int64
}

type opRec struct {
	ns   []int64
	rows int
}

func newTimedStore(s store.Store) *timedStore {
	return &timedStore{Store: s, ops: map[string]*opRec{}}
}

// record starts (on) or stops recording.
func (s *timedStore) record(on bool) {
	s.mu.Lock()
	s.on = on
	if c, ok := s.Store.(counter); ok && on {
		s.txs0, s.stmts0 = c.Counts()
	}
	s.mu.Unlock()
}

// reset forgets the calls recorded so far.
func (s *timedStore) reset() {
	s.mu.Lock()
	s.ops = map[string]*opRec{}
	if c, ok := s.Store.(counter); ok {
		s.txs0, s.stmts0 = c.Counts()
	}
	s.mu.Unlock()
}

func (s *timedStore) done(op string, start time.Time, rows int) {
	d := time.Since(start).Nanoseconds()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.on {
		return
	}
	r := s.ops[op]
	if r == nil {
		r = &opRec{}
		s.ops[op] = r
	}
	r.ns = append(r.ns, d)
	r.rows += rows
}

// stats returns the summary per method.
func (s *timedStore) stats() map[string]OpStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]OpStats{}
	for op, r := range s.ops {
		ns := slices.Clone(r.ns)
		slices.Sort(ns)
		var total int64
		for _, v := range ns {
			total += v
		}
		out[op] = OpStats{Calls: len(ns), Rows: r.rows, P50: ms(pct(ns, 0.5)), P99: ms(pct(ns, 0.99)),
			Max: ms(ns[len(ns)-1]), TotalSeconds: float64(total) / 1e9}
	}
	if c, ok := s.Store.(counter); ok {
		txs, stmts := c.Counts()
		out["SQL transactions"] = OpStats{Calls: int(txs - s.txs0)}
		out["SQL statements"] = OpStats{Calls: int(stmts - s.stmts0)}
	}
	if fires := out["FinishRuns"].Rows; fires > 0 {
		for op, o := range out {
			o.PerFire = float64(o.Calls) / float64(fires)
			out[op] = o
		}
	}
	return out
}

func (s *timedStore) ClaimRuns(ctx context.Context, claims []store.Claim) ([]store.ClaimedRun, error) {
	defer s.done("ClaimRuns", time.Now(), len(claims))
	return s.Store.ClaimRuns(ctx, claims)
}

// ExtendLeases is timed too: every action starts on a lease extended to
// the full lease (one write per attempt, batched with those that start
// together), and under overload attempts that wait past
// executor.PromoteAfter for a worker, a lane or the recorder are extended
// again; the rows show both.
func (s *timedStore) ExtendLeases(ctx context.Context, node string, leases []store.Lease, until time.Time) ([]store.Lease, error) {
	defer s.done("ExtendLeases", time.Now(), len(leases))
	return s.Store.ExtendLeases(ctx, node, leases, until)
}

func (s *timedStore) FinishRuns(ctx context.Context, rs []model.Result) ([]bool, []*model.Run, error) {
	defer s.done("FinishRuns", time.Now(), len(rs))
	return s.Store.FinishRuns(ctx, rs)
}

func (s *timedStore) InsertRuns(ctx context.Context, runs []*model.Run) ([]*model.Run, error) {
	defer s.done("InsertRuns", time.Now(), len(runs))
	return s.Store.InsertRuns(ctx, runs)
}

func (s *timedStore) InsertPlanned(ctx context.Context, runs []*model.Run, versions map[string]int64) ([]*model.Run, error) {
	defer s.done("InsertPlanned", time.Now(), len(runs))
	return s.Store.InsertPlanned(ctx, runs, versions)
}

func (s *timedStore) SaveTimer(ctx context.Context, w store.TimerWrite) ([]*model.Run, error) {
	defer s.done("SaveTimer", time.Now(), len(w.Runs))
	return s.Store.SaveTimer(ctx, w)
}

func (s *timedStore) PendingRuns(ctx context.Context, from, to time.Time, limit int) ([]*model.Run, error) {
	start := time.Now()
	runs, err := s.Store.PendingRuns(ctx, from, to, limit)
	s.done("PendingRuns", start, len(runs))
	return runs, err
}

func (s *timedStore) TimersToPlan(ctx context.Context, horizon time.Time, after store.PlanCursor, limit int) ([]*model.Timer, error) {
	start := time.Now()
	ts, err := s.Store.TimersToPlan(ctx, horizon, after, limit)
	s.done("TimersToPlan", start, len(ts))
	return ts, err
}

func (s *timedStore) SetPlannedUntil(ctx context.Context, plans map[string]store.Plan) error {
	defer s.done("SetPlannedUntil", time.Now(), len(plans))
	return s.Store.SetPlannedUntil(ctx, plans)
}

// The store calls of the REST API's timer routes, for the api scenario.

func (s *timedStore) UpdateTimer(ctx context.Context, t *model.Timer) error {
	defer s.done("UpdateTimer", time.Now(), 1)
	return s.Store.UpdateTimer(ctx, t)
}

func (s *timedStore) GetTimer(ctx context.Context, id string) (*model.Timer, error) {
	defer s.done("GetTimer", time.Now(), 1)
	return s.Store.GetTimer(ctx, id)
}

func (s *timedStore) AppendAudit(ctx context.Context, e *model.AuditEntry) error {
	defer s.done("AppendAudit", time.Now(), 1)
	return s.Store.AppendAudit(ctx, e)
}

package trigger

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/startstop"
	"github.com/chimehq/chime/internal/base/testsignal"
	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// Executor is what the trigger needs of the executor.
type Executor interface {
	Claim(ctx context.Context, entries []index.Entry) ([]store.ClaimedRun, error)
	Submit(cr store.ClaimedRun)
	// GiveBack returns a claimed run that will not be started to pending,
	// due at its instant, for another node to run.
	GiveBack(cr store.ClaimedRun)
	// Saturated reports whether the executor should be given no more runs
	// for now (backpressure).
	Saturated() bool
}

// Store is what a Trigger reads of the store: the due runs of its slices
// (store.Store implements it).
type Store interface {
	DueRuns(ctx context.Context, from time.Time, to time.Time, buckets int, in ...int) ([]*model.Run, error)
}

// Config configures a Trigger.
type Config struct {
	Store    Store
	Index    index.Index
	Executor Executor
	// ClaimAhead is how long before its instant a run is claimed, so that
	// the claim's round trip, and a busy store, do not delay the fire: the
	// action still starts at the instant. Default DefaultClaimAhead (the
	// claim's lease covers it).
	ClaimAhead time.Duration
	// ReadAhead is how far ahead each poll of the index reads. Default 3s.
	ReadAhead time.Duration
	// Poll is the interval of index polls. Default 200ms.
	Poll time.Duration
	// DoneGrace is how long after its minute a slice is kept before it is
	// reported done. Default 2s.
	DoneGrace time.Duration
	// OnDone is called (from the trigger's goroutine) when a slice is done:
	// its minute is over and every run in it was dispatched.
	OnDone func(s index.Slice)
	// Clock is the cluster's clock, which instants are judged by; the
	// trigger's timers run on it. Default clock.System(0).
	Clock  clock.Clock
	Logger *slog.Logger
}

// Trigger dispatches runs of held slices at their instants.
type Trigger struct {
	cfg          Config
	recheckEvery time.Duration // recheckEvery; tests shorten it before Start

	mu   sync.Mutex
	heap itemHeap
	// ready holds the runs whose claim is due and that wait for the
	// executor, by priority (see dispatchLoop).
	ready readyHeap
	// prio holds the priorities of timers that are not
	// model.DefaultPriority, as learnt from claims and SetPriority.
	prio   map[string]int8
	slices map[index.Slice]*sliceState
	// stopping is set (under mu) when Stop begins: Take starts no more
	// reads.
	stopping bool

	life   startstop.Base
	wake   chan struct{}
	stop   chan struct{}
	wg     sync.WaitGroup
	claims sync.WaitGroup
	// claiming counts the claims in progress (see maxClaiming), and
	// claimingRuns their runs.
	claiming     atomic.Int32
	claimingRuns atomic.Int64
	// rechecking is set while a train of rechecks runs.
	rechecking atomic.Bool

	// armed holds the claimed runs waiting for their instant, by instant
	// (Unix ns).
	armedMu sync.Mutex
	armed   map[int64]*armedGroup
	stopped bool

	signals testSignals
}

// testSignals report to tests what the trigger did (see
// internal/base/testsignal); in production they do nothing.
type testSignals struct {
	armed  testsignal.Signal[string]      // a claimed run was armed or submitted (its id)
	polled testsignal.Signal[time.Time]   // a poll of the index ended (the poll's time)
	read   testsignal.Signal[index.Slice] // a read of a slice's runs from the store ended
}

// Init makes the signals report to tb.
func (s *testSignals) Init(tb testsignal.TB) {
	s.armed.Init(tb)
	s.polled.Init(tb)
	s.read.Init(tb)
}

// New returns a Trigger; call Start.
func New(cfg Config) *Trigger {
	if cfg.ClaimAhead <= 0 {
		cfg.ClaimAhead = DefaultClaimAhead
	}
	if cfg.ReadAhead <= 0 {
		cfg.ReadAhead = 3 * time.Second
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 200 * time.Millisecond
	}
	if cfg.DoneGrace <= 0 {
		cfg.DoneGrace = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Clock = clock.Default(cfg.Clock)
	return &Trigger{cfg: cfg, recheckEvery: recheckEvery, slices: map[index.Slice]*sliceState{}, prio: map[string]int8{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), armed: map[int64]*armedGroup{}}
}

// Start starts the dispatch and poll loops. It is safe to call twice; a
// stopped trigger does not start again (startstop.ErrStopped).
func (t *Trigger) Start(ctx context.Context) error {
	return t.life.Start(ctx, "trigger", func(context.Context) error {
		t.wg.Add(2)
		go t.dispatchLoop()
		go t.pollLoop()
		return nil
	})
}

// Stop stops dispatching and waits for claims in progress. Runs claimed
// ahead of an instant that has not come yet are given back, so that
// another node runs them at their instant. It is safe to call twice, and
// without Start.
func (t *Trigger) Stop(ctx context.Context) error {
	return t.life.Stop(ctx, func(context.Context) error {
		t.stopNow()
		return nil
	})
}

func (t *Trigger) stopNow() {
	t.mu.Lock()
	t.stopping = true // Take starts nothing more
	t.mu.Unlock()
	close(t.stop)
	t.wg.Wait()
	t.claims.Wait()
	t.armedMu.Lock()
	t.stopped = true
	armed := t.armed
	t.armed = nil
	t.armedMu.Unlock()
	for _, g := range armed {
		// A group still in the map has not fired: fire takes it out
		// first, under armedMu.
		g.timer.Stop()
		for _, cr := range g.runs {
			t.cfg.Executor.GiveBack(cr)
		}
	}
}

package trigger

import (
	"context"
	"log/slog"
	"sync"
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

// Trigger dispatches runs of held slices at their instants. It is a thin
// owner: the holder keeps the slices held and the runs queued for them,
// the dispatcher claims those runs and starts them at their instants, and
// Trigger wires the two and runs their loops between Start and Stop.
type Trigger struct {
	cfg  Config
	held *holder
	disp *dispatcher

	life startstop.Base
	// stop is closed when Stop begins; wg counts the goroutines that end
	// with it (the loops, and the reads of the store and the index).
	stop chan struct{}
	wg   sync.WaitGroup

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
	t := &Trigger{cfg: cfg, stop: make(chan struct{})}
	t.disp = newDispatcher(&t.cfg, &t.signals)
	t.held = newHolder(&t.cfg, t.stop, &t.wg, t.disp.kick, &t.signals)
	t.disp.held = t.held
	return t
}

// Start starts the dispatch and poll loops. It is safe to call twice; a
// stopped trigger does not start again (startstop.ErrStopped).
func (t *Trigger) Start(ctx context.Context) error {
	return t.life.Start(ctx, "trigger", func(context.Context) error {
		t.wg.Add(2)
		go func() {
			defer t.wg.Done()
			t.disp.loop(t.stop)
		}()
		go func() {
			defer t.wg.Done()
			t.held.pollLoop()
		}()
		return nil
	})
}

// Stop stops dispatching and waits for claims in progress. Runs claimed
// ahead of an instant that has not come yet are given back, so that
// another node runs them at their instant. It is safe to call twice, and
// without Start.
func (t *Trigger) Stop(ctx context.Context) error {
	return t.life.Stop(ctx, func(context.Context) error {
		t.held.stopTaking()
		close(t.stop)
		t.wg.Wait()
		t.disp.stop()
		return nil
	})
}

// Take starts dispatching slice s: its runs are read from the store in the
// background, a few seconds of them at a time as its minute goes by.
func (t *Trigger) Take(s index.Slice) { t.held.Take(s) }

// Drop stops dispatching slice s (its lock was lost or released). Runs of s
// already claimed still run.
func (t *Trigger) Drop(s index.Slice) { t.held.Drop(s) }

// Notify offers runs planned or retried on this node; those in held slices
// due within the next ReadAhead are queued at once, the others are left to
// their slices' owners, or to the polls of the index and the reads of the
// store that find them as their instant nears.
func (t *Trigger) Notify(entries []index.Entry) { t.held.Notify(entries) }

// SetPriority tells the trigger the priority of a timer's runs (the engine
// calls it when a timer is saved on this node); the trigger also learns it
// from every claim, whose runs come with their timers. A run of a timer
// the trigger does not know yet queues at model.DefaultPriority.
func (t *Trigger) SetPriority(timerID string, p int) { t.held.SetPriority(timerID, p) }

package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chimehq/chime"
	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/engine"
	"github.com/chimehq/chime/internal/engine/action"
	"github.com/chimehq/chime/internal/nodeparts"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// The node under measurement, assembled by chime.New, and the timers the
// scenarios give it.

// node is one chime node, assembled by chime.New as `chime serve` and the
// library assemble theirs, and the receiver it fires at. The bench sees
// inside it through chime.Config's hooks: the store wrapped in a timedStore
// (storestats.go) and the runner of the timers' action (HTTP, or the
// handler of handler.go) in a timedRunner (receiver.go).
type node struct {
	cfg   Config
	node  *chime.Node
	store *timedStore    // the node's store, as every part of it sees it
	idx   index.Index    // the node's slice index
	eng   *engine.Engine // the node's engine
	recv  fireLog
	run   *timedRunner
	close []func()
}

// newNode opens the receiver and assembles (but does not start) a node
// with chime.New: the same store options, Redis client, index, locks,
// runners (egress policy, signed callbacks) and metrics as a `chime serve`
// node, in a temporary data dir (which holds the SQLite file when cfg.DB
// is empty), with a fresh Redis key prefix per run.
func newNode(ctx context.Context, cfg Config) (*node, error) {
	n := &node{cfg: cfg}
	ok := false
	defer func() {
		if !ok {
			n.shutdown()
		}
	}()
	dir, err := os.MkdirTemp("", "chime-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: temp dir: %w", err)
	}
	n.close = append(n.close, func() { os.RemoveAll(dir) })
	if cfg.Action == ActionHandler {
		n.recv = newHandlerLog() // registered on the node below
	} else if cfg.Receiver != "" {
		r, err := newRemoteReceiver(ctx, cfg.Receiver)
		if err != nil {
			return nil, err
		}
		n.recv = r
	} else {
		r, err := startReceiver("127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		n.close = append(n.close, r.close)
		n.recv = r
	}
	ncfg := chime.Config{
		DB:      cfg.DB,
		Redis:   cfg.Redis,
		DataDir: dir,
		// `chime serve` registers the engine's metrics; so does the bench,
		// so that it pays for them too.
		Registerer: prometheus.NewRegistry(),
		Logger:     cfg.Logger,
		Cluster: chime.ClusterConfig{
			Coordination: cfg.Coordination,
			NodeID:       "bench-" + randHex(4),
			FileLocks:    cfg.FileLocks,
			Buckets:      cfg.Buckets,
		},
		Plan: chime.PlanConfig{
			Lookahead: cfg.Lookahead,
		},
		Actions: chime.ActionsConfig{
			PoolSize: cfg.PoolSize,
		},
		Database: chime.DatabaseConfig{
			SQLiteSynchronous: cfg.SQLiteSynchronous,
		},
		Test: chime.TestConfig{
			ClaimAhead:  cfg.ClaimAhead,
			RedisPrefix: "chimebench-" + randHex(4),
			WrapStore: func(s store.Store) store.Store {
				n.store = newTimedStore(s)
				return n.store
			},
			WrapRunner: func(typ string, r action.Runner) action.Runner {
				if typ != cfg.Action {
					return r
				}
				n.run = &timedRunner{next: r}
				return n.run
			},
		},
	}
	if cfg.Redis == "" {
		ncfg.Test.RedisPrefix = ""
	}
	n.node, err = chime.New(ncfg)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	n.close = append(n.close, func() {
		sctx, cancel := context.WithTimeout(context.Background(), shutdownWait)
		defer cancel()
		_ = n.node.Shutdown(sctx)
	})
	if h, ok := n.recv.(*handlerLog); ok {
		n.node.Handle(benchHandler, chime.HandlerFunc(h.Run))
	}
	parts := nodeparts.Of(n.node)
	n.idx, n.eng = parts.Index, parts.Engine
	ok = true
	return n, nil
}

// start starts the node (its engine: the first planning pass runs before
// it returns).
func (n *node) start(ctx context.Context) error {
	if err := n.node.Start(ctx); err != nil {
		return fmt.Errorf("bench: start node: %w", err)
	}
	return nil
}

// stopEngine shuts the engine down, flushing recorded results, and leaves
// the store open for the report (shutdown closes it). It waits at most
// shutdownWait: an overloaded node may take much longer to record its
// backlog, and the report then says so. It returns whether the engine
// stopped in time.
func (n *node) stopEngine() bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), shutdownWait)
		defer cancel()
		if err := n.eng.Shutdown(ctx); err != nil {
			n.cfg.Logger.Warn("bench: engine shutdown", "err", err)
		}
	}()
	select {
	case <-done:
		return true
	case <-time.After(shutdownWait + 5*time.Second):
		n.cfg.Logger.Warn("bench: engine shutdown did not finish; reporting without it", "waited", shutdownWait+5*time.Second)
		return false
	}
}

// shutdownWait bounds the engine's shutdown in a bench run.
const shutdownWait = 20 * time.Second

func (n *node) shutdown() {
	for i := len(n.close) - 1; i >= 0; i-- {
		n.close[i]()
	}
	n.close = nil
}

// timer returns an enabled timer with the bench's action (handler.go): an
// HTTP callback to the receiver, or the bench's Go handler.
func (n *node) timer(name, spec string, created time.Time) *model.Timer {
	return &model.Timer{
		ID: newID(), App: "bench", Name: name, Schedule: spec, Timezone: "UTC", Enabled: true,
		Action:  n.action(),
		Timeout: 10 * time.Second, Retry: model.RetryPolicy{MaxAttempts: 1, Backoff: time.Second},
		CreatedAt: created, UpdatedAt: created,
	}
}

// createTimers writes timers through the store with a few writers at once.
func (n *node) createTimers(ctx context.Context, timers []*model.Timer) error {
	const workers = 8
	var next atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(timers) || ctx.Err() != nil {
					return
				}
				if _, err := n.store.SaveTimer(ctx, store.TimerWrite{Timer: timers[i], Create: true}); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("bench: create timer %d: %w", i, err)
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return firstErr
}

func (n *node) runsByStatus(ctx context.Context) (StatusMap, error) {
	s, err := n.store.Stats(ctx)
	if err != nil {
		return nil, fmt.Errorf("bench: store stats: %w", err)
	}
	return StatusMap(s.Runs), nil
}

// newID returns a timer id as the API makes them: a ULID (the run ids of
// its timers order by it: model.TimerKey).
func newID() string { return ulid.Make().String() }

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

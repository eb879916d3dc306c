package sim

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/coord/index/memindex"
	"github.com/chimehq/chime/internal/coord/lock/memlock"
	"github.com/chimehq/chime/internal/engine"
	"github.com/chimehq/chime/internal/engine/action"
	"github.com/chimehq/chime/internal/metrics"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/sqlstore"
	"github.com/chimehq/chime/internal/timers"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/schedule"
)

// Options configures one simulation. Run must be called inside a
// testing/synctest bubble: every duration below is simulated time.
type Options struct {
	Seed  uint64
	Hours int // simulated hours; invariants are checked at the end of each
	// Hour is the length of a simulated "hour" (0: one hour), for
	// profiling the simulator on shorter runs.
	Hour time.Duration
	// Nodes is the cluster size (0: drawn from the seed, 3 to 5).
	Nodes int
	// Timers is how many timers the workload has (0: drawn from the seed).
	Timers int
	// Quiet faults: none are injected (a baseline).
	NoFaults bool
	// Logger receives the engines' logs (nil: discarded).
	Logger *slog.Logger
}

// Result is what a simulation found.
type Result struct {
	Seed       uint64
	Nodes      int
	Violations []Violation // the invariants broken, first ones first
	Execs      int         // executions of actions
	Faults     []string    // the faults injected, in order
	StoreCalls int64
}

// world is one simulated cluster.
type world struct {
	seed  uint64
	rng   *rand.Rand
	opts  Options
	t0    time.Time
	store *sqlstore.Store
	index *memindex.Index
	locks *locks
	elect *memlock.Elector
	log   *slog.Logger

	nodes []*node
	execs execLog

	mu     sync.Mutex
	events []event // kills, stops, pauses, outages: what excuses a second delivery

	timers    []*timerSpec
	profiles  map[string]*timerSpec // by timer name; profileMu guards it
	profileMu sync.Mutex

	storeCalls atomic.Int64
	faults     []string

	done chan struct{}  // closed at the end: the background goroutines return
	bg   sync.WaitGroup // the background goroutines (faults, timer pauses)
}

// sleepUntil waits until t; false: the simulation ended first.
func (w *world) sleepUntil(t time.Time) bool {
	tm := time.NewTimer(time.Until(t))
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-w.done:
		return false
	}
}

// event is a recorded fault of one node, over [from, to).
type event struct {
	node     string
	kind     string
	from, to time.Time
}

// node is one node id: a process of it, restarted under a new nodeIO.
type node struct {
	w       *world
	id      string
	skew    time.Duration
	windows []window

	mu  sync.Mutex
	io  *nodeIO
	eng *engine.Engine
	gen int
}

// Run runs one simulation to its end and checks its invariants after every
// simulated hour.
func Run(opts Options) (*Result, error) {
	if opts.Hours <= 0 {
		opts.Hours = 1
	}
	if opts.Hour <= 0 {
		opts.Hour = time.Hour
	}
	w := &world{
		seed: opts.Seed, opts: opts,
		rng:      rand.New(rand.NewPCG(opts.Seed, 0x5eed)),
		t0:       time.Now(),
		profiles: map[string]*timerSpec{},
		log:      opts.Logger,
		done:     make(chan struct{}),
	}
	if w.log == nil {
		w.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, "sqlite::memory:", sqlstore.Options{})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	w.store = st
	n := opts.Nodes
	if n <= 0 {
		n = 3 + w.rng.IntN(3)
	}
	w.index = memindex.NewWithOptions(memindex.Options{Buckets: 4, Horizon: memindex.DefaultHorizon})
	w.locks = newLocks()
	w.elect = memlock.NewElector(nil)
	end := w.t0.Add(time.Duration(opts.Hours) * opts.Hour)
	for i := range n {
		nd := &node{w: w, id: fmt.Sprintf("n%d", i+1)}
		w.nodes = append(w.nodes, nd)
	}
	if !opts.NoFaults {
		w.planFaults(end)
	}
	for _, nd := range w.nodes {
		nd.start()
	}
	if err := w.createTimers(ctx); err != nil {
		w.stopAll()
		return nil, err
	}
	res := &Result{Seed: opts.Seed, Nodes: n}
	for h := 1; h <= opts.Hours; h++ {
		time.Sleep(time.Until(w.t0.Add(time.Duration(h) * opts.Hour)))
		v, err := w.check(ctx, time.Now())
		if err != nil {
			w.stopAll()
			return nil, err
		}
		for i := range v {
			v[i].Hour = h
		}
		res.Violations = append(res.Violations, v...)
		if len(res.Violations) > 0 {
			break
		}
	}
	w.stopAll()
	res.Execs = w.execs.len()
	res.Faults = w.faults
	res.StoreCalls = w.storeCalls.Load()
	return res, nil
}

// recordEvent records a fault of a node.
func (w *world) recordEvent(e event) {
	w.mu.Lock()
	w.events = append(w.events, e)
	w.mu.Unlock()
}

func (w *world) eventsSnapshot() []event {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.events)
}

// start starts a new process of the node. A store that does not answer
// makes it try again every second, as a supervisor would.
func (nd *node) start() {
	w := nd.w
	for {
		nd.mu.Lock()
		nd.gen++
		io := &nodeIO{w: w, node: nd.id, gen: nd.gen, killed: make(chan struct{}), windows: nd.windows}
		nd.io = io
		nd.mu.Unlock()
		hr := action.NewHandlerRunner(nd.id)
		hr.Register(handlerName, &handler{w: w, io: io})
		eng, err := engine.New(engine.Config{
			Store: &faultStore{Store: w.store, n: io}, Index: nodeIndex{ix: w.index, io: io},
			Locker: nodeLocks{s: w.locks, io: io}, Elector: nodeElector{e: w.elect, io: io},
			NodeID: nd.id, Runners: map[string]action.Runner{model.ActionHandler: hr},
			Handlers: hr.Names, HasHandler: hr.Exists,
			HistoryKeep: -1, HistoryMaxAge: -1,
			Clock:   clock.System(nd.skew),
			Metrics: metrics.New(nil), Logger: w.log.With("node", nd.id, "gen", nd.gen),
		})
		if err != nil {
			panic(err) // a configuration error of the simulator
		}
		nd.mu.Lock()
		nd.eng = eng
		nd.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = eng.Start(ctx)
		cancel()
		if err == nil {
			return
		}
		// A process whose start failed exits; its supervisor starts
		// another a second later.
		nd.kill()
		if !w.sleepUntil(time.Now().Add(time.Second)) {
			return
		}
	}
}

// kill ends the process at once: from now on it makes no call and runs no
// action; its engine is torn down with every call refused.
func (nd *node) kill() {
	nd.mu.Lock()
	io, eng := nd.io, nd.eng
	nd.mu.Unlock()
	io.mu.Lock()
	if io.dead {
		io.mu.Unlock()
		return
	}
	io.dead = true
	close(io.killed)
	io.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = eng.Stop(ctx)
}

// stop shuts the process down cleanly (SIGTERM), as chime serve does.
func (nd *node) stop(grace time.Duration) {
	nd.mu.Lock()
	eng := nd.eng
	nd.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	_ = eng.Stop(ctx)
	cancel()
	nd.kill() // whatever the stop left running dies with the process
}

func (w *world) stopAll() {
	close(w.done)
	w.bg.Wait()
	var wg sync.WaitGroup
	for _, nd := range w.nodes {
		wg.Go(nd.kill)
	}
	wg.Wait()
}

// planFaults draws the faults of the whole simulation and schedules them.
func (w *world) planFaults(end time.Time) {
	r := w.rng
	// Faults strike from 20 s in until 8 minutes before the end, so that
	// the fires they touch have settled by the last check (runs shorter
	// than 9 minutes: anywhere in their first half).
	span := end.Sub(w.t0) - 8*time.Minute
	if span < time.Minute {
		span = end.Sub(w.t0) / 2
	}
	at := func() time.Time { return w.t0.Add(20*time.Second + time.Duration(r.Int64N(int64(span)))) }
	dur := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(r.Int64N(int64(hi-lo))) }
	for _, nd := range w.nodes {
		nd.skew = time.Duration(r.Int64N(int64(800*time.Millisecond))) - 400*time.Millisecond
		if r.IntN(10) == 0 { // past engine.DefaultMaxClockSkew: the node stands by
			nd.skew = time.Duration(1500+r.IntN(2000)) * time.Millisecond
			w.faults = append(w.faults, fmt.Sprintf("%s skew %s", nd.id, nd.skew))
		}
		add := func(kind string, n int, lo, hi time.Duration, delay time.Duration) {
			for range n {
				from := at()
				nd.windows = append(nd.windows, window{from: from, to: from.Add(dur(lo, hi)), kind: kind, delay: delay})
			}
		}
		add("outage", r.IntN(3), 500*time.Millisecond, 15*time.Second, 0)
		add("stall", r.IntN(3), 300*time.Millisecond, 12*time.Second, 0)
		add("slow", r.IntN(2), 30*time.Second, 2*time.Minute, dur(50*time.Millisecond, 600*time.Millisecond))
		add("lost", r.IntN(2), 10*time.Second, time.Minute, 0)
		add("pause", r.IntN(3), time.Second, 20*time.Second, 0)
		add("indexdelay", r.IntN(2), 10*time.Second, time.Minute, dur(10*time.Millisecond, 400*time.Millisecond))
		slices.SortFunc(nd.windows, func(a, b window) int { return a.from.Compare(b.from) })
		for _, win := range nd.windows {
			w.faults = append(w.faults, fmt.Sprintf("%s %s %s+%s", nd.id, win.kind, win.from.Sub(w.t0), win.to.Sub(win.from)))
			if win.kind != "indexdelay" {
				w.recordEvent(event{node: nd.id, kind: win.kind, from: win.from, to: win.to})
			}
		}
	}
	type proc struct {
		at   time.Time
		kind string
		nd   *node
		d    time.Duration
	}
	var procs []proc
	for range r.IntN(4) {
		procs = append(procs, proc{at(), "kill", w.nodes[r.IntN(len(w.nodes))], dur(time.Second, 30*time.Second)})
	}
	for range r.IntN(3) {
		procs = append(procs, proc{at(), "stop", w.nodes[r.IntN(len(w.nodes))], dur(time.Second, 20*time.Second)})
	}
	for range r.IntN(4) {
		procs = append(procs, proc{at(), "evict", nil, 0})
	}
	slices.SortFunc(procs, func(a, b proc) int { return a.at.Compare(b.at) })
	// A node's kills and stops run one after the other, in its own
	// goroutine; evictions in one of their own.
	byNode := map[*node][]proc{}
	var evicts []time.Time
	for _, p := range procs {
		if p.nd == nil {
			evicts = append(evicts, p.at)
			w.faults = append(w.faults, fmt.Sprintf("evict %s", p.at.Sub(w.t0)))
			continue
		}
		byNode[p.nd] = append(byNode[p.nd], p)
		w.faults = append(w.faults, fmt.Sprintf("%s %s %s down %s", p.nd.id, p.kind, p.at.Sub(w.t0), p.d))
	}
	pick := rand.New(rand.NewPCG(w.seed, 0xe71c7))
	w.bg.Go(func() {
		for _, t := range evicts {
			if !w.sleepUntil(t) {
				return
			}
			w.locks.evict(func(n int) int { return pick.IntN(n) })
		}
	})
	for _, nd := range w.nodes {
		ps := byNode[nd]
		if len(ps) == 0 {
			continue
		}
		w.bg.Go(func() {
			for _, p := range ps {
				if !w.sleepUntil(p.at) {
					return
				}
				from := time.Now()
				if p.kind == "kill" {
					nd.kill()
				} else {
					nd.stop(10 * time.Second)
				}
				w.recordEvent(event{node: nd.id, kind: p.kind, from: from, to: time.Now().Add(p.d)})
				if !w.sleepUntil(time.Now().Add(p.d)) {
					return
				}
				nd.start()
			}
		})
	}
}

// handlerName is the one Go handler of the simulation's timers.
const handlerName = "sim"

// everySecond is the cron schedule of a timer that fires every second.
const everySecond = "* * * * * *"

// timerSpec is a timer of the workload and how its action behaves.
type timerSpec struct {
	t        *model.Timer
	minDur   time.Duration
	maxDur   time.Duration
	failRate float64
	pauses   []event // spans while the timer was paused
}

// createTimers draws the workload and saves it through node 1's save path.
func (w *world) createTimers(ctx context.Context) error {
	r := rand.New(rand.NewPCG(w.seed, 0x71)) // the workload does not depend on the faults drawn
	n := w.opts.Timers
	if n <= 0 {
		n = 4 + r.IntN(7)
	}
	svc := timers.NewService(timers.Config{Store: w.store, Engine: w.nodes[0].eng,
		Validate: timers.ValidateOptions{HandlerExists: func(string) bool { return true }}})
	start := w.t0.Add(5 * time.Second).Truncate(time.Second)
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], w.seed)
	ids := rand.NewChaCha8(key) // timer ids from the seed, not from ulid.Make's process-wide entropy
	var names []string
	secondly := false
	for i := range n {
		name := fmt.Sprintf("t%02d", i)
		sp := &timerSpec{}
		t := &model.Timer{App: "sim", Name: name, Timezone: "UTC", Enabled: true,
			Action:  model.Action{Type: model.ActionHandler, Handler: &model.HandlerAction{Name: handlerName}},
			Timeout: time.Minute, Retry: model.RetryPolicy{MaxAttempts: 1 + r.IntN(3), Backoff: time.Second},
		}
		t.Policy.StartAt = start
		switch k := r.IntN(10); {
		case k < 2:
			t.Schedule = everySecond
		case k < 7:
			t.Schedule = fmt.Sprintf("@every %ds", []int{2, 3, 5, 10, 15, 30}[r.IntN(6)])
		case k < 8:
			t.Schedule = "@at " + w.t0.Add(time.Duration(1+r.IntN(50))*time.Minute).UTC().Format(time.RFC3339)
		default:
			if len(names) > 0 {
				up := names[r.IntN(len(names))]
				t.After = []model.Dependency{{Timer: w.profiles[up].t.ID, On: []string{model.OnSuccess, model.OnFinish, model.OnFailure}[r.IntN(3)]}}
				if len(names) > 1 && r.IntN(3) == 0 { // a join
					up2 := names[r.IntN(len(names))]
					if up2 != up {
						t.After = append(t.After, model.Dependency{Timer: w.profiles[up2].t.ID, On: model.OnFinish})
					}
				}
				t.Policy.StartAt = time.Time{}
			} else {
				t.Schedule = "@every 5s"
			}
		}
		t.Policy.Misfire = []string{model.MisfireAll, model.MisfireLatest, model.MisfireSkip}[r.IntN(3)]
		t.Policy.Overlap = []string{model.OverlapAllow, model.OverlapSkip, model.OverlapBufferOne, model.OverlapCancelRunning}[r.IntN(4)]
		if jit := time.Duration(1+r.IntN(3000)) * time.Millisecond; r.IntN(4) == 0 && t.Schedule != "" {
			if s, err := schedule.Parse(t.Schedule); err == nil && schedule.MinInterval(s) > 0 {
				t.Policy.Jitter = min(jit, schedule.MinInterval(s)/2)
			}
		}
		if r.IntN(5) == 0 && t.Schedule != "" {
			t.Policy.MaxFires = 5 + r.IntN(40)
		}
		switch r.IntN(8) {
		case 0:
			t.Policy.Mode = model.ModeBroadcast
		case 1:
			t.Policy.Shards = 2 + r.IntN(3)
		}
		if t.Schedule == everySecond {
			if secondly { // one every-second timer at most, not split: the simulator's time goes to them
				t.Schedule = "@every 10s"
			} else {
				t.Policy.Mode, t.Policy.Shards = "", 0
			}
			secondly = true
		}
		switch r.IntN(4) {
		case 0: // long: past the claim lease, promoted and extended
			sp.minDur, sp.maxDur = 2*time.Second, 20*time.Second
		case 1:
			sp.minDur, sp.maxDur = 300*time.Millisecond, 3*time.Second
		default:
			sp.minDur, sp.maxDur = 5*time.Millisecond, 200*time.Millisecond
		}
		sp.failRate = []float64{0, 0, 0.1, 0.3}[r.IntN(4)]
		sp.t = t
		if err := w.save(ctx, svc, t, ids); err != nil {
			return err
		}
		names = append(names, name)
		w.timers = append(w.timers, sp)
		w.profileMu.Lock()
		w.profiles[name] = sp
		w.profileMu.Unlock()
	}
	// Manual triggers of timers that count their fires: a manual run is
	// not a fire of the schedule.
	for _, sp := range w.timers {
		if sp.t.Policy.MaxFires == 0 || r.IntN(2) == 0 {
			continue
		}
		at := w.t0.Add(time.Duration(10+r.IntN(600)) * time.Second)
		w.faults = append(w.faults, fmt.Sprintf("trigger timer %s %s", sp.t.Name, at.Sub(w.t0)))
		w.bg.Go(func() {
			if !w.sleepUntil(at) {
				return
			}
			for _, nd := range w.nodes {
				nd.mu.Lock()
				eng, io := nd.eng, nd.io
				nd.mu.Unlock()
				if io.isDead() {
					continue
				}
				if _, err := eng.Trigger(ctx, sp.t); err == nil {
					return
				}
			}
		})
	}
	// Pauses of timers: a few spans each, through the save path.
	for _, sp := range w.timers {
		if r.IntN(6) != 0 || sp.t.Schedule == "" {
			continue
		}
		from := w.t0.Add(time.Duration(2+r.IntN(40)) * time.Minute)
		to := from.Add(time.Duration(10+r.IntN(300)) * time.Second)
		sp.pauses = append(sp.pauses, event{kind: "paused", from: from, to: to})
		w.faults = append(w.faults, fmt.Sprintf("pause timer %s %s+%s", sp.t.Name, from.Sub(w.t0), to.Sub(from)))
		w.bg.Go(func() {
			for _, p := range []struct {
				at     time.Time
				paused bool
			}{{from, true}, {to, false}} {
				if !w.sleepUntil(p.at) {
					return
				}
				for {
					t, err := w.store.GetTimer(ctx, sp.t.ID)
					if err == nil {
						_, err = svc.SetPaused(ctx, t, p.paused, nil)
					}
					if err == nil || errors.Is(err, model.ErrNotFound) {
						break
					}
					if !w.sleepUntil(time.Now().Add(100 * time.Millisecond)) {
						return
					}
				}
			}
		})
	}
	return nil
}

// save creates t as timers.Service.Create does, with an id drawn from ids.
func (w *world) save(ctx context.Context, svc *timers.Service, t *model.Timer, ids io.Reader) error {
	now := time.Now().UTC()
	t.ID = ulid.MustNew(ulid.Timestamp(now), ids).String()
	t.CreatedAt, t.UpdatedAt = now, now
	if err := svc.Validate(t); err != nil {
		return err
	}
	eng := w.nodes[0].eng
	wr := store.TimerWrite{Timer: t, Create: true}
	eng.PlanSave(ctx, &wr, true)
	inserted, err := w.store.SaveTimer(ctx, wr)
	if err != nil {
		return fmt.Errorf("create timer %s: %w", t.Name, err)
	}
	eng.Saved(ctx, t, true, inserted)
	return nil
}

// exec is one execution of an action: one attempt of one run, as its
// receiver saw it.
type exec struct {
	runID, timerID, fireID string
	shard                  int // -1: not a shard
	scheduled, due         time.Time
	attempt                int
	node                   string
	gen                    int
	start, end             time.Time
	outcome                string // "ok", "fail", "stopped", "killed"
}

type execLog struct {
	mu sync.Mutex
	l  []*exec
}

func (l *execLog) add(e *exec) {
	l.mu.Lock()
	l.l = append(l.l, e)
	l.mu.Unlock()
}

func (l *execLog) finish(e *exec, outcome string) {
	l.mu.Lock()
	e.end, e.outcome = time.Now(), outcome
	l.mu.Unlock()
}

func (l *execLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.l)
}

// snapshot copies the log; an execution still going has a zero end.
func (l *execLog) snapshot() []exec {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]exec, len(l.l))
	for i, e := range l.l {
		out[i] = *e
	}
	return out
}

// handler is the simulation's Go handler on one process: it records every
// execution and runs for a duration drawn from the seed and the attempt.
type handler struct {
	w  *world
	io *nodeIO
}

func (a *handler) Run(ctx context.Context, run *model.Run, t *model.Timer) ([]byte, error) {
	if err := a.io.frozen(ctx); err != nil {
		return nil, err
	}
	a.w.profileMu.Lock()
	sp := a.w.profiles[t.Name]
	a.w.profileMu.Unlock()
	e := &exec{runID: run.ID, timerID: run.TimerID, fireID: run.FireID, shard: -1, scheduled: run.ScheduledAt, due: run.DueAt,
		attempt: run.Attempt, node: a.io.node, gen: a.io.gen, start: time.Now()}
	if run.Shard != nil {
		e.shard = run.Shard.Index
	}
	a.w.execs.add(e)
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", run.ID, run.Attempt)
	r := rand.New(rand.NewPCG(a.w.seed, h.Sum64()))
	d := sp.minDur + time.Duration(r.Int64N(int64(sp.maxDur-sp.minDur)+1))
	fail := r.Float64() < sp.failRate
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-a.io.killed:
		a.w.execs.finish(e, "killed")
		return nil, errDead
	case <-ctx.Done():
		// The sender aborts the request once it runs again.
		_ = a.io.frozen(ctx)
		a.w.execs.finish(e, "stopped")
		return nil, ctx.Err()
	}
	if fail {
		a.w.execs.finish(e, "fail")
		_ = a.io.frozen(ctx)
		return nil, errors.New("sim: action failed")
	}
	a.w.execs.finish(e, "ok")
	_ = a.io.frozen(ctx)
	return []byte("ok"), nil
}

// allRuns reads every run of timerID from the shared store.
func allRuns(ctx context.Context, st store.Store, timerID string) ([]*model.Run, error) {
	var out []*model.Run
	f := store.RunFilter{TimerID: timerID, Limit: 1000}
	for {
		runs, next, err := st.ListRuns(ctx, f)
		if err != nil {
			return nil, err
		}
		out = append(out, runs...)
		if next == "" || len(runs) == 0 {
			return out, nil
		}
		f.Before = next
	}
}

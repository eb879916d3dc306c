// Package bench measures a chime node: it runs an engine in process over an
// embedded (SQLite + in-process index and locks) or cluster (MySQL/MariaDB or
// PostgreSQL + Redis) backend, fires HTTP callbacks at a receiver (in process
// on loopback, or in a separate process: see Receive), and reports how close
// to their instants the fires landed, how many per second the node
// sustained, and what it cost in CPU and memory.
//
// Three scenarios:
//
//   - steady: timers whose schedules add up to a target fire rate, measured
//     for a duration after a warm-up;
//   - burst: N one-shot timers all due at the same instant;
//   - scale: a large number of enabled timers written through the store,
//     one planning pass over the look-ahead window timed, and the REST API's
//     latency measured while the node carries them.
//
// `chime bench` is the command line over Run.
package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chimehq/chime/engine"
	"github.com/chimehq/chime/executor"
	"github.com/chimehq/chime/index"
	"github.com/chimehq/chime/index/memindex"
	"github.com/chimehq/chime/index/redisindex"
	"github.com/chimehq/chime/lock"
	"github.com/chimehq/chime/lock/memlock"
	"github.com/chimehq/chime/lock/redislock"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/store/sqlstore"
)

// Scenarios.
const (
	Steady = "steady"
	Burst  = "burst"
	Scale  = "scale"
)

// Config says what to measure. Zero fields take the defaults noted.
type Config struct {
	Scenario string // steady (default), burst or scale

	// DB is the store DSN (mysql://…, postgres://…); empty means SQLite in
	// a temporary directory. Use an empty database: timers left by an
	// earlier run would fire too.
	DB string
	// Redis, when set, puts the slice index, locks and election in Redis
	// (keys under a fresh prefix per run); empty means in process.
	Redis string
	// Receiver, when set, is the base URL (http://host:port) of a receiver
	// in another process, started by Receive (`chime bench receive`): the
	// timers POST to Receiver/fire and the bench reads the fires back from
	// it, after resetting it at the start of the run. Empty means a receiver
	// in this process on loopback. Fire delays are still the receive time
	// (the receiver's clock) minus the scheduled instant (the node's clock):
	// a receiver on another host needs clocks synced well below the delays
	// measured.
	Receiver string
	// SQLiteSynchronous is the store's sqlstore.Options.Synchronous: "full"
	// (default) or "normal". A _pragma=synchronous(...) in DB wins.
	SQLiteSynchronous string

	Rate int // steady: target fires per second (default 1000)
	// Spread, for steady, uses @every timers with random phases instead of
	// cron timers that all fire on the whole second: the same rate, spread
	// evenly over each second.
	Spread   bool
	Duration time.Duration // steady: measured window (default 30s); scale: API phase (default 10s)
	Warmup   time.Duration // steady: excluded from the figures (default 5s)
	Drain    time.Duration // longest wait for late fires after the window (default 10s)
	Timers   int           // burst (default 10000) and scale (default 1000000)
	Lead     time.Duration // burst: minimum time from planned to due (default 3s)

	Buckets   int           // slice buckets (default 4 embedded, 16 with Redis)
	PoolSize  int           // executor pool (engine default 10000)
	Lookahead time.Duration // planner window (default 1m, scale 10m)
	// ClaimAhead is how long before its instant the trigger claims a run
	// (engine default 50ms).
	ClaimAhead time.Duration

	CPUProfile string // write a CPU profile of the measured phase here
	Trace      string // write an execution trace of the first 5 s of the measured phase here
	MemProfile string // write a heap profile at the end here

	Logger *slog.Logger // engine logs; default: warnings to stderr
}

func (c *Config) defaults() {
	if c.Scenario == "" {
		c.Scenario = Steady
	}
	if c.Rate <= 0 {
		c.Rate = 1000
	}
	if c.Duration <= 0 {
		c.Duration = 30 * time.Second
		if c.Scenario == Scale {
			c.Duration = 10 * time.Second
		}
	}
	if c.Warmup <= 0 {
		c.Warmup = 5 * time.Second
	}
	if c.Drain <= 0 {
		c.Drain = 10 * time.Second
	}
	if c.Timers <= 0 {
		c.Timers = 10000
		if c.Scenario == Scale {
			c.Timers = 1000000
		}
	}
	if c.Lead <= 0 {
		c.Lead = 3 * time.Second
	}
	if c.Buckets <= 0 {
		c.Buckets = 4
		if c.Redis != "" {
			c.Buckets = 16
		}
	}
	if c.Lookahead <= 0 {
		c.Lookahead = time.Minute
		if c.Scenario == Scale {
			c.Lookahead = 10 * time.Minute
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
}

// Params are the run parameters as reported.
type Params struct {
	Scenario string `json:"scenario"`
	Backend  string `json:"backend"` // "sqlite+memory", "mysql+redis", …
	// Synchronous is the SQLite commit durability asked for (full or
	// normal); empty for the other stores.
	Synchronous string `json:"sqlite_synchronous,omitempty"`
	Receiver    string `json:"receiver"` // "in-process" or the remote receiver's URL
	Rate        int    `json:"rate,omitempty"`
	Duration    string `json:"duration,omitempty"`
	Warmup      string `json:"warmup,omitempty"`
	Timers      int    `json:"timers"`
	Buckets     int    `json:"buckets"`
	PoolSize    int    `json:"pool_size"`
	Lookahead   string `json:"lookahead"`
	ClaimAhead  string `json:"claim_ahead"`
	Mix         string `json:"mix"`
}

// Machine describes where the figures were taken.
type Machine struct {
	CPU        string `json:"cpu"`
	Cores      int    `json:"cores"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	Race       bool   `json:"race_detector"`
}

// Delays are fire delay percentiles (scheduled instant → callback
// received), in milliseconds.
type Delays struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// Resources is what the node process used.
type Resources struct {
	CPUSeconds float64 `json:"cpu_seconds"`  // user+system over the measured phase
	CPUCores   float64 `json:"cpu_cores"`    // CPUSeconds / wall seconds
	PeakRSSMiB float64 `json:"peak_rss_mib"` // getrusage maxrss, whole process life
	// PeakAnonMiB is the peak of the RSS that no file backs (Linux
	// RssAnon, sampled every 100 ms): the RSS without the pages of the
	// SQLite file mapped in memory, which are page cache.
	PeakAnonMiB float64 `json:"peak_anon_rss_mib"`
	PeakGoMiB   float64 `json:"peak_go_mib"`   // peak of runtime/metrics /memory/classes/total:bytes
	HeapMiB     float64 `json:"heap_live_mib"` // live heap after a GC at the end
}

// SteadyResult is the outcome of the steady scenario.
type SteadyResult struct {
	Timers        int                `json:"timers"`
	SetupSeconds  float64            `json:"setup_seconds"` // create timers + engine start (first plan)
	Expected      int                `json:"expected"`      // fires due in the window
	Received      int                `json:"received"`      // of those, received
	AchievedRate  float64            `json:"achieved_fires_per_second"`
	Delay         Delays             `json:"delay"`
	StartDelay    Delays             `json:"action_start_delay"` // scheduled → action started (claim, pool)
	Missed        int                `json:"missed"`
	Duplicated    int                `json:"duplicated"` // run ids received more than once, whole run
	Late1s        int                `json:"late_over_1s"`
	Slowest       []SlowFire         `json:"slowest"`        // the latest fires, latest first
	RunsSucceeded int64              `json:"runs_succeeded"` // in the store after shutdown
	RunsByStatus  StatusMap          `json:"runs_by_status"`
	UniqueFired   int                `json:"unique_fired"`   // distinct run ids received, whole run
	CleanStop     bool               `json:"clean_shutdown"` // the engine stopped and recorded its backlog in time
	Resources     Resources          `json:"resources"`
	Store         map[string]OpStats `json:"store_ops"`
}

// SlowFire is one of a steady run's latest fires: when it was due, in seconds
// into the measured window, and its fire delay. Outliers that recur at the
// same second of every minute, or every planning pass, point at their cause.
type SlowFire struct {
	At      float64 `json:"at_s"`
	DelayMS float64 `json:"delay_ms"`
}

// BurstResult is the outcome of the burst scenario.
type BurstResult struct {
	Timers         int                `json:"timers"`
	CreateSeconds  float64            `json:"create_seconds"`
	PlanSeconds    float64            `json:"plan_seconds"`
	LeadSeconds    float64            `json:"lead_seconds"`  // planned → due instant
	DrainSeconds   float64            `json:"drain_seconds"` // due instant → last callback
	Delay          Delays             `json:"delay"`
	StartDelay     Delays             `json:"action_start_delay"` // scheduled → action started
	Missed         int                `json:"missed"`
	Duplicated     int                `json:"duplicated"`
	RunsSucceeded  int64              `json:"runs_succeeded"`
	Resources      Resources          `json:"resources"`
	DrainFiresPerS float64            `json:"drain_fires_per_second"`
	Store          map[string]OpStats `json:"store_ops"`
}

// Latency is a request latency summary in milliseconds.
type Latency struct {
	Count  int     `json:"count"`
	Errors int     `json:"errors"`
	P50    float64 `json:"p50_ms"`
	P99    float64 `json:"p99_ms"`
	Max    float64 `json:"max_ms"`
}

// ScaleResult is the outcome of the scale scenario.
type ScaleResult struct {
	Timers        int                `json:"timers"`
	InsertSeconds float64            `json:"insert_seconds"`
	InsertPerS    float64            `json:"insert_timers_per_second"`
	PlanSeconds   float64            `json:"plan_seconds"`
	RunsPlanned   int                `json:"runs_planned"`
	HeapAfterPlan float64            `json:"heap_after_plan_mib"`
	PlanStore     map[string]OpStats `json:"plan_store_ops"` // store calls of the planning pass
	// CatchUpSeconds is the time from the engine's start until no pending
	// run was due more than a second before: the fires due during the plan
	// (the engine starts after it) have been made. CaughtUp is false when
	// that took longer than the bench waits (catchUpWait).
	CatchUpSeconds float64            `json:"catch_up_seconds"`
	CaughtUp       bool               `json:"caught_up"`
	API            map[string]Latency `json:"api"`
	FireDelay      Delays             `json:"fire_delay_during_api"`
	Resources      Resources          `json:"resources"`
	Store          map[string]OpStats `json:"store_ops"` // store calls of the API phase
}

// StatusMap counts runs by status.
type StatusMap map[model.RunStatus]int64

// Report is the whole outcome of a bench run.
type Report struct {
	Params  Params        `json:"params"`
	Machine Machine       `json:"machine"`
	Started time.Time     `json:"started"`
	Steady  *SteadyResult `json:"steady,omitempty"`
	Burst   *BurstResult  `json:"burst,omitempty"`
	Scale   *ScaleResult  `json:"scale,omitempty"`
}

// Run runs the scenario of cfg and returns its report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	rep := &Report{Machine: machine(), Started: time.Now().UTC()}
	rep.Params = Params{Scenario: cfg.Scenario, Backend: backendName(cfg), Receiver: receiverName(cfg), Timers: cfg.Timers,
		Buckets: cfg.Buckets, PoolSize: cfg.PoolSize, Lookahead: cfg.Lookahead.String(), ClaimAhead: "500ms"}
	if strings.HasPrefix(rep.Params.Backend, "sqlite") {
		rep.Params.Synchronous = cfg.SQLiteSynchronous
		if rep.Params.Synchronous == "" {
			rep.Params.Synchronous = sqlstore.SynchronousFull
		}
	}
	if cfg.ClaimAhead > 0 {
		rep.Params.ClaimAhead = cfg.ClaimAhead.String()
	}
	if rep.Params.PoolSize == 0 {
		rep.Params.PoolSize = 10000
	}
	var err error
	switch cfg.Scenario {
	case Steady:
		rep.Params.Rate, rep.Params.Duration, rep.Params.Warmup = cfg.Rate, cfg.Duration.String(), cfg.Warmup.String()
		rep.Params.Mix = steadyMixText
		if cfg.Spread {
			rep.Params.Mix = steadySpreadMix
		}
		rep.Steady, err = runSteady(ctx, cfg, &rep.Params)
	case Burst:
		rep.Params.Mix = "@at <one instant>"
		rep.Burst, err = runBurst(ctx, cfg)
	case Scale:
		rep.Params.Duration = cfg.Duration.String()
		rep.Params.Mix = scaleMixText
		rep.Scale, err = runScale(ctx, cfg)
	default:
		return nil, fmt.Errorf("bench: unknown scenario %q (steady, burst or scale)", cfg.Scenario)
	}
	if err != nil {
		return rep, err
	}
	if cfg.MemProfile != "" {
		if err := writeHeapProfile(cfg.MemProfile); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func backendName(cfg Config) string {
	db := "sqlite"
	switch {
	case strings.HasPrefix(cfg.DB, "mysql:"):
		db = "mysql"
	case strings.HasPrefix(cfg.DB, "postgres:"), strings.HasPrefix(cfg.DB, "postgresql:"):
		db = "postgres"
	}
	if cfg.Redis != "" {
		return db + "+redis"
	}
	return db + "+memory"
}

func receiverName(cfg Config) string {
	if cfg.Receiver != "" {
		return cfg.Receiver
	}
	return "in-process"
}

// node is one engine over its backends, and the receiver it fires at.
type node struct {
	cfg   Config
	store *timedStore
	idx   index.Index
	eng   *engine.Engine
	recv  fireLog
	run   *timedRunner
	close []func()
}

// newNode opens the store and the index/locks and assembles (but does not
// start) an engine, the same way a `chime serve` node is assembled.
func newNode(ctx context.Context, cfg Config) (*node, error) {
	n := &node{cfg: cfg}
	ok := false
	defer func() {
		if !ok {
			n.shutdown()
		}
	}()
	dsn := cfg.DB
	if dsn == "" {
		dir, err := os.MkdirTemp("", "chime-bench-")
		if err != nil {
			return nil, fmt.Errorf("bench: temp dir: %w", err)
		}
		n.close = append(n.close, func() { os.RemoveAll(dir) })
		dsn = "sqlite://" + filepath.ToSlash(filepath.Join(dir, "chime.db"))
	}
	st, err := sqlstore.Open(ctx, dsn, sqlstore.Options{Synchronous: cfg.SQLiteSynchronous})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	n.store = newTimedStore(st)
	n.close = append(n.close, func() { st.Close() })

	var locker lock.Locker
	var elector lock.Elector
	if cfg.Redis != "" {
		opts, err := redis.ParseURL(cfg.Redis)
		if err != nil {
			return nil, fmt.Errorf("bench: redis url: %w", err)
		}
		client := redis.NewClient(opts)
		n.close = append(n.close, func() { client.Close() })
		if err := client.Ping(ctx).Err(); err != nil {
			return nil, fmt.Errorf("bench: redis: %w", err)
		}
		prefix := "chimebench-" + randHex(4)
		n.idx = redisindex.New(client, redisindex.Options{Prefix: prefix, Buckets: cfg.Buckets})
		locker = redislock.NewLocker(client, redislock.Options{Prefix: prefix})
		elector = redislock.NewElector(client, redislock.Options{Prefix: prefix})
	} else {
		n.idx = memindex.New(cfg.Buckets)
		locker = memlock.NewLocker(nil)
		elector = memlock.NewElector(nil)
	}
	if cfg.Receiver != "" {
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
	n.run = &timedRunner{next: executor.NewHTTPRunner()}
	n.eng, err = engine.New(engine.Config{
		Runners: map[string]executor.Runner{model.ActionHTTP: n.run},
		Store:   n.store, Index: n.idx, Locker: locker, Elector: elector,
		NodeID: "bench-" + randHex(4), Lookahead: cfg.Lookahead, PoolSize: cfg.PoolSize, ClaimAhead: cfg.ClaimAhead,
		Logger: cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	ok = true
	return n, nil
}

// stopEngine shuts the engine down, flushing recorded results. It waits at
// most shutdownWait: an overloaded node may take much longer to record its
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

// timer returns an enabled timer with an HTTP action to the receiver.
func (n *node) timer(name, spec string, created time.Time) *model.Timer {
	return &model.Timer{
		ID: newID(), App: "bench", Name: name, Schedule: spec, Timezone: "UTC", Enabled: true,
		Action:  model.Action{Type: model.ActionHTTP, HTTP: &model.HTTPAction{Method: "POST", URL: n.recv.fireURL()}},
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
				if err := n.store.CreateTimer(ctx, timers[i]); err != nil {
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

var idSeq atomic.Uint64

// newID returns a unique, roughly time-ordered timer id.
func newID() string {
	return fmt.Sprintf("b%013x%08x%s", time.Now().UnixNano()/1000, idSeq.Add(1), randHex(2))
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// delays summarises durations in nanoseconds.
func delays(ns []int64) Delays {
	if len(ns) == 0 {
		return Delays{}
	}
	slices.Sort(ns)
	return Delays{Count: len(ns), P50: ms(pct(ns, 0.50)), P90: ms(pct(ns, 0.90)),
		P99: ms(pct(ns, 0.99)), Max: ms(ns[len(ns)-1])}
}

// pct is the nearest-rank percentile of sorted values.
func pct(sorted []int64, q float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// sampler measures the process's resources over a phase.
type sampler struct {
	start   time.Time
	cpu0    time.Duration
	peak    atomic.Int64 // Go runtime memory
	anon    atomic.Int64 // anonymous RSS
	stop    chan struct{}
	stopped chan struct{}
}

func startSampler() *sampler {
	s := &sampler{start: time.Now(), cpu0: cpuTime(), stop: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(s.stopped)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			s.sample()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) sample() {
	m := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(m)
	if m[0].Value.Kind() == metrics.KindUint64 {
		storeMax(&s.peak, int64(m[0].Value.Uint64()))
	}
	storeMax(&s.anon, anonRSS())
}

// storeMax raises p to v if v is larger.
func storeMax(p *atomic.Int64, v int64) {
	for {
		old := p.Load()
		if v <= old || p.CompareAndSwap(old, v) {
			return
		}
	}
}

// done stops sampling and returns the resources used since start.
func (s *sampler) done() Resources {
	close(s.stop)
	<-s.stopped
	s.sample()
	wall := time.Since(s.start).Seconds()
	cpu := (cpuTime() - s.cpu0).Seconds()
	r := Resources{CPUSeconds: cpu, PeakRSSMiB: mib(maxRSS()), PeakAnonMiB: mib(s.anon.Load()), PeakGoMiB: mib(s.peak.Load()), HeapMiB: liveHeapMiB()}
	if wall > 0 {
		r.CPUCores = cpu / wall
	}
	return r
}

// liveHeapMiB runs a GC and returns the live heap.
func liveHeapMiB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return mib(int64(ms.HeapAlloc))
}

// startCPUProfile starts a CPU profile into path; the returned func stops
// it. With an empty path it does nothing.
func startCPUProfile(path string) (func() error, error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("bench: cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: cpu profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// startTrace writes an execution trace of the next traceFor into path (with
// an empty path it does nothing). The returned func stops it early.
func startTrace(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("bench: trace: %w", err)
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: trace: %w", err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			trace.Stop()
			f.Close()
		})
	}
	time.AfterFunc(traceFor, stop)
	return stop, nil
}

// traceFor bounds a trace: at thousands of fires per second, seconds of
// trace are hundreds of megabytes.
const traceFor = 5 * time.Second

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: heap profile: %w", err)
	}
	runtime.GC()
	err = pprof.WriteHeapProfile(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("bench: heap profile: %w", err)
	}
	return nil
}

// machine describes this host.
func machine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(),
		OS: runtime.GOOS, Arch: runtime.GOARCH, Race: raceEnabled, CPU: "unknown"}
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return m
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			m.CPU = strings.TrimSpace(v)
			break
		}
	}
	return m
}

// waitFor polls cond every 50ms until it holds, ctx ends or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// sleepCtx sleeps d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

var errInterrupted = errors.New("bench: interrupted")

package bench

import (
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/chimehq/chime"
	"github.com/chimehq/chime/internal/engine/planner"
)

// What a bench run measures: its scenario and knobs, and their defaults.

// Scenarios.
const (
	Steady = "steady"
	Burst  = "burst"
	Scale  = "scale"
	API    = "api"
	Herd   = "herd"
)

// Defaults of Config (and of the flags of `chime bench`); the node's own
// knobs default to chime's (executor.DefaultPoolSize and the others).
const (
	DefaultRate          = 1000             // steady: fires per second
	DefaultDuration      = 30 * time.Second // steady: measured window
	DefaultScaleDuration = 10 * time.Second // scale: API phase
	DefaultWarmup        = 5 * time.Second
	DefaultDrain         = 10 * time.Second
	DefaultBurstTimers   = 10000
	DefaultScaleTimers   = 1000000
	DefaultLead          = 3 * time.Second
	// DefaultLookahead keeps the first planning pass of steady and burst
	// short; scale and api measure the node's own window,
	// planner.DefaultLookahead.
	DefaultLookahead = time.Minute
)

// Defaults of the api scenario.
const (
	DefaultAPITimers   = 400   // timers per class
	DefaultConcurrency = 8     // requests in flight
	DefaultEnable      = 10000 // every-second timers enabled in the second phase
)

// Config says what to measure. Zero fields take the defaults noted.
type Config struct {
	Scenario string // steady (default), burst, scale, api or herd

	// DB is the store DSN (mysql://…, postgres://…); empty means SQLite in
	// a temporary directory. Use an empty database: timers left by an
	// earlier run would fire too.
	DB string
	// Redis, when set, puts the slice index, locks and election in Redis
	// (keys under a fresh prefix per run).
	Redis string
	// Coordination is chime.ClusterConfig.Coordination: auto (the default: redis
	// with Redis, db on MySQL/PostgreSQL, in process on SQLite), db or
	// redis.
	Coordination string
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

	Rate int // steady: target fires per second (default DefaultRate)
	// Spread, for steady, uses @every timers with random phases instead of
	// cron timers that all fire on the whole second: the same rate, spread
	// evenly over each second.
	Spread   bool
	Duration time.Duration // steady: measured window (default DefaultDuration); scale: API phase (DefaultScaleDuration)
	Warmup   time.Duration // steady: excluded from the figures (default DefaultWarmup)
	Drain    time.Duration // longest wait for late fires after the window (default DefaultDrain)
	Timers   int           // burst (default DefaultBurstTimers), scale (DefaultScaleTimers), api: per class (DefaultAPITimers)
	Lead     time.Duration // burst: minimum time from planned to due (default DefaultLead)

	Buckets   int           // slice buckets (default chime.DefaultBuckets, chime.DefaultRedisBuckets with Redis)
	PoolSize  int           // executor pool (default executor.DefaultPoolSize)
	Lookahead time.Duration // planner window (default DefaultLookahead, scale planner.DefaultLookahead)
	// ClaimAhead is how long before its instant the trigger claims a run
	// (default trigger.DefaultClaimAhead).
	ClaimAhead time.Duration
	// FileLocks runs the node as chime.ClusterConfig.FileLocks does, without
	// Redis: the slice index reads the store (internal/coord/index/storeindex) and the
	// locks are flock files beside the SQLite file.
	FileLocks bool

	// Action is the timers' action, for steady and burst: ActionHTTP
	// (default, callbacks to the receiver) or ActionHandler (a Go handler
	// registered on the node, recording what the receiver records).
	Action string
	// Concurrency is how many requests the api scenario keeps in flight
	// (default DefaultConcurrency).
	Concurrency int
	// Enable is how many every-second timers the api scenario's second
	// phase enables (default DefaultEnable); negative skips that phase.
	Enable int

	CPUProfile string // write a CPU profile of the measured phase here
	Trace      string // write an execution trace of the first 5 s of the measured phase here
	MemProfile string // write a heap profile at the end here

	// Baseline, for herd, sends the same herds from a bare net/http
	// client on the seconds between chime's (see baseline.go).
	Baseline bool
	// BaselineConns is the bare client's keep-alive connections (default
	// DefaultBaselineConns).
	BaselineConns int

	Logger *slog.Logger // engine logs; default: warnings to stderr
}

func (c *Config) defaults() {
	if c.Scenario == "" {
		c.Scenario = Steady
	}
	if c.Rate <= 0 {
		c.Rate = DefaultRate
	}
	if c.Duration <= 0 {
		c.Duration = DefaultDuration
		if c.Scenario == Scale {
			c.Duration = DefaultScaleDuration
		}
		if c.Scenario == Herd {
			c.Duration = DefaultHerdDuration
		}
	}
	if c.Warmup <= 0 {
		c.Warmup = DefaultWarmup
	}
	if c.Drain <= 0 {
		c.Drain = DefaultDrain
	}
	if c.Timers <= 0 {
		c.Timers = DefaultBurstTimers
		if c.Scenario == Scale {
			c.Timers = DefaultScaleTimers
		}
		if c.Scenario == API {
			c.Timers = DefaultAPITimers
		}
		if c.Scenario == Herd {
			c.Timers = DefaultHerdTimers
		}
	}
	if c.BaselineConns <= 0 {
		c.BaselineConns = DefaultBaselineConns
	}
	if c.Lead <= 0 {
		c.Lead = DefaultLead
	}
	if c.Buckets <= 0 {
		switch {
		case c.Redis != "":
			c.Buckets = chime.DefaultRedisBuckets
		case c.Coordination == "db" || strings.HasPrefix(c.DB, "mysql:") || strings.HasPrefix(c.DB, "postgres:") || strings.HasPrefix(c.DB, "postgresql:"):
			c.Buckets = chime.DefaultDBBuckets
		default:
			c.Buckets = chime.DefaultBuckets
		}
	}
	if c.Lookahead <= 0 {
		c.Lookahead = DefaultLookahead
		if c.Scenario == Scale || c.Scenario == API {
			c.Lookahead = planner.DefaultLookahead
		}
	}
	if c.Action == "" {
		c.Action = ActionHTTP
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Enable == 0 {
		c.Enable = DefaultEnable
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
}

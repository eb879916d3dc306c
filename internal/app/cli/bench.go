package cli

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	chimelib "github.com/chimehq/chime"
	"github.com/chimehq/chime/internal/app/bench"
	"github.com/chimehq/chime/internal/engine/executor"
	"github.com/chimehq/chime/internal/engine/planner"
	"github.com/chimehq/chime/internal/engine/trigger"
	"github.com/chimehq/chime/internal/store/sqlstore"
)

func init() { addCommand(newBenchCmd) }

func newBenchCmd() *cobra.Command {
	var (
		cfg     bench.Config
		asJSON  bool
		verbose bool
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure fire delay, throughput and scale of an in-process node",
		Long: `bench runs a chime node in this process, built as chime serve builds its
node (chime.New), over SQLite in a temporary directory (default, with
--file-locks as chime serve --file-locks) or over --db and --redis, fires HTTP callbacks at a
receiver (on loopback in this process, or the separate process that
"chime bench receive" runs, with --receiver), and reports fire delay (scheduled instant → callback
received), achieved fires per second, missed and duplicated fires, CPU and
memory.

Scenarios:
  steady  timers adding up to --rate fires/s, measured for --duration after --warmup
  burst   --timers one-shot timers all due at the same instant
  scale   --timers enabled timers (hourly/daily/every-minute) inserted through
          the store; one planning pass timed; API latency under that load
  api     REST API latency of create, update, disable and enable for --timers
          every-second and --timers hourly timers, interleaved, --concurrency
          requests in flight; then --enable every-second timers created
          disabled, all enabled through the API, and waited for until each fired
  herd    --timers cron timers all due on the same even seconds (default 1000);
          with --baseline, a bare net/http client sends the same herds on the
          odd seconds, and the report gives chime/baseline

--action handler gives the timers of steady and burst a Go handler
registered on the node instead of an HTTP callback.

Use an empty database with --db: timers left by an earlier run fire too.
With --receiver, CPU and memory are still those of this process only, and
the receiver's clock must agree with this one's (same host, or synced).`,
		Example: `  chime bench --scenario steady --rate 5000 --duration 30s
  chime bench --scenario burst --timers 100000 --json
  chime bench --scenario scale --timers 1000000 --cpuprofile cpu.out
  chime bench --scenario api --timers 400 --enable 10000
  chime bench --scenario steady --rate 30000 --spread --action handler
  chime bench --scenario herd --timers 1000 --baseline
  chime bench --db postgres://u:p@127.0.0.1/chime --redis redis://127.0.0.1:6379/0
  chime bench receive --listen 127.0.0.1:9090 &
  chime bench --rate 1000 --receiver http://127.0.0.1:9090`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Logger = benchLogger(cmd, verbose)
			rep, err := bench.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return rep.WriteTable(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Scenario, "scenario", bench.Steady, "steady, burst, scale, api or herd")
	f.StringVar(&cfg.DB, "db", "", "store DSN (mysql://… or postgres://…); default SQLite in a temp dir")
	f.StringVar(&cfg.Redis, "redis", "", "redis://… for the slice index and locks")
	f.StringVar(&cfg.Coordination, "coordination", "auto", "where the slice locks, elections and index live: auto (redis with --redis, db on MySQL/PostgreSQL, in process on SQLite), db or redis")
	cfg.SQLiteSynchronous = sqlstore.SynchronousFull
	f.Var(newChoice(&cfg.SQLiteSynchronous, sqlstore.SynchronousFull, sqlstore.SynchronousNormal), "sqlite-synchronous",
		"SQLite commit durability, as chime serve's flag: full or normal")
	f.StringVar(&cfg.Receiver, "receiver", "", "base URL of a separate receiver (chime bench receive), e.g. http://127.0.0.1:9090; default in process")
	f.IntVar(&cfg.Rate, "rate", bench.DefaultRate, "steady: target fires per second")
	f.BoolVar(&cfg.Spread, "spread", false, "steady: spread fires over each second (@every with random phases) instead of cron timers aligned on the second")
	f.DurationVar(&cfg.Duration, "duration", 0, fmt.Sprintf("steady: measured window (default %v); scale: API phase (default %v); herd: measured window (default %v)", bench.DefaultDuration, bench.DefaultScaleDuration, bench.DefaultHerdDuration))
	f.DurationVar(&cfg.Warmup, "warmup", 0, fmt.Sprintf("steady: warm-up excluded from the figures (default %v)", bench.DefaultWarmup))
	f.DurationVar(&cfg.Drain, "drain", 0, fmt.Sprintf("longest wait for late fires after the window (default %v)", bench.DefaultDrain))
	f.IntVar(&cfg.Timers, "timers", 0, fmt.Sprintf("burst: timers due at once (default %d); scale: timers (default %d); api: timers per class (default %d); herd: timers per herd (default %d)", bench.DefaultBurstTimers, bench.DefaultScaleTimers, bench.DefaultAPITimers, bench.DefaultHerdTimers))
	cfg.Action = bench.ActionHTTP
	f.Var(newChoice(&cfg.Action, bench.ActionHTTP, bench.ActionHandler), "action",
		"steady and burst: the timers' action, an HTTP callback to the receiver (http) or a Go handler registered on the node (handler)")
	f.IntVar(&cfg.Concurrency, "concurrency", bench.DefaultConcurrency, "api: requests in flight")
	f.IntVar(&cfg.Enable, "enable", 0, fmt.Sprintf("api: every-second timers enabled at once in the second phase (default %d; negative skips the phase)", bench.DefaultEnable))
	f.IntVar(&cfg.Buckets, "buckets", 0, fmt.Sprintf("slice buckets (default %d embedded, %d with --coordination db, %d with --redis)", chimelib.DefaultBuckets, chimelib.DefaultDBBuckets, chimelib.DefaultRedisBuckets))
	f.IntVar(&cfg.PoolSize, "pool-size", 0, fmt.Sprintf("executor pool size (default %d)", executor.DefaultPoolSize))
	f.DurationVar(&cfg.Lookahead, "lookahead", 0, fmt.Sprintf("planner look-ahead (default %v; scale and api %v)", bench.DefaultLookahead, planner.DefaultLookahead))
	f.DurationVar(&cfg.ClaimAhead, "claim-ahead", 0, fmt.Sprintf("claim runs this long before their instant (default %v)", trigger.DefaultClaimAhead))
	f.BoolVar(&cfg.FileLocks, "file-locks", false, "without --redis, run the node as chime serve --file-locks: the slice index reads the store and the locks are files beside the SQLite file")
	f.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of the measured phase to this file")
	f.StringVar(&cfg.Trace, "trace", "", "steady, herd: write an execution trace of the first 5s of the measured phase to this file (go tool trace)")
	f.StringVar(&cfg.MemProfile, "memprofile", "", "write a heap profile to this file (steady and herd: as the measured window ends; scale: as the API phase ends, and to FILE.plan after the plan; the others: at the end), and to FILE.peak the heap at the largest live heap a GC marked in the measured phase")
	f.BoolVar(&cfg.Baseline, "baseline", false, "herd: send the same herds from a bare net/http client on the seconds between chime's, and report chime/baseline")
	f.IntVar(&cfg.BaselineConns, "baseline-conns", bench.DefaultBaselineConns, "herd: keep-alive connections (one sending goroutine each) of the --baseline client")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.BoolVarP(&verbose, "verbose", "v", false, "log the engine's info messages")
	cmd.AddCommand(newBenchReceiveCmd())
	return cmd
}

func newBenchReceiveCmd() *cobra.Command {
	var (
		listen  string
		verbose bool
	)
	cmd := &cobra.Command{
		Use:   "receive",
		Short: "Run only the callback receiver, for chime bench --receiver",
		Long: `receive runs the HTTP receiver of chime bench in a process of its own
until SIGINT or SIGTERM, and prints its URL (the value for --receiver).

It records every callback POSTed to /fire with its receive time and its
X-Chime-Run-ID, X-Chime-Timer-ID and X-Chime-Scheduled-At headers, serves
them as JSON at GET /fires?since=N (in pages: ask again from "next" until it
reaches "total"), and forgets them on DELETE /fires or POST /reset, which
chime bench sends at the start of each run.`,
		Example: `  chime bench receive --listen 127.0.0.1:9090
  chime bench --scenario steady --rate 1000 --receiver http://127.0.0.1:9090`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := benchLogger(cmd, verbose)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return bench.Receive(ctx, listen, cmd.OutOrStdout(), log)
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:9090", "address to listen on (host:port; port 0 picks one)")
	f.BoolVarP(&verbose, "verbose", "v", false, "log when the receiver starts and stops")
	return cmd
}

// benchLogger logs warnings to stderr, and info messages too when verbose.
func benchLogger(cmd *cobra.Command, verbose bool) *slog.Logger {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
}

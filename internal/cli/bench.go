package cli

import (
	"encoding/json"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/chimehq/chime/internal/bench"
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
		Long: `bench runs a chime engine in this process, over SQLite in a temporary
directory (default) or over --db and --redis, fires HTTP callbacks at a
receiver on loopback, and reports fire delay (scheduled instant → callback
received), achieved fires per second, missed and duplicated fires, CPU and
memory.

Scenarios:
  steady  timers adding up to --rate fires/s, measured for --duration after --warmup
  burst   --timers one-shot timers all due at the same instant
  scale   --timers enabled timers (hourly/daily/every-minute) inserted through
          the store; one planning pass timed; API latency under that load

Use an empty database with --db: timers left by an earlier run fire too.`,
		Example: `  chime bench --scenario steady --rate 5000 --duration 30s
  chime bench --scenario burst --timers 100000 --json
  chime bench --scenario scale --timers 1000000 --cpuprofile cpu.out
  chime bench --db postgres://u:p@127.0.0.1/chime --redis redis://127.0.0.1:6379/0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelInfo
			}
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
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
	f.StringVar(&cfg.Scenario, "scenario", bench.Steady, "steady, burst or scale")
	f.StringVar(&cfg.DB, "db", "", "store DSN (mysql://… or postgres://…); default SQLite in a temp dir")
	f.StringVar(&cfg.Redis, "redis", "", "redis://… for the slice index and locks; default in process")
	f.IntVar(&cfg.Rate, "rate", 1000, "steady: target fires per second")
	f.BoolVar(&cfg.Spread, "spread", false, "steady: spread fires over each second (@every with random phases) instead of cron timers aligned on the second")
	f.DurationVar(&cfg.Duration, "duration", 0, "steady: measured window (default 30s); scale: API phase (default 10s)")
	f.DurationVar(&cfg.Warmup, "warmup", 0, "steady: warm-up excluded from the figures (default 5s)")
	f.DurationVar(&cfg.Drain, "drain", 0, "longest wait for late fires after the window (default 10s)")
	f.IntVar(&cfg.Timers, "timers", 0, "burst: timers due at once (default 10000); scale: timers (default 1000000)")
	f.IntVar(&cfg.Buckets, "buckets", 0, "slice buckets (default 4, 16 with --redis)")
	f.IntVar(&cfg.PoolSize, "pool-size", 0, "executor pool size (default 10000)")
	f.DurationVar(&cfg.Lookahead, "lookahead", 0, "planner look-ahead (default 1m; scale 10m)")
	f.DurationVar(&cfg.ClaimAhead, "claim-ahead", 0, "claim runs this long before their instant (engine default 500ms)")
	f.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of the measured phase to this file")
	f.StringVar(&cfg.Trace, "trace", "", "steady: write an execution trace of the first 5s of the measured phase to this file (go tool trace)")
	f.StringVar(&cfg.MemProfile, "memprofile", "", "write a heap profile at the end to this file")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.BoolVarP(&verbose, "verbose", "v", false, "log the engine's info messages")
	return cmd
}

package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/chimehq/chime/internal/chaos"
)

func init() { addCommand(newChaosCmd) }

func newChaosCmd() *cobra.Command {
	var (
		cfg      chaos.Config
		asJSON   bool
		jsonFile string
		verbose  bool
	)
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Run a chime cluster under faults and check that no fire is lost or doubled",
		Long: `chaos starts --nodes processes of this binary (chime serve) on loopback,
an HTTP receiver and --timers timers (every second, every 3 seconds,
@every 2s, one-shots, once a minute), then for --duration injects faults one
after the other, about every --fault-every: SIGKILL a node and restart it,
SIGSTOP a node longer than its lease and SIGCONT it, and with the mysql
backend restart Redis (--redis-restart-cmd) and the database
(--db-restart-cmd). After a settle phase it compares every expected fire
with the callbacks received and the runs in the store.

Backends: sqlite (the nodes share one SQLite file with --file-locks) and
mysql (a fresh database on --db, the slice index and locks on --redis).

The exit status is 1 when a fire was missed or executed twice (a run id
delivered twice with the same attempt, or one fire under two run ids), 3
when a fault could not be injected (a restart command failed).
Redeliveries with a higher attempt, from attempts in flight at a fault, are
allowed and counted. scripts/chaos.sh runs both backends with their servers.`,
		Example: `  chime chaos --duration 60s
  chime chaos --backend mysql --db mysql://root@127.0.0.1:3306/ --redis redis://127.0.0.1:6379/5 --json
  scripts/chaos.sh long`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelInfo
			}
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			rep, err := chaos.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if jsonFile != "" {
				data, err := json.MarshalIndent(rep, "", "  ")
				if err != nil {
					return err
				}
				if err := os.WriteFile(jsonFile, append(data, '\n'), 0o644); err != nil {
					return fmt.Errorf("chaos: write report: %w", err)
				}
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				err = enc.Encode(rep)
			} else {
				err = rep.WriteTable(cmd.OutOrStdout())
			}
			if err != nil {
				return err
			}
			if !rep.OK() {
				return &ExitError{Code: 1, Err: errors.New("chaos: guarantees broken (missed or duplicated fires); node logs in " + rep.WorkDir)}
			}
			if rep.FaultErrors > 0 {
				return &ExitError{Code: 3, Err: fmt.Errorf("chaos: %d faults could not be injected (see the report's faults)", rep.FaultErrors)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Backend, "backend", chaos.BackendSQLite, "sqlite or mysql")
	f.StringVar(&cfg.DB, "db", "", "mysql: server DSN mysql://user:pass@host:port/ (a fresh database is created)")
	f.StringVar(&cfg.Redis, "redis", "", "mysql: redis://host:port/N for the slice index and locks")
	f.BoolVar(&cfg.RedisFlush, "redis-flush", false, "empty the --redis DB first (only if it is chaos's own)")
	f.IntVar(&cfg.Nodes, "nodes", 3, "node processes")
	f.IntVar(&cfg.Timers, "timers", 300, "timers")
	f.DurationVar(&cfg.Duration, "duration", 60*time.Second, "fault phase")
	f.DurationVar(&cfg.FaultEvery, "fault-every", 8*time.Second, "mean interval between faults (uniform in [½, 1½]×)")
	f.DurationVar(&cfg.Warmup, "warmup", 5*time.Second, "time without faults before the first one")
	f.DurationVar(&cfg.Settle, "settle", 0, "least settle time after the faults (default lease + lock TTL + 5s)")
	f.DurationVar(&cfg.MaxSettle, "max-settle", 150*time.Second, "longest wait for fires still missing after the faults")
	f.DurationVar(&cfg.FaultWindow, "fault-window", 0, "fires scheduled this long after a fault count as during it (default lease + lock TTL + 2s)")
	f.DurationVar(&cfg.KillPause, "kill-pause", 3*time.Second, "longest pause before a killed node restarts (at least 1s)")
	f.DurationVar(&cfg.LockTTL, "lock-ttl", 3*time.Second, "--lock-ttl of the nodes")
	f.DurationVar(&cfg.Lease, "lease", 5*time.Second, "--lease of the nodes")
	f.DurationVar(&cfg.Lookahead, "lookahead", 2*time.Minute, "--lookahead of the nodes")
	f.StringVar(&cfg.RedisRestartCmd, "redis-restart-cmd", "", "shell command that restarts Redis (enables the redis fault)")
	f.StringVar(&cfg.DBRestartCmd, "db-restart-cmd", "", "shell command that restarts the database (enables the db fault)")
	f.StringSliceVar(&cfg.Faults, "faults", nil, "fault kinds to inject: kill, stop, redis, db (default all possible)")
	f.StringVar(&cfg.WorkDir, "work-dir", "", "node data dirs and logs (default a temp dir, removed when the run passes)")
	f.BoolVar(&cfg.Keep, "keep", false, "keep the work dir and the database")
	f.Uint64Var(&cfg.Seed, "seed", 0, "random seed (default from the clock)")
	f.StringVar(&cfg.NodeLogLevel, "node-log-level", "info", "--log-level of the nodes")
	f.StringVar(&cfg.Bin, "bin", "", "chime binary for the nodes (default this one)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&jsonFile, "json-file", "", "also write the report as JSON to this file")
	f.BoolVarP(&verbose, "verbose", "v", false, "log progress (faults, settling)")
	return cmd
}
